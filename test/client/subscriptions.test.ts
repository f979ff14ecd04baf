/**
 * The client's subscriptions API, its pull-wake worker and its webhook receiver, over
 * HTTP against a real server: create and re-confirm, membership, claim, inclusive acks,
 * fencing, release, lease expiry, and signed webhook deliveries verified with the
 * server's published JWK Set.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeDir, startServer } from '../helpers/server.js';
import { TestClock } from '../helpers/clock.js';
import { until } from '../helpers/processing.js';
import {
  AlreadyClaimedError,
  NotFoundError,
  RillClient,
  RillError,
  runPullWorker,
  WakeFencedError,
  WebhookJwksCache,
  wakeRequestListener,
  type PullWorkerOptions,
  type PullWorkerSummary,
  type StreamHandle,
  type SubscriptionConfig,
  type Subscriptions,
  type WakeNotification,
  type WakeOutcome,
} from '../../src/client/index.js';


interface SubscriptionServer {
  url: string;
  stop(): Promise<void>;
}

/** The server's clock: a test moves it past a lease's end instead of waiting for it. */
const clock = new TestClock();

/** The one place the server under test is started. */
async function startSubscriptionServer(): Promise<SubscriptionServer> {
  const server = await startServer({ args: ['--webhook-allow-localhost', '--long-poll-timeout', '1s'], clock });
  return { url: server.url, stop: async () => { await server.stop(); removeDir(server.dataDir); } };
}

let server: SubscriptionServer;
let client: RillClient;
let subs: Subscriptions;

beforeAll(async () => {
  server = await startSubscriptionServer();
  client = new RillClient({ url: server.url });
  subs = client.subscriptions();
});

afterAll(async () => {
  await server?.stop();
});

async function jsonStream(path: string) {
  const stream = client.stream(`v1/stream/${path}`);
  await stream.create({ contentType: 'application/json' });
  return stream;
}

async function tailOf(path: string): Promise<string> {
  return (await client.stream(`v1/stream/${path}`).head()).nextOffset;
}

async function failure(promise: Promise<unknown>): Promise<RillError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(RillError);
  return error as RillError;
}

/** The first wake event on a wake stream after `offset` for subscription `id`. */
async function nextWakeEvent(wakeStream: string, id: string, offset = '-1'): Promise<Record<string, unknown>> {
  const stop = AbortSignal.timeout(10_000);
  for await (const message of client.stream(`v1/stream/${wakeStream}`).messages<Record<string, unknown>>({ offset, live: 'long-poll', signal: stop })) {
    if (message.value.subscription_id === id) return message.value;
  }
  throw new Error('the wake stream ended');
}

/** Waits until `check` holds (the server's state is asked again until it does). */
const eventually = (check: () => Promise<boolean>, what: string): Promise<void> => until(check, what);

/** A pull-wake subscription `id` on one JSON stream `{id}/s`, with its own wake stream `{id}/wake`. */
async function pullSubscription(id: string, extra: Partial<SubscriptionConfig> = {}): Promise<StreamHandle> {
  await jsonStream(`${id}/wake`);
  const stream = await jsonStream(`${id}/s`);
  await subs.put(id, { type: 'pull-wake', streams: [`${id}/s`], wakeStream: `${id}/wake`, ...extra });
  return stream;
}

/** Runs a worker until the returned function stops it; that function answers its summary. */
function startWorker(options: Omit<PullWorkerOptions, 'subscriptions' | 'signal'>): () => Promise<PullWorkerSummary> {
  const stop = new AbortController();
  const run = runPullWorker({ subscriptions: subs, signal: stop.signal, ...options });
  return () => {
    stop.abort();
    return run;
  };
}

async function cursorsAtTails(id: string): Promise<boolean> {
  const subscription = await subs.get(id);
  const tails = await Promise.all(subscription.streams.map((link) => tailOf(link.path)));
  return subscription.streams.length > 0 && subscription.streams.every((link, i) => link.ackedOffset === tails[i]);
}

