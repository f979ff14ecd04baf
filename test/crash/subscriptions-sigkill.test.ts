/**
 * Subscriptions across crashes: 24 streams matched by one pattern take appends while a
 * pull-wake worker and a webhook worker read and acknowledge them; the real binary on
 * SQLite is SIGKILLed and restarted on the same data four times. In the end every
 * acknowledged append was processed by both workers at least once, every ack the server
 * answered 200 survived, and no cursor ever stood at an offset its worker did not ack.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { removeDir, startServer, type ServerProcess } from '../helpers/server.js';
import { eventually, startReceiver, type Delivery, type Receiver } from '../helpers/webhooks.js';

const STREAMS = 24;
const KILLS = 4;
/**
 * Writes acknowledged before the writer stops: it goes on after the last restart until
 * there are this many, so that a slow machine (86 acknowledged in the kills' 5 s under a
 * load average of 8) still gives the workers a history to lose. Bounded by MAX_WRITE_TRIES.
 */
const MIN_WRITES = 120;
const MAX_WRITE_TRIES = 100_000;
const ZERO = '0'.repeat(20);
const JSON_TYPE = { 'content-type': 'application/json' };
const ARGS = ['--webhook-allow-localhost', '--subscription-sweep', '100ms', '--webhook-timeout', '2s'];

let server: ServerProcess | null = null;
let dataDir: string | undefined;
let receiver: Receiver | null = null;
/** The base URL of the running server; requests made while it is down fail and are retried. */
let base = '';

afterAll(async () => {
  await server?.kill();
  await receiver?.close();
  if (dataDir) removeDir(dataDir);
});

const quietly = async <T>(work: () => Promise<T>): Promise<T | null> => {
  try {
    return await work();
  } catch {
    return null;
  }
};
const postJson = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${base}${path}`, { method: 'POST', body: JSON.stringify(body), headers: { ...JSON_TYPE, ...headers } });

/** What a worker saw and acknowledged. */
class Worker {
  readonly processed = new Set<string>();
  /** Offsets sent in acks, by stream: the stored cursor must always be one of them (or where it started). */
  readonly acked = new Map<string, Set<string>>();
  /** The highest offset acked with a 200, by stream: it must survive every crash. */
  readonly highest = new Map<string, string>();

  async read(path: string, from: string, to: string): Promise<boolean> {
    let offset = from;
    while (offset < to) {
      const res = await fetch(`${base}/v1/stream/${path}?offset=${offset}`);
      if (res.status !== 200) return false;
      for (const m of (await res.json()) as Array<{ s: string; i: number }>) this.processed.add(`${m.s}#${m.i}`);
      offset = res.headers.get('stream-next-offset')!;
    }
    return true;
  }

  /** Before an ack is sent: the server may store it even if its answer is lost in a crash. */
  ackSent(acks: Array<{ stream: string; offset: string }>): void {
    for (const { stream, offset } of acks) {
      let set = this.acked.get(stream);
      if (!set) this.acked.set(stream, (set = new Set([ZERO])));
      set.add(offset);
    }
  }

  ackAnswered(acks: Array<{ stream: string; offset: string }>): void {
    for (const { stream, offset } of acks) if (offset > (this.highest.get(stream) ?? ZERO)) this.highest.set(stream, offset);
  }
}

const pull = new Worker();
const hook = new Worker();

async function pullOnce(): Promise<void> {
  const claim = await postJson('/v1/stream/__ds/subscriptions/pull/claim', { worker: 'crash-worker' });
  if (claim.status !== 200) return;
  const wake = (await claim.json()) as { wake_id: string; generation: number; token: string; streams: Array<{ path: string; acked_offset: string; tail_offset: string }> };
  const acks = [];
  for (const s of wake.streams) if (await pull.read(s.path, s.acked_offset, s.tail_offset)) acks.push({ stream: s.path, offset: s.tail_offset });
  pull.ackSent(acks);
  const ack = await postJson('/v1/stream/__ds/subscriptions/pull/ack', { wake_id: wake.wake_id, generation: wake.generation, acks, done: true }, { authorization: `Bearer ${wake.token}` });
  if (ack.status === 200) pull.ackAnswered(acks);
}

async function answerDelivery(d: Delivery): Promise<void> {
  const acks = [];
  for (const s of d.body.streams) if (await hook.read(s.path, s.acked_offset, s.tail_offset)) acks.push({ stream: s.path, offset: s.tail_offset });
  hook.ackSent(acks);
  const res = await fetch(d.body.callback_url, {
    method: 'POST',
    headers: { ...JSON_TYPE, authorization: `Bearer ${d.body.callback_token}` },
    body: JSON.stringify({ wake_id: d.body.wake_id, generation: d.body.generation, acks, done: true }),
  });
  if (res.status === 200) hook.ackAnswered(acks);
}

