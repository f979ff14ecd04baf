/**
 * `rill subs`, run as the real binary against a real server: create, confirm, show,
 * membership, delete; a pull-wake driven by hand (claim, ack, release, a fenced ack);
 * refusals in the one error format with exit 1, usage mistakes with exit 2.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeDir, startServer } from '../helpers/server.js';
import { RillClient } from '../../src/client/index.js';
import { CLI_TEST_TIMEOUT_MS, runCli } from '../helpers/cli.js';


/** The one place the server under test is started. */
async function startSubscriptionServer(): Promise<{ url: string; stop(): Promise<void> }> {
  const server = await startServer({ store: 'memory' });
  return { url: server.url, stop: async () => { await server.stop(); removeDir(server.dataDir); } };
}

let server: { url: string; stop(): Promise<void> };
let client: RillClient;

beforeAll(async () => {
  server = await startSubscriptionServer();
  client = new RillClient({ url: server.url });
});

afterAll(async () => {
  await server?.stop();
});

const rill = (args: string[], stdin = '') => runCli(server.url, args, { stdin });

async function ok(args: string[], stdin = ''): Promise<string> {
  const run = await rill(args, stdin);
  expect(run.code, run.stderr).toBe(0);
  return run.stdout;
}

async function jsonStream(path: string) {
  const stream = client.stream(`v1/stream/${path}`);
  await stream.create({ contentType: 'application/json' });
  return stream;
}

/** Waits for the wake event of `id` on a wake stream (the server appends it after the append's answer). */
async function wakeEvent(wakeStream: string, id: string, offset = '-1'): Promise<Record<string, unknown>> {
  for await (const m of client.stream(`v1/stream/${wakeStream}`).messages<Record<string, unknown>>({ offset, live: 'long-poll', signal: AbortSignal.timeout(10_000) })) {
    if (m.value.subscription_id === id) return m.value;
  }
  throw new Error('the wake stream ended');
}