describe('subscriptions API', () => {
  it('creates, re-confirms by configuration, refuses another under the same id, links and unlinks, deletes', async () => {
    await jsonStream('subs-api/wake');
    await jsonStream('subs-api/data/a');
    await client.stream('v1/stream/subs-api/data/a').appendJson({ n: 1 });
    const config = { type: 'pull-wake' as const, pattern: 'subs-api/data/*', wakeStream: 'subs-api/wake', leaseTtlMs: 5_000, description: 'api test' };
    const first = await subs.put('api-1', config);
    expect(first.created).toBe(true);
    expect(first.subscription).toMatchObject({ id: 'api-1', type: 'pull-wake', pattern: 'subs-api/data/*', wakeStream: 'subs-api/wake', leaseTtlMs: 5_000, status: 'active', description: 'api test' });
    // An existing match is linked at its tail: what it held before is not work.
    expect(first.subscription.streams).toEqual([{ path: 'subs-api/data/a', linkType: 'glob', ackedOffset: await tailOf('subs-api/data/a') }]);
    expect(Date.parse(first.subscription.createdAt)).toBeGreaterThan(0);

    expect((await subs.put('api-1', config)).created).toBe(false);
    const conflict = await failure(subs.put('api-1', { ...config, description: 'another' }));
    expect([conflict.code, conflict.status]).toEqual(['SUBSCRIPTION_ALREADY_EXISTS', 409]);
    const bad = await failure(subs.put('api-bad', { ...config, leaseTtlMs: 10 }));
    expect([bad.code, bad.status]).toEqual(['BAD_REQUEST', 400]);

    await jsonStream('subs-api/other');
    await subs.addStreams('api-1', ['subs-api/other']);
    expect((await subs.get('api-1')).streams.map((s) => [s.path, s.linkType]).sort()).toEqual([
      ['subs-api/data/a', 'glob'],
      ['subs-api/other', 'explicit'],
    ]);
    await subs.removeStream('api-1', 'subs-api/other');
    expect((await subs.get('api-1')).streams.map((s) => s.path)).toEqual(['subs-api/data/a']);

    await subs.delete('api-1');
    await subs.delete('api-1'); // absent: still 204
    const gone = await failure(subs.get('api-1'));
    expect(gone).toBeInstanceOf(NotFoundError);
    expect([gone.code, gone.status]).toEqual(['SUBSCRIPTION_NOT_FOUND', 404]);
  });

  it('refuses a webhook URL that is not https to a public host', async () => {
    const refused = await failure(subs.put('api-ssrf', { type: 'webhook', streams: ['x'], webhook: { url: 'https://10.0.0.1/hook' } }));
    expect([refused.code, refused.status]).toEqual(['WEBHOOK_URL_REJECTED', 400]);
  });

  it('claims a wake, refuses a second holder, acks inclusively and never backwards, fences stale wakes, releases', async () => {
    const wakeStream = await jsonStream('subs-claim/wake');
    const data = await jsonStream('subs-claim/s1');
    const linkedAt = await tailOf('subs-claim/s1');
    await subs.put('claim-1', { type: 'pull-wake', streams: ['subs-claim/s1'], wakeStream: 'subs-claim/wake' });
    await failure(subs.claim('claim-1', 'w1')).then((e) => expect(e.code).toBe('NO_PENDING_WORK'));

    await data.appendMessages([{ n: 1 }, { n: 2 }]);
    const event = await nextWakeEvent('subs-claim/wake', 'claim-1');
    expect(event).toMatchObject({ type: 'wake', subscription_id: 'claim-1', stream: 'subs-claim/s1', generation: 1 });
    const wake = await subs.claim('claim-1', 'w1');
    const tail = await tailOf('subs-claim/s1');
    expect(wake).toMatchObject({ subscriptionId: 'claim-1', generation: 1 });
    expect(wake.streams).toEqual([{ path: 'subs-claim/s1', linkType: 'explicit', ackedOffset: linkedAt, tailOffset: tail, hasPending: true }]);
    expect(wake.token.length).toBeGreaterThan(10);

    const held = await failure(subs.claim('claim-1', 'w2'));
    expect(held).toBeInstanceOf(AlreadyClaimedError);
    expect([(held as AlreadyClaimedError).currentHolder, (held as AlreadyClaimedError).generation]).toEqual(['w1', 1]);

    const stale = await failure(subs.ack('claim-1', { ...wake, generation: wake.generation + 1 }, [{ stream: 'subs-claim/s1', offset: tail }]));
    expect(stale).toBeInstanceOf(WakeFencedError);
    expect([stale.code, stale.status]).toEqual(['FENCED', 409]);
    const beyond = await failure(subs.ack('claim-1', wake, [{ stream: 'subs-claim/s1', offset: '9'.repeat(tail.length) }]));
    expect([beyond.code, beyond.status]).toEqual(['INVALID_ACK_OFFSET', 409]);
    expect((await subs.get('claim-1')).streams[0]!.ackedOffset).toBe(linkedAt);

    expect(await subs.ack('claim-1', wake, [{ stream: 'subs-claim/s1', offset: tail }])).toEqual({ nextWake: false });
    expect((await subs.get('claim-1')).streams[0]!.ackedOffset).toBe(tail);
    const backwards = await failure(subs.ack('claim-1', wake, [{ stream: 'subs-claim/s1', offset: linkedAt }]));
    expect(backwards.code).toBe('INVALID_ACK_OFFSET');
    await subs.release('claim-1', wake);
    await failure(subs.claim('claim-1', 'w1')).then((e) => expect(e.code).toBe('NO_PENDING_WORK'));

    // New work wakes again with a newer generation; a release hands it back and fences the old wake.
    const afterFirst = await wakeStream.head();
    await data.appendJson({ n: 3 });
    expect(await nextWakeEvent('subs-claim/wake', 'claim-1', afterFirst.nextOffset)).toMatchObject({ generation: 2 });
    const second = await subs.claim('claim-1', 'w2');
    expect(second.generation).toBe(2);
    expect(second.streams[0]).toMatchObject({ ackedOffset: tail, hasPending: true });
    await subs.release('claim-1', second);
    const third = await subs.claim('claim-1', 'w3');
    expect(third.generation).toBeGreaterThan(second.generation);
    expect(await failure(subs.ack('claim-1', second, [], { done: true }))).toBeInstanceOf(WakeFencedError);
    expect(await subs.ack('claim-1', third, [{ stream: 'subs-claim/s1', offset: await tailOf('subs-claim/s1') }], { done: true })).toEqual({ nextWake: false });
    expect(await cursorsAtTails('claim-1')).toBe(true);
  });

  it('lists a scope page by page, and keeps a bucket scope apart from /v1/stream', async () => {
    await jsonStream('subs-list/wake');
    for (const id of ['list-a', 'list-b', 'list-c']) await subs.put(id, { type: 'pull-wake', streams: ['subs-list/x'], wakeStream: 'subs-list/wake' });
    const page = await subs.list({ after: 'list-', limit: 2 });
    expect(page.subscriptions.map((s) => s.id)).toEqual(['list-a', 'list-b']);
    expect(page.next).not.toBeNull();
    const ids: string[] = [];
    for await (const s of subs.all({ limit: 2 })) ids.push(s.id);
    expect(ids.filter((id) => id.startsWith('list-'))).toEqual(['list-a', 'list-b', 'list-c']);

    await client.bucket('subsbk').create();
    const bucketSubs = client.bucket('subsbk').subscriptions();
    await client.bucket('subsbk').stream('wake').create({ contentType: 'application/json' });
    await client.bucket('subsbk').stream('s1').create({ contentType: 'application/json' });
    await bucketSubs.put('list-a', { type: 'pull-wake', pattern: '*', wakeStream: 'wake' });
    expect((await bucketSubs.get('list-a')).streams.map((s) => s.path)).toEqual(['s1']);
    expect((await bucketSubs.list()).subscriptions.map((s) => s.id)).toEqual(['list-a']);
    expect((await subs.get('list-a')).pattern).toBeUndefined();
  });
});

