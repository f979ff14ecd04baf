/**
 * The cold tier end to end (issue 38, docs/decisions.md): the real `rill` binary with
 * `--cold-store` pointing at a real S3-compatible server the test starts (s3rver,
 * test/helpers/s3.ts), over HTTP only, on SQLite and on PostgreSQL (a database of its own
 * per server on the run's PostgreSQL server, test/helpers/postgres.ts). `rill check` reads
 * a SQLite data file, or on PostgreSQL the database's cold tier (`--postgres-url`).
 *
 * - history past the hot window moves to objects, the hot store stays bounded, and every
 *   byte reads back, from offset 0 and from the middle, across the boundary;
 * - a corrupt or missing object answers 502 COLD_OBJECT_INVALID naming the stream, range and
 *   key (and rill check lists it), an unreachable store 503 COLD_STORE_UNAVAILABLE,
 *   while reads of the hot part still work;
 * - with the object store stopped, appends are still acknowledged until the upload lag
 *   passes --cold-max-backlog, then refused with 507 COLD_STORE_BACKLOG; once it is back,
 *   uploads catch up, writes are taken again and nothing was lost;
 * - record reads, forks, snapshots, bootstrap, long-poll and SSE work from cold history,
 *   a retention policy trims across it (and its objects go), a deleted stream's objects
 *   go, and a slow store slows nothing but the uploads.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { extensionUrl } from '../../src/protocol/extensions.js';
import { encodeOffset } from '../../src/protocol/offset.js';
import { seededRandom } from '../helpers/seed.js';
import { startSlowRelay, startTestS3, TEST_BUCKET, type TestS3 } from '../helpers/s3.js';
import { removeDir, startServer, tempDataDir, type ServerProcess } from '../helpers/server.js';
import { sseBlocks } from '../helpers/sse.js';
import { until, untilLiveReaders } from '../helpers/waits.js';
import { runCli } from '../helpers/cli.js';
import { openS3ObjectStore } from '../../src/storage/cold/object-store.js';
import { sharedDatabase } from '../helpers/postgres.js';
import { call } from './client.js';

type Engine = 'sqlite' | 'postgres';
const ENGINES: Engine[] = ['sqlite', 'postgres'];

const rng = seededRandom();
const OCTETS = { 'content-type': 'application/octet-stream' };
/** Small windows and segments, so that a few hundred KiB cross every boundary. */
const COLD_ARGS = ['--cold-hot-bytes', '32KiB', '--cold-hot-age', '0ms', '--cold-segment-bytes', '16KiB', '--cold-upload-interval', '20ms'];

/**
 * The most a stream keeps hot once uploads caught up, with COLD_ARGS: bytes move only below
 * the window (32 KiB), the start of the last row and the row's stored tail (each at most
 * 64 KiB and an append behind the tail, sqlite/chunk-rows.ts and stream-rows.ts), in whole
 * rows (one the limit cuts stays: 64 KiB) of full segments (one not yet full: 16 KiB).
 */
const HOT_BOUND_BYTES = 64 * 1024 + 2 * 1024 + 64 * 1024 + 16 * 1024;

/** Each test starts a server process and writes hundreds of appends: generous, so that only a bug reaches it on a loaded machine. */
const TEST_TIMEOUT_MS = 120_000;

let s3: TestS3;
let server: ServerProcess | undefined;
const dataDirs: string[] = [];

beforeAll(async () => {
  s3 = await startTestS3();
});

afterEach(async () => {
  await server?.kill();
  server = undefined;
});

afterAll(async () => {
  await s3.close();
  dataDirs.forEach(removeDir);
});

/** The database of each PostgreSQL server's data directory: a restart on the directory finds it again. */
const databases = new Map<string, string>();

async function startCold(engine: Engine, prefix: string, extraArgs: string[] = [], dataDir = tempDataDir(), env = s3.env): Promise<ServerProcess> {
  if (!dataDirs.includes(dataDir)) dataDirs.push(dataDir);
  const bucketPrefix = `${prefix}-${engine}`;
  const args = ['--cold-store', `s3://${TEST_BUCKET}/${bucketPrefix}`, ...COLD_ARGS, ...extraArgs];
  if (engine === 'sqlite') {
    server = await startServer({ process: true, store: 'sqlite', dataDir, args, env });
    return server;
  }
  let postgresUrl = databases.get(dataDir);
  if (postgresUrl === undefined) databases.set(dataDir, (postgresUrl = await sharedDatabase()));
  server = await startServer({ process: true, store: 'postgres', postgresUrl, dataDir, args, env });
  return server;
}