/** The stored cursors of a subscription, by stream. */
async function cursors(id: string): Promise<Map<string, string>> {
  const res = await fetch(`${base}/v1/stream/__ds/subscriptions/${id}`);
  const body = (await res.json()) as { streams: Array<{ path: string; acked_offset: string; tail_offset: string }> };
  return new Map(body.streams.map((s) => [s.path, s.acked_offset]));
}

/** Right after a restart: every 200 ack survived, and every cursor is an offset its worker acked. */
async function checkCursors(id: string, worker: Worker): Promise<void> {
  for (const [path, stored] of await cursors(id)) {
    expect(stored >= (worker.highest.get(path) ?? ZERO), `${id} ${path}: a 200 ack was lost`).toBe(true);
    expect(worker.acked.get(path) ?? new Set([ZERO]), `${id} ${path}: cursor at ${stored}, never acked`).toContain(stored);
  }
}

describe('subscriptions under SIGKILL', () => {
  it('lose no wake and no ack, and never move a cursor past what was acknowledged', async () => {
    receiver = await startReceiver();
    server = await startServer({ process: true, args: ARGS });
    dataDir = server.dataDir;
    base = server.url;
    await fetch(`${base}/v1/stream/crash-wake`, { method: 'PUT', headers: JSON_TYPE, body: '[]' });
    for (let i = 0; i < STREAMS; i++) await fetch(`${base}/v1/stream/c/${i}`, { method: 'PUT', headers: JSON_TYPE, body: '[]' });
    const subscribe = (id: string, config: unknown) => fetch(`${base}/v1/stream/__ds/subscriptions/${id}`, { method: 'PUT', headers: JSON_TYPE, body: JSON.stringify(config) });
    expect((await subscribe('pull', { type: 'pull-wake', pattern: 'c/*', wake_stream: 'crash-wake', lease_ttl_ms: 1000 })).status).toBe(201);
    expect((await subscribe('hook', { type: 'webhook', pattern: 'c/*', webhook: { url: receiver.url }, lease_ttl_ms: 1000 })).status).toBe(201);

    const written: string[] = [];
    let writing = true;
    let handled = 0;
    const writer = (async () => {
      for (let i = 0; (writing || written.length < MIN_WRITES) && i < MAX_WRITE_TRIES; i++) {
        const s = `c/${i % STREAMS}`;
        const res = await quietly(() => fetch(`${base}/v1/stream/${s}`, { method: 'POST', headers: JSON_TYPE, body: JSON.stringify({ s, i }) }));
        if (res?.status === 204) written.push(`${s}#${i}`);
        // pacing: a refused or lost write's back-off while the server is down, not a wait for an outcome
        else await new Promise((r) => setTimeout(r, 20));
      }
    })();
    let working = true;
    const pullLoop = (async () => {
      while (working) {
        // pacing: the worker's polling interval (longer after a failed claim), not a wait for an outcome
        if ((await quietly(pullOnce)) === null) await new Promise((r) => setTimeout(r, 50));
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    const hookLoop = (async () => {
      while (working) {
        while (handled < receiver!.deliveries.length) await quietly(() => answerDelivery(receiver!.deliveries[handled++]!));
        // pacing: the worker's polling interval, not a wait for an outcome
        await new Promise((r) => setTimeout(r, 10));
      }
    })();

    for (let kill = 0; kill < KILLS; kill++) {
      // The load runs this long before each kill: the pause is the behaviour under test.
      await new Promise((r) => setTimeout(r, 1_200));
      await server.kill();
      server = await startServer({ process: true, dataDir, port: server.port, args: ARGS });
      await checkCursors('pull', pull);
      await checkCursors('hook', hook);
    }
    writing = false;
    await writer;
    const caughtUp = async (id: string) => {
      const res = await fetch(`${base}/v1/stream/__ds/subscriptions/${id}`);
      const body = (await res.json()) as { streams: Array<{ acked_offset: string; tail_offset: string }> };
      return body.streams.length === STREAMS && body.streams.every((s) => s.acked_offset === s.tail_offset);
    };
    await eventually(async () => (await caughtUp('pull')) && (await caughtUp('hook')), 20_000, 'both workers to catch up');
    working = false;
    await Promise.all([pullLoop, hookLoop]);

    expect(written.length).toBeGreaterThanOrEqual(MIN_WRITES);
    expect(written.filter((w) => !pull.processed.has(w)), 'appends the pull-wake worker never processed').toEqual([]);
    expect(written.filter((w) => !hook.processed.has(w)), 'appends the webhook worker never processed').toEqual([]);
    await checkCursors('pull', pull);
    await checkCursors('hook', hook);
  });
});