describe('rill subs', { timeout: CLI_TEST_TIMEOUT_MS }, () => {
  it('creates, confirms, shows, links and unlinks streams, deletes', async () => {
    // Streams are made with the client: only the commands under test run the binary.
    for (const path of ['cli-subs/wake', 'cli-subs/a', 'elsewhere/b']) await jsonStream(path);
    // The pattern names the wake stream too, but a subscription never follows its own wake stream.
    const create = ['subs', 'create', 'cli-1', '--wake-stream', 'cli-subs/wake', '--pattern', 'cli-subs/*', '--lease-ttl', '45s', '--description', 'from the CLI'];
    expect(await ok(create)).toBe('created cli-1 (pull-wake) following 1 stream\n');
    expect(await ok(create)).toBe('exists cli-1 (pull-wake) following 1 stream\n');
    const shown = await ok(['subs', 'get', 'cli-1']);
    expect(shown).toMatch(/^id: cli-1\ntype: pull-wake\npattern: cli-subs\/\*\nwake-stream: cli-subs\/wake\nlease-ttl: 45s\nstatus: active\n/);
    expect(shown).toContain('description: from the CLI\n');
    expect(shown).toMatch(/streams: 1\n {2}cli-subs\/a {2}glob {2}acked \S+\n/);

    expect(await ok(['subs', 'add', 'cli-1', 'elsewhere/b'])).toBe('cli-1 follows elsewhere/b\n');
    const json = JSON.parse(await ok(['subs', 'get', 'cli-1', '--json'])) as { streams: Array<{ path: string; linkType: string }> };
    expect(json.streams.find((s) => s.path === 'elsewhere/b')).toMatchObject({ linkType: 'explicit' });
    expect(await ok(['subs', 'remove', 'cli-1', 'elsewhere/b'])).toBe('cli-1 no longer follows elsewhere/b\n');

    const conflict = await rill(['subs', 'create', 'cli-1', '--wake-stream', 'cli-subs/wake', '--pattern', 'other/*']);
    expect([conflict.code, conflict.stderr]).toEqual([1, expect.stringMatching(/^rill: SUBSCRIPTION_ALREADY_EXISTS: .* \(HTTP 409\)\n$/)]);
    // A localhost webhook in production mode names the flag that allows it in development.
    const local = await rill(['subs', 'create', 'hook-1', '--webhook', 'http://localhost:9/hook', '--stream', 'cli-subs/a']);
    expect([local.code, local.stderr]).toEqual([1, 'rill: WEBHOOK_URL_REJECTED: the webhook URL must use https; a server started with --webhook-allow-localhost (development only) calls localhost, over http too (HTTP 400)\n']);
    expect(await ok(['subs', 'rm', 'cli-1'])).toBe('deleted cli-1\n');
    expect(await ok(['subs', 'rotate-key'])).toMatch(/^signing with ds_\S+; published: ds_\S+ ds_\S+\n$/);
    const missing = await rill(['subs', 'get', 'cli-1']);
    expect([missing.code, missing.stderr]).toEqual([1, expect.stringMatching(/^rill: SUBSCRIPTION_NOT_FOUND: .*cli-1 \(HTTP 404\)\n$/)]);
  });

  it('answers usage mistakes with exit 2 before sending anything', async () => {
    const neither = await rill(['subs', 'create', 'x', '--pattern', 'a/*']);
    expect([neither.code, neither.stderr]).toEqual([2, 'rill: USAGE: a subscription is either --webhook URL (signed POSTs) or --wake-stream PATH (pull-wake): give one of them\n']);
    const nothing = await rill(['subs', 'create', 'x', '--wake-stream', 'w']);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toContain('--pattern GLOB, --stream PATH');
    const badAck = await rill(['subs', 'ack', 'x', '--wake-token', 't', '--wake', 'w', '--generation', '1', 'no-offset']);
    expect([badAck.code, badAck.stderr]).toEqual([2, expect.stringContaining('an ack is STREAM=OFFSET')]);
    expect((await rill(['subs', 'ack', 'x', '--wake-token', 't', '--wake', 'w', '--generation', 'one', 'a=1'])).code).toBe(2);
    expect((await rill(['subs', 'claim', 'x'])).code).toBe(2); // --worker is required
    const unnamed = await rill(['subs', 'release', 'x', '--wake', 'w']);
    expect([unnamed.code, unnamed.stderr]).toEqual([2, expect.stringContaining('name the wake: --claim FILE')]);
    const notClaim = await rill(['subs', 'release', 'x', '--claim', '-'], '{"wakeId":"w"}');
    expect([notClaim.code, notClaim.stderr]).toEqual([2, 'rill: USAGE: --claim -: no wake id, generation and token in it\n']);
  });

  it('claims a pull wake, acks it, refuses a stale ack, releases', async () => {
    await jsonStream('cli-pull/wake');
    const data = await jsonStream('cli-pull/s');
    await ok(['subs', 'create', 'cli-pull', '--wake-stream', 'cli-pull/wake', '--stream', 'cli-pull/s']);
    const idle = await rill(['subs', 'claim', 'cli-pull', '--worker', 'me']);
    expect([idle.code, idle.stderr]).toEqual([1, expect.stringMatching(/^rill: NO_PENDING_WORK: .*\(HTTP 409\)\n$/)]);

    await data.appendJson({ n: 1 });
    await wakeEvent('cli-pull/wake', 'cli-pull');
    const claimed = await ok(['subs', 'claim', 'cli-pull', '--worker', 'me']);
    const wake = JSON.parse(claimed) as { wakeId: string; generation: number; token: string; streams: Array<{ path: string; tailOffset: string }> };
    expect(wake.streams).toEqual([expect.objectContaining({ path: 'cli-pull/s', hasPending: true })]);
    const held = await rill(['subs', 'claim', 'cli-pull', '--worker', 'you']);
    expect([held.code, held.stderr]).toEqual([1, expect.stringMatching(/^rill: ALREADY_CLAIMED: .*\(HTTP 409\)\n$/)]);

    const ids = ['--wake-token', wake.token, '--wake', wake.wakeId, '--generation', String(wake.generation)];
    // The wake named by what claim printed, piped in.
    expect(await ok(['subs', 'ack', 'cli-pull', '--claim', '-', `cli-pull/s=${wake.streams[0]!.tailOffset}`, '--done'], claimed)).toBe('acked 1 stream, wake done\n');
    expect((await client.subscriptions().get('cli-pull')).streams[0]!.ackedOffset).toBe(wake.streams[0]!.tailOffset);
    const stale = await rill(['subs', 'ack', 'cli-pull', ...ids, '--done']);
    // Replaying an ack of the finished wake says it is finished.
    expect([stale.code, stale.stderr]).toEqual([1, 'rill: FENCED: the wake is finished (ended with done, or released): nothing is left to acknowledge; new data starts a new wake (HTTP 409)\n']);

    const before = (await client.stream('v1/stream/cli-pull/wake').head()).nextOffset;
    await data.appendJson({ n: 2 });
    await wakeEvent('cli-pull/wake', 'cli-pull', before);
    // Claimed with curl's view of the route: --claim takes the route's own snake_case answer too.
    const raw = await fetch(`${server.url}/v1/stream/__ds/subscriptions/cli-pull/claim`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"worker":"me"}' });
    const rawBody = await raw.text();
    const second = JSON.parse(rawBody) as { wake_id: string; generation: number };
    expect(second.generation).toBeGreaterThan(wake.generation);
    expect(await ok(['subs', 'release', 'cli-pull', '--claim', '-'], rawBody)).toBe(`released ${second.wake_id} of cli-pull\n`);
    // Released, not acked: the work is pending again under a newer wake.
    const third = JSON.parse(await ok(['subs', 'claim', 'cli-pull', '--worker', 'other'])) as { generation: number };
    expect(third.generation).toBeGreaterThan(second.generation);
  });

  it('lists the subscriptions of /v1/stream and of a bucket', async () => {
    // A wake stream that does not exist is refused, named.
    const noWake = await rill(['subs', 'create', 'ls-1', '--wake-stream', 'w', '--stream', 'x']);
    expect([noWake.code, noWake.stderr]).toEqual([1, 'rill: BAD_REQUEST: the wake stream w does not exist: create it (a JSON stream) before the subscription (HTTP 400)\n']);
    await jsonStream('w');
    await ok(['subs', 'create', 'ls-1', '--wake-stream', 'w', '--stream', 'x']);
    expect(await ok(['subs', 'ls'])).toMatch(/^ls-1 {2}pull-wake {2}- {2}wake-stream w {2}active\n/m);
    await ok(['buckets', 'create', 'subsls']);
    await client.stream('subsls/w').create({ contentType: 'application/json' });
    await ok(['subs', 'create', 'in-bucket', '--bucket', 'subsls', '--wake-stream', 'w', '--pattern', '*']);
    expect(JSON.parse(await ok(['subs', 'ls', 'subsls', '--json'])).subscriptions.map((s: { id: string }) => s.id)).toEqual(['in-bucket']);
  });
});