/** `count` appends of 500 to 1500 random bytes each, from the file's seed. */
function randomAppends(count: number): Buffer[] {
  return Array.from({ length: count }, () => Buffer.from(Array.from({ length: rng.int(500, 1500) }, () => rng.int(0, 255))));
}

async function createStream(url: string, path: string): Promise<void> {
  expect((await call(url, 'PUT', path, { headers: OCTETS })).status).toBe(201);
}

async function appendAll(url: string, path: string, appends: Buffer[]): Promise<void> {
  for (const body of appends) {
    const reply = await call(url, 'POST', path, { headers: OCTETS, body });
    expect(reply.status, reply.text()).toBe(204);
  }
}

/** Catch-up reads from `offset` until the stream is up to date: everything from there, as bytes. */
async function readFrom(url: string, path: string, offset: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  for (let at = offset; ; ) {
    const reply = await call(url, 'GET', `${path}?offset=${at}`);
    if (reply.status !== 200) throw new Error(`GET ${path}?offset=${at}: ${reply.status} ${reply.text()}`);
    parts.push(reply.body);
    at = reply.headers['stream-next-offset']!;
    if (reply.headers['stream-up-to-date'] === 'true') return Buffer.concat(parts);
  }
}

interface ColdStats {
  sweptObjects: number;
  coldBytes: number;
  hotBytes: number;
  uploads: number;
  uploadLagBytes: number;
  uploadFailures: number;
  cacheHits: number;
  cacheMisses: number;
  coldFetches: number;
}

async function coldStats(url: string): Promise<ColdStats> {
  const reply = await call(url, 'GET', '/stats');
  return (reply.json() as { cold: ColdStats }).cold;
}

/** The offset of byte `position`, as the server writes offsets. */
function offsetAt(position: number): string {
  return encodeOffset(position);
}

const JSON_TYPE = { 'content-type': 'application/json' };

/** JSON messages `{"n":i,"pad":...}` of 300 to 900 bytes, appended one by one: the offset after each. */
async function appendMessages(url: string, path: string, count: number): Promise<{ messages: string[]; ends: number[] }> {
  const messages: string[] = [];
  const ends: number[] = [];
  for (let n = 0; n < count; n++) {
    const message = JSON.stringify({ n, pad: 'p'.repeat(rng.int(300, 900)) });
    const reply = await call(url, 'POST', path, { headers: JSON_TYPE, body: `[${message}]` });
    expect(reply.status, reply.text()).toBe(204);
    messages.push(message);
    ends.push(Number(reply.headers['stream-next-offset']));
  }
  return { messages, ends };
}

/** Every message of a JSON stream from `query` on, read as catch-up pages. */
async function readMessages(url: string, path: string, query: string): Promise<string[]> {
  const messages: string[] = [];
  let next = query;
  for (let guard = 0; guard < 1000; guard++) {
    const reply = await call(url, 'GET', `${path}?${next}`);
    if (reply.status !== 200) throw new Error(`GET ${path}?${next}: ${reply.status} ${reply.text()}`);
    // Offset reads answer a JSON array, record reads NDJSON (docs/extensions.md).
    const text = reply.text();
    const page = text.startsWith('[') ? (JSON.parse(text) as unknown[]) : text.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as unknown);
    messages.push(...page.map((m) => JSON.stringify(m)));
    if (reply.headers['stream-up-to-date'] === 'true') return messages;
    next = `offset=${reply.headers['stream-next-offset']}`;
  }
  throw new Error('the read did not end');
}

function pathOf(url: string): string {
  return new URL(url).pathname + new URL(url).search;
}