describe('runPullWorker', () => {
  it('hands every appended message to its handler once, acks each batch after it, and stops on its signal', async () => {
    await jsonStream('subs-work/wake');
    const a = await jsonStream('subs-work/data/a');
    await subs.put('work-1', { type: 'pull-wake', pattern: 'subs-work/data/*', wakeStream: 'subs-work/wake' });
    const seen: Array<[string, unknown]> = [];
    const stop = startWorker({
      id: 'work-1',
      worker: 'worker-a',
      idleWaitMs: 2_000,
      handle: (stream, messages) => void seen.push(...messages.map((m) => [stream, m.value] as [string, unknown])),
    });
    await a.appendMessages([{ n: 1 }, { n: 2 }]);
    // A stream created after the subscription is linked by its pattern.
    const b = await jsonStream('subs-work/data/b');
    await b.appendJson({ n: 10 });
    await a.appendJson({ n: 3 });
    await eventually(async () => seen.length === 4 && (await cursorsAtTails('work-1')), 'every message handled and acked');
    const summary = await stop();
    expect(seen.filter(([s]) => s === 'subs-work/data/a').map(([, v]) => v)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    expect(seen.filter(([s]) => s === 'subs-work/data/b').map(([, v]) => v)).toEqual([{ n: 10 }]);
    expect(summary.wakes).toBeGreaterThanOrEqual(1);
    expect(summary.batches).toBeGreaterThanOrEqual(2);
    expect(summary.fenced).toBe(0);
    // Stopped: it holds no wake, so another worker can claim new work at once.
    await a.appendJson({ n: 4 });
    await eventually(async () => (await subs.claim('work-1', 'worker-b').then(() => true, () => false)), 'a claim by another worker');
  });

  it('with untilIdle, drains the pending work and resolves', async () => {
    const s = await pullSubscription('drain-1');
    await s.appendMessages([{ n: 1 }, { n: 2 }]);
    await s.appendJson({ n: 3 });
    const handled: unknown[] = [];
    const summary = await runPullWorker({ subscriptions: subs, id: 'drain-1', worker: 'cron', untilIdle: true, handle: (_s, messages) => void handled.push(...messages.map((m) => m.value)) });
    expect(handled).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    expect(summary).toMatchObject({ wakes: 1, fenced: 0, released: 0 });
    expect(await cursorsAtTails('drain-1')).toBe(true);
  });

  it('releases the wake when its handler throws, and the work comes back until handled', async () => {
    const s = await pullSubscription('fail-1');
    const errors: unknown[] = [];
    const handled: unknown[] = [];
    let calls = 0;
    const stop = startWorker({
      id: 'fail-1',
      worker: 'flaky',
      idleWaitMs: 200,
      onError: (error) => errors.push(error),
      handle: (_stream, messages) => {
        calls += 1;
        if (calls === 1) throw new Error('first attempt fails');
        handled.push(...messages.map((m) => m.value));
      },
    });
    await s.appendMessages([{ n: 1 }, { n: 2 }]);
    await eventually(async () => handled.length === 2 && (await cursorsAtTails('fail-1')), 'the work handled after a failure');
    const summary = await stop();
    expect(handled).toEqual([{ n: 1 }, { n: 2 }]);
    expect(errors.map((e) => (e as Error).message)).toEqual(['first attempt fails']);
    expect(summary.released).toBe(1);
  });

  it('drops a wake whose lease expired (fenced) and processes its work again under the new one', async () => {
    const s = await pullSubscription('lease-1', { leaseTtlMs: 1_000 });
    const handled: unknown[] = [];
    let calls = 0;
    const stop = startWorker({
      id: 'lease-1',
      worker: 'slow',
      idleWaitMs: 500,
      handle: (_stream, messages) => {
        calls += 1;
        // The first batch outlives the lease (the server's clock passes its end while the
        // handler works): its ack is fenced and the batch comes back.
        if (calls === 1) clock.advance(1_400);
        handled.push(...messages.map((m) => m.value));
      },
    });
    await s.appendJson({ n: 1 });
    await eventually(async () => calls >= 2 && (await cursorsAtTails('lease-1')), 'the work handled under a new wake');
    const summary = await stop();
    expect(summary.fenced).toBe(1);
    expect(handled).toEqual([{ n: 1 }, { n: 1 }]); // at least once: the unacked batch twice
  });
});

/** A webhook receiver on 127.0.0.1 built from wakeRequestListener; notifications queue up. */
async function startReceiver(jwks: WebhookJwksCache, outcome: (wake: WakeNotification) => WakeOutcome | void) {
  const received: WakeNotification[] = [];
  const listener = wakeRequestListener({
    jwks,
    handle: (wake) => {
      received.push(wake);
      return outcome(wake);
    },
  });
  const http: Server = createServer((req, res) => void listener(req, res));
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/hook`;
  const next = async (count: number) => {
    await until(() => received.length >= count, `webhook delivery ${count}`);
    return received[count - 1]!;
  };
  return { url, next, close: () => new Promise<void>((resolve) => http.close(() => resolve())) };
}

describe('webhook receiver', () => {
  it('verifies signed deliveries with the published JWK Set, acks by callback or by answering done, refuses forgeries', async () => {
    const s = await jsonStream('subs-hook/s');
    let mode: 'callback' | 'answer' = 'callback';
    const probe = await subs.put('hook-probe', { type: 'webhook', streams: ['subs-hook/none'], webhook: { url: 'http://127.0.0.1:9/never' } });
    const signing = probe.subscription.webhook!.signing!;
    expect(signing.alg).toBe('ed25519');
    const jwks = new WebhookJwksCache(signing.jwksUrl);
    expect((await jwks.keys()).keys.map((k) => k.kid)).toContain(signing.kid);
    const receiver = await startReceiver(jwks, (wake) => (mode === 'callback' ? { acks: wake.streams.map((i) => ({ stream: i.path, offset: i.tailOffset })) } : undefined));
    try {
      await subs.put('hook-1', { type: 'webhook', streams: ['subs-hook/s'], webhook: { url: receiver.url } });
      await s.appendMessages([{ n: 1 }, { n: 2 }]);
      const first = await receiver.next(1);
      expect(first).toMatchObject({ subscriptionId: 'hook-1', generation: 1 });
      expect(first.streams).toEqual([expect.objectContaining({ path: 'subs-hook/s', tailOffset: await tailOf('subs-hook/s'), hasPending: true })]);
      expect(first.callbackUrl).toBe(subs.urlOf('hook-1', 'callback'));
      await eventually(() => cursorsAtTails('hook-1'), 'the callback ack');

      // Answering {"done": true} acks the wake's snapshot without a callback.
      mode = 'answer';
      await s.appendJson({ n: 3 });
      const second = await receiver.next(2);
      expect(second.generation).toBeGreaterThan(first.generation);
      await eventually(() => cursorsAtTails('hook-1'), 'the snapshot acked by the answer');

      const forged = await fetch(receiver.url, { method: 'POST', headers: { 'webhook-signature': `t=${Math.floor(Date.now() / 1000)},kid=${signing.kid},ed25519=AAAA` }, body: '{}' });
      expect(forged.status).toBe(401);
      expect(jwks.fetches).toBe(1);
    } finally {
      await receiver.close();
      await subs.delete('hook-1');
      await subs.delete('hook-probe');
    }
  });
});