describe.each(ENGINES)('cold tier on %s', (engine) => {
  it('moves history past the hot window to objects, keeps the hot store bounded, and reads every byte back across the boundary', async () => {
    const { url } = await startCold(engine, 'bounded');
    const path = '/v1/stream/cold-bounded';
    await createStream(url, path);
    const appends = randomAppends(600);
    const all = Buffer.concat(appends);
    await appendAll(url, path, appends);
    // About 600 KB written; what stays hot is bounded by the rules, not by the stream's length.
    await until(async () => (await coldStats(url)).coldBytes >= all.length - HOT_BOUND_BYTES, 'history moved to the cold tier');
    const stats = await coldStats(url);
    expect(stats.uploads).toBeGreaterThan(0);
    expect(stats.hotBytes).toBeLessThanOrEqual(HOT_BOUND_BYTES);
    expect([...s3.objectFiles().keys()].some((k) => k.startsWith('bounded-' + engine + '/'))).toBe(true);

    expect((await readFrom(url, path, '-1')).equals(all)).toBe(true);
    const middle = Math.floor(all.length / 3);
    expect((await readFrom(url, path, offsetAt(middle))).equals(all.subarray(middle))).toBe(true);
    const afterReads = await coldStats(url);
    expect(afterReads.coldFetches).toBeGreaterThan(0);
    expect(afterReads.cacheHits).toBeGreaterThan(0);
    const metrics = (await call(url, 'GET', '/metrics')).text();
    // Uploads may go on between the two answers: cold bytes only grow here.
    expect(Number(/^rill_cold_bytes (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(afterReads.coldBytes);
    expect(metrics).toMatch(/^rill_cold_uploads_total [1-9]\d*$/m);
    for (const name of ['rill_hot_bytes', 'rill_cold_upload_lag_bytes', 'rill_cold_fetch_seconds_total', 'rill_cold_cache_hits_total', 'rill_cold_cache_misses_total']) {
      expect(metrics).toMatch(new RegExp(`^${name} \\d`, 'm'));
    }

    // A restart finds the boundary where the last upload left it: the same bytes, none twice.
    await server!.kill();
    const again = await startCold(engine, 'bounded', [], server!.dataDir);
    expect((await readFrom(again.url, path, '-1')).equals(all)).toBe(true);
  }, TEST_TIMEOUT_MS);

  it('answers a corrupt or missing object with 502 COLD_OBJECT_INVALID naming the stream, the range and the key, an unreachable store with 503; the hot part still reads; rill check reports both', async () => {
    const { url, dataDir } = await startCold(engine, 'corrupt');
    const path = '/v1/stream/cold-corrupt';
    await createStream(url, path);
    const appends = randomAppends(150);
    const all = Buffer.concat(appends);
    await appendAll(url, path, appends);
    await until(async () => (await coldStats(url)).uploads > 1, 'two segments uploaded');
    const [key] = [...s3.objectFiles().keys()].filter((k) => k.startsWith('corrupt-' + engine + '/')).sort();
    // A SQLite data file, or the PostgreSQL database (its cold tier only).
    const checked = engine === 'sqlite' ? ['--data', dataDir] : ['--postgres-url', databases.get(dataDir)!];
    const checkArgs = ['check', ...checked, '--cold-store', `s3://${TEST_BUCKET}/corrupt-${engine}`];
    const clean = await runCli(url, checkArgs, { env: s3.env });
    expect(clean.code, clean.stderr).toBe(0);
    s3.corrupt(key!);
    const corrupt = await runCli(url, checkArgs, { env: s3.env });
    expect(corrupt.code).toBe(1);
    expect(corrupt.stderr).toContain(`cold object ${key} (bytes 0 to`);
    expect(corrupt.stderr).toContain('is corrupt');

    const refused = await call(url, 'GET', `${path}?offset=-1`);
    expect(refused.status).toBe(502);
    const body = refused.json() as { code: string; message: string };
    expect(body.code).toBe('COLD_OBJECT_INVALID');
    expect(body.message).toContain('cold-corrupt');
    expect(body.message).toContain(key!);
    expect(body.message).toMatch(/from byte 0 to \d+/);

    const tailStart = all.length - 1000;
    expect((await readFrom(url, path, offsetAt(tailStart))).equals(all.subarray(tailStart))).toBe(true);

    // With the store unreachable, a read of history no cache holds answers 503 naming the range.
    await s3.stop();
    try {
      const unreachable = await call(url, 'GET', `${path}?offset=-1`);
      expect(unreachable.status).toBe(503);
      expect(unreachable.headers['retry-after']).toBe('1');
      const refusal = unreachable.json() as { code: string; message: string };
      expect(refusal.code).toBe('COLD_STORE_UNAVAILABLE');
      expect(refusal.message).toMatch(/stream \S*cold-corrupt from byte 0 to \d+/);
    } finally {
      await s3.restart();
    }

    // An object deleted behind rill's back: 502 naming it as missing, and rill check lists it.
    const [, second] = [...s3.objectFiles().keys()].filter((k) => k.startsWith('corrupt-' + engine + '/')).sort();
    const objects = await openS3ObjectStore(`s3://${TEST_BUCKET}/corrupt-${engine}`, s3.env);
    await objects.delete([second!]);
    objects.close();
    const secondStart = Number(/\/(\d+)-\d+\.rseg$/.exec(second!)![1]);
    const missing = await call(url, 'GET', `${path}?offset=${offsetAt(secondStart)}`);
    expect(missing.status).toBe(502);
    expect((missing.json() as { message: string }).message).toContain(`${second}, which is missing from the object store`);
    const checkedAgain = await runCli(url, checkArgs, { env: s3.env });
    expect(checkedAgain.stderr).toContain(`cold object ${second} (bytes ${secondStart} to`);
    expect(checkedAgain.stderr).toContain('is missing');
  }, TEST_TIMEOUT_MS);

  it('keeps acknowledging appends while the object store is down, refuses them with 507 past --cold-max-backlog, and catches up when it returns', async () => {
    // Retries at most 200 ms apart, so that the store's return is seen soon after it.
    const { url } = await startCold(engine, 'outage', ['--cold-max-backlog', '64KiB', '--cold-retry-max', '200ms']);
    const path = '/v1/stream/cold-outage';
    await createStream(url, path);
    await s3.stop();
    const acked: Buffer[] = [];
    let refusal: { status: number; code: string; message: string } | null = null;
    try {
      // The lag is counted once per pass: appends go on being taken until a pass counts past the limit.
      for (let guard = 0; refusal === null && guard < 10_000; guard++) {
        const [body] = randomAppends(1);
        const reply = await call(url, 'POST', path, { headers: OCTETS, body: body! });
        if (reply.status === 204) acked.push(body!);
        else refusal = { status: reply.status, ...(reply.json() as { code: string; message: string }) };
      }
      expect(refusal).not.toBeNull();
      expect(refusal!.status).toBe(507);
      expect(refusal!.code).toBe('COLD_STORE_BACKLOG');
      expect(refusal!.message).toContain('cold store is behind');
      expect((await coldStats(url)).uploadFailures).toBeGreaterThan(0);
    } finally {
      await s3.restart();
    }
    // Caught up: less than a segment (16 KiB) awaits upload, so the few appends below stay under the limit.
    await until(async () => (await coldStats(url)).uploadLagBytes < 16 * 1024, 'uploads caught up');
    expect((await coldStats(url)).uploads).toBeGreaterThan(0);
    const more = randomAppends(5);
    await appendAll(url, path, more);
    acked.push(...more);
    expect((await readFrom(url, path, '-1')).equals(Buffer.concat(acked))).toBe(true);
  }, TEST_TIMEOUT_MS);

  it('serves record reads, forks, snapshots, bootstrap, long-poll and SSE from cold history, and a retention policy trims across it', async () => {
    const { url } = await startCold(engine, 'features', ['--cold-cache-bytes', '64KiB']);
    const path = '/v1/stream/cold-features';
    expect((await call(url, 'PUT', path, { headers: JSON_TYPE })).status).toBe(201);
    const { messages, ends } = await appendMessages(url, path, 250);
    await until(async () => (await coldStats(url)).coldBytes > ends[100]!, 'the first 100 messages moved to the cold tier');

    expect(await readMessages(url, path, 'offset=-1')).toEqual(messages);
    expect(await readMessages(url, path, 'record=7')).toEqual(messages.slice(7));
    // A fork at a boundary in the cold range: its transaction reads the anchor from a cold segment.
    const fork = '/v1/stream/cold-features-fork';
    const forked = await call(url, 'PUT', fork, { headers: { ...JSON_TYPE, 'stream-forked-from': path, 'stream-fork-offset': encodeOffset(ends[20]!) } });
    expect(forked.status, forked.text()).toBe(201);
    expect(await readMessages(url, fork, 'offset=-1')).toEqual(messages.slice(0, 21));
    expect(await readMessages(url, fork, 'record=3')).toEqual(messages.slice(3, 21));

    // A snapshot at a cold offset; bootstrap answers it with every message after it.
    const snapshotUrl = pathOf(extensionUrl(`http://x${path}`, `snapshot/${encodeOffset(ends[40]!)}`));
    const published = await call(url, 'PUT', snapshotUrl, { headers: { 'content-type': 'application/x-state' }, body: 'STATE@41' });
    expect(published.status, published.text()).toBe(204);
    const bootstrap = await call(url, 'GET', pathOf(extensionUrl(`http://x${path}`, 'bootstrap')));
    expect(bootstrap.status, bootstrap.text()).toBe(200);
    expect(bootstrap.text()).toContain('STATE@41');
    expect(bootstrap.text()).toContain(messages[41]!);
    expect(bootstrap.text()).not.toContain(messages[40]!);

    // Live reads from a cold offset answer its history first.
    const poll = await call(url, 'GET', `${path}?offset=${encodeOffset(ends[5]!)}&live=long-poll`);
    expect(poll.status).toBe(200);
    expect(JSON.stringify((poll.json() as unknown[])[0])).toBe(messages[6]);
    const sse = await fetch(`${url}${path}?offset=${encodeOffset(ends[9]!)}&live=sse`);
    for await (const block of sseBlocks(sse)) {
      if (!block.includes('event: data')) continue;
      expect(block).toContain(messages[10]!.slice(0, 40));
      break;
    }
    await sse.body?.cancel();

    // A retention policy walks its history from the earliest offset, here in the cold range.
    const kept = '/v1/stream/cold-features-kept';
    const created = await call(url, 'PUT', kept, { headers: { ...JSON_TYPE, 'stream-retention': '{"maxMessages": 100}' } });
    expect(created.status).toBe(201);
    const incarnation = created.headers['stream-incarnation']!;
    // 130 messages: past 64 KiB, where the engine writes the stream's row with its tail, below which bytes may move.
    const first = await appendMessages(url, kept, 130);
    /** Where each of the kept stream's objects ends (its keys hold its incarnation and range). */
    const keptObjects = () => [...s3.objectFiles().keys()].filter((k) => k.includes(`.${incarnation}/`)).map((k) => Number(/-(\d+)\.rseg$/.exec(k)![1]));
    // Segments move in order from the start: the first object is the first segment.
    await until(() => keptObjects().length > 0, 'the kept stream\'s first segment moved to the cold tier');
    const more = await appendMessages(url, kept, 150);
    const retained = [...first.messages, ...more.messages].slice(-100);
    const head = await call(url, 'HEAD', kept);
    expect(head.headers['stream-record-first']).toBe('180');
    expect(await readMessages(url, kept, `offset=${head.headers['stream-earliest-offset']}`)).toEqual(retained);
    expect(await readMessages(url, kept, 'record=180')).toEqual(retained);
    // 180 messages (over 100 KB) went: the first segment, at most a 64 KiB row and 16 KiB
    // more, lies wholly below the earliest offset; its object goes at a next pass, the rest stay.
    const earliest = Number(head.headers['stream-earliest-offset']);
    await until(async () => keptObjects().every((end) => end > earliest) && (await coldStats(url)).sweptObjects > 0, 'the trimmed history\'s objects removed');
    expect(keptObjects().length).toBeGreaterThan(0);
  }, TEST_TIMEOUT_MS);

  it('removes the objects of a deleted stream', async () => {
    const { url } = await startCold(engine, 'deleted');
    const path = '/v1/stream/cold-deleted';
    await createStream(url, path);
    await appendAll(url, path, randomAppends(150));
    await until(async () => (await coldStats(url)).uploads > 0, 'a segment uploaded');
    const objects = () => [...s3.objectFiles().keys()].filter((k) => k.startsWith('deleted-' + engine + '/'));
    expect(objects().length).toBeGreaterThan(0);
    expect((await call(url, 'DELETE', path)).status).toBe(204);
    await until(async () => objects().length === 0 && (await coldStats(url)).coldBytes === 0, 'the deleted stream\'s objects removed');
  }, TEST_TIMEOUT_MS);

  // Nothing of the engine's is in the way of a slow store: a case of SQLite's only.
  if (engine === 'sqlite') it('goes on through a slow object store: appends acknowledged, history moved, every byte read back through it', async () => {
    const relay = await startSlowRelay(Number(new URL(s3.endpoint).port), 25);
    try {
      const { url } = await startCold(engine, 'slow', [], tempDataDir(), { ...s3.env, AWS_ENDPOINT_URL_S3: relay.endpoint });
      const path = '/v1/stream/cold-slow';
      await createStream(url, path);
      const appends = randomAppends(200);
      await appendAll(url, path, appends);
      await until(async () => (await coldStats(url)).uploads >= 3, 'segments uploaded through the slow relay');
      expect((await readFrom(url, path, '-1')).equals(Buffer.concat(appends))).toBe(true);
    } finally {
      await server?.kill();
      server = undefined;
      await relay.close();
    }
  }, TEST_TIMEOUT_MS);
});

describe('cold tier on PostgreSQL: two nodes on one database and one bucket', () => {
  it('a node reads the history another moved, from offset 0 and at a tail it follows live, and each segment is uploaded by one node', async () => {
    const postgresUrl = await sharedDatabase();
    const prefix = 'two-nodes-http';
    const start = (dataDir: string) =>
      startServer({ process: true, store: 'postgres', postgresUrl, dataDir, args: ['--cold-store', `s3://${TEST_BUCKET}/${prefix}`, ...COLD_ARGS], env: s3.env });
    const dirA = tempDataDir();
    const dirB = tempDataDir();
    dataDirs.push(dirA, dirB);
    server = await start(dirA);
    const a = server;
    const b = await start(dirB);
    try {
      const path = '/v1/stream/cold-two-nodes';
      await createStream(a.url, path);
      // B waits at the tail while A writes: its long-poll is answered with A's first append.
      const first = randomAppends(1)[0]!;
      const poll = call(b.url, 'GET', `${path}?offset=${offsetAt(0)}&live=long-poll`);
      await untilLiveReaders(b.url, 'long_poll', 1);
      await appendAll(a.url, path, [first]);
      const polled = await poll;
      expect(polled.status).toBe(200);
      expect(polled.body.equals(first)).toBe(true);
      // Both nodes write; whichever holds the upload lock moves the history.
      const appends = [first];
      for (let i = 0; i < 4; i++) {
        const some = randomAppends(60);
        await appendAll(i % 2 === 0 ? a.url : b.url, path, some);
        appends.push(...some);
      }
      const all = Buffer.concat(appends);
      await until(async () => (await coldStats(a.url)).coldBytes >= all.length - HOT_BOUND_BYTES && (await coldStats(b.url)).coldBytes >= all.length - HOT_BOUND_BYTES, 'history moved, as both nodes count it');
      for (const url of [a.url, b.url]) {
        expect((await readFrom(url, path, '-1')).equals(all)).toBe(true);
        const middle = Math.floor(all.length / 2);
        expect((await readFrom(url, path, offsetAt(middle))).equals(all.subarray(middle))).toBe(true);
        // Each node's figures: the database's hot and cold bytes as its last pass counted them, its own fetches.
        const stats = await coldStats(url);
        expect(stats.hotBytes).toBeLessThanOrEqual(HOT_BOUND_BYTES);
        expect(stats.coldFetches).toBeGreaterThan(0);
        const metrics = (await call(url, 'GET', '/metrics')).text();
        expect(Number(/^rill_cold_bytes (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(all.length - HOT_BOUND_BYTES);
        for (const name of ['rill_hot_bytes', 'rill_cold_upload_lag_bytes', 'rill_cold_uploads_total', 'rill_cold_fetch_seconds_total', 'rill_cold_cache_hits_total', 'rill_cold_cache_misses_total']) {
          expect(metrics).toMatch(new RegExp(`^${name} \\d`, 'm'));
        }
      }
      // The tail B follows goes on past the boundary: a long-poll at the end answers the next append.
      const next = randomAppends(1)[0]!;
      const tailPoll = call(b.url, 'GET', `${path}?offset=${offsetAt(all.length)}&live=long-poll`);
      await untilLiveReaders(b.url, 'long_poll', 1);
      await appendAll(a.url, path, [next]);
      expect((await tailPoll).body.equals(next)).toBe(true);
      // Every object was committed by the one node that uploaded it: uploads add up to the objects, none deleted as a loser's.
      const objects = [...s3.objectFiles().keys()].filter((k) => k.startsWith(`${prefix}/`));
      const uploads = (await coldStats(a.url)).uploads + (await coldStats(b.url)).uploads;
      expect(objects.length).toBeGreaterThan(0);
      expect(uploads).toBe(objects.length);
    } finally {
      await b.kill();
    }
  }, TEST_TIMEOUT_MS);
});
