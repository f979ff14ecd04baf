/**
 * Storage faults, injected through a test wrapper around the real SQLite engine (the
 * server is handed the store; it has no fault switch). A batch whose commit fails, or
 * that runs out of disk, must answer 503 (507 when out of space) with Retry-After and the
 * JSON body to every write in it, apply none of them, and the server must work again once
 * storage does.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { createRillServer, type RillServer } from '../../src/http/server.js';
import { DEFAULT_SUBSCRIPTION_SETTINGS, type ServerSettings } from '../../src/http/settings.js';
import { DEFAULT_PRODUCER_SETTINGS } from '../../src/core/types.js';
import { SqliteStore } from '../../src/storage/sqlite/engine.js';
import { removeDir, tempDataDir } from '../helpers/server.js';
import { expectJsonRefusal, refusalOf } from './checks.js';
import { FaultyStore } from './faulty-store.js';

interface Harness {
  rill: RillServer;
  store: FaultyStore;
  url: string;
  dataDir: string;
}

const open: Harness[] = [];

async function start(dataDir = tempDataDir('rill-faults-'), logger = pino({ level: 'silent' }), settings: Partial<ServerSettings> = {}): Promise<Harness> {
  const store = new FaultyStore({ dataDir, producers: DEFAULT_PRODUCER_SETTINGS });
  // The expiry sweep is pushed out so that only the test's own writes reach the store.
  const rill = createRillServer({ store, settings: { port: 0, sweepIntervalMs: 3_600_000, ...settings }, logger });
  await rill.listen();
  const harness = { rill, store, url: rill.url(), dataDir };
  open.push(harness);
  return harness;
}

afterEach(async () => {
  for (const h of open.splice(0)) {
    await h.rill.close();
    removeDir(h.dataDir);
  }
});

interface Write {
  path: string;
  headers: Record<string, string>;
  body: string;
}

function post(url: string, write: Write): Promise<Response> {
  return fetch(url + write.path, { method: 'POST', headers: write.headers, body: write.body });
}

async function createStream(url: string, path: string, contentType: string): Promise<void> {
  const res = await fetch(url + path, { method: 'PUT', headers: { 'content-type': contentType } });
  expect(res.status).toBe(201);
}

async function readAll(url: string, path: string): Promise<{ tail: string | null; body: string }> {
  const res = await fetch(`${url}${path}?offset=-1`);
  expect(res.status).toBe(200);
  return { tail: res.headers.get('stream-next-offset'), body: await res.text() };
}

/** Sends `writes` concurrently, held by the store so that they share one batch. */
async function inOneBatch(h: Harness, writes: Write[]): Promise<Response[]> {
  h.store.holdNext(writes.length);
  return Promise.all(writes.map((w) => post(h.url, w)));
}

async function expectAllUnavailable(responses: Response[]): Promise<void> {
  await expectAllRefused(responses, 503, 'STORAGE_UNAVAILABLE');
}

async function expectAllRefused(responses: Response[], status: number, code: string): Promise<void> {
  for (const res of responses) {
    expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
    expectJsonRefusal(await refusalOf(res), status, code);
  }
}

const text = { 'content-type': 'text/plain' };
const json = { 'content-type': 'application/json' };
const producer = (seq: number) => ({ ...text, 'producer-id': 'p1', 'producer-epoch': '0', 'producer-seq': String(seq) });

function mixedWrites(): Write[] {
  return [
    { path: '/v1/stream/plain', headers: text, body: 'a;' },
    { path: '/v1/stream/plain', headers: text, body: 'b;' },
    { path: '/v1/stream/prod', headers: producer(0), body: 'p0;' },
    { path: '/v1/stream/prod', headers: producer(1), body: 'p1;' },
    { path: '/v1/stream/json', headers: json, body: '[{"n":1},{"n":2}]' },
    { path: '/v1/stream/seq', headers: { ...text, 'stream-seq': '00000000000000000001' }, body: 's1;' },
  ];
}

describe('a failing commit', () => {
  it('answers 503 to every write of the batch, applies none, and recovers', async () => {
    const h = await start();
    for (const [path, type] of [['plain', 'text/plain'], ['prod', 'text/plain'], ['json', 'application/json'], ['seq', 'text/plain']]) {
      await createStream(h.url, `/v1/stream/${path}`, type!);
    }
    h.store.failCommits = true;
    const failedBefore = h.store.failed;
    await expectAllUnavailable(await inOneBatch(h, mixedWrites()));
    expect(h.store.failed).toBe(failedBefore + 1);
    for (const path of ['plain', 'prod', 'json', 'seq']) {
      expect(await readAll(h.url, `/v1/stream/${path}`)).toEqual({ tail: '00000000000000000000', body: path === 'json' ? '[]' : '' });
    }
    const head = await fetch(`${h.url}/v1/stream/seq`, { method: 'HEAD' });
    expect(head.headers.get('stream-last-seq')).toBeNull();

    h.store.failCommits = false;
    // The same writes again, unchanged: the producer's are new (200), not duplicates,
    // which proves the failed batch applied nothing.
    const retried = await inOneBatch(h, mixedWrites());
    expect(retried.map((r) => r.status)).toEqual([204, 204, 200, 200, 204, 204]);
    expect(retried[3]!.headers.get('producer-seq')).toBe('1');
    expect((await readAll(h.url, '/v1/stream/plain')).body).toMatch(/^(a;b;|b;a;)$/);
    expect((await readAll(h.url, '/v1/stream/prod')).body).toBe('p0;p1;');
    expect((await readAll(h.url, '/v1/stream/json')).body).toBe('[{"n":1},{"n":2}]');
    const after = await fetch(`${h.url}/v1/stream/seq`, { method: 'HEAD' });
    expect(after.headers.get('stream-last-seq')).toBe('00000000000000000001');
  });

  it('is logged once when it begins and once when it ends, with the refusals counted, not once per refusal', async () => {
    const lines: Array<{ level: number; msg: string; refusals?: number; err?: unknown }> = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const h = await start(undefined, logger);
    await createStream(h.url, '/v1/stream/logged', 'text/plain');
    h.store.failCommits = true;
    for (let i = 0; i < 20; i++) expect((await post(h.url, { path: '/v1/stream/logged', headers: { 'content-type': 'text/plain' }, body: `${i};` })).status).toBe(503);
    h.store.failCommits = false;
    expect((await post(h.url, { path: '/v1/stream/logged', headers: { 'content-type': 'text/plain' }, body: 'ok;' })).status).toBe(204);
    const storage = lines.filter((l) => /storage/.test(l.msg));
    expect(storage.map((l) => l.msg)).toEqual(['storage is failing: requests that need it answer 503 until it recovers', 'storage recovered']);
    expect(storage[0]!.err).toBeDefined();
    expect(storage[1]!.refusals).toBe(20);
  });

  it('refuses a create in a failing batch and creates nothing', async () => {
    const h = await start();
    h.store.failCommits = true;
    const res = await fetch(`${h.url}/v1/stream/never`, { method: 'PUT', headers: text });
    expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
    expectJsonRefusal(await refusalOf(res), 503, 'STORAGE_UNAVAILABLE');
    h.store.failCommits = false;
    expect((await fetch(`${h.url}/v1/stream/never`, { method: 'HEAD' })).status).toBe(404);
    expect((await fetch(`${h.url}/v1/stream/never`, { method: 'PUT', headers: text })).status).toBe(201);
  });
});

describe('a store whose reads fail', () => {
  it('makes the subscription sweep log one line when it starts failing and one when it recovers, not one per sweep', async () => {
    const lines: Array<{ level: number; msg: string; failures?: number; err?: unknown }> = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const h = await start(undefined, logger, { subscriptions: { ...DEFAULT_SUBSCRIPTION_SETTINGS, sweepIntervalMs: 5 } });
    h.store.failReads = true;
    await h.store.sweepReads(10);
    h.store.failReads = false;
    // Sweeps never overlap: once a second read begins, the first that went through has ended.
    await h.store.sweepReads(2);
    const sweep = lines.filter((l) => /subscription sweep/.test(l.msg));
    expect(sweep.map((l) => l.msg)).toEqual([
      'the subscription sweep is failing; it runs again every sweep interval, and says when it recovers',
      'the subscription sweep recovered',
    ]);
    expect(sweep[0]!.err).toBeDefined();
    expect(sweep[1]!.failures).toBeGreaterThanOrEqual(10);
  });
});

describe('a full disk', () => {
  it('answers 507 INSUFFICIENT_STORAGE to every write of the batch that ran out of space, applies none, and recovers', async () => {
    const h = await start();
    await createStream(h.url, '/v1/stream/disk', 'text/plain');
    await createStream(h.url, '/v1/stream/disk-p', 'text/plain');
    expect((await post(h.url, { path: '/v1/stream/disk', headers: text, body: 'before;' })).status).toBe(204);
    // Room for a few pages only: the batch fills it part way and then SQLite reports
    // SQLITE_FULL. The writes before that point must not survive on their own.
    h.store.setMaxPages(h.store.pageCount() + 3);
    const big = (tag: string) => `${tag}:${'x'.repeat(3000)};`;
    const writes: Write[] = [
      ...['w1', 'w2', 'w3', 'w4', 'w5', 'w6'].map((tag) => ({ path: '/v1/stream/disk', headers: text, body: big(tag) })),
      { path: '/v1/stream/disk-p', headers: producer(0), body: big('p0') },
    ];
    await expectAllRefused(await inOneBatch(h, writes), 507, 'INSUFFICIENT_STORAGE');
    expect(await readAll(h.url, '/v1/stream/disk')).toEqual({ tail: '00000000000000000007', body: 'before;' });
    expect((await readAll(h.url, '/v1/stream/disk-p')).body).toBe('');

    // Still full: a lone write larger than the room left is refused the same way.
    await expectAllRefused([await post(h.url, { path: '/v1/stream/disk', headers: text, body: 'y'.repeat(20_000) })], 507, 'INSUFFICIENT_STORAGE');

    h.store.setMaxPages(1_000_000);
    const retried = await inOneBatch(h, writes);
    expect(retried.map((r) => r.status)).toEqual([204, 204, 204, 204, 204, 204, 200]);
    const final = await readAll(h.url, '/v1/stream/disk');
    expect(final.body.length).toBe('before;'.length + 6 * big('w1').length);
    for (const tag of ['w1', 'w2', 'w3', 'w4', 'w5', 'w6']) expect(final.body.split(big(tag)).length).toBe(2);

    // What was acknowledged is durable: a fresh engine on the same files sees it.
    await h.rill.close();
    open.splice(open.indexOf(h), 1);
    const reopened = new SqliteStore({ dataDir: h.dataDir, producers: DEFAULT_PRODUCER_SETTINGS });
    try {
      const stream = await reopened.getStream('v1/disk');
      expect(stream?.tail).toBe(final.body.length);
      expect((await reopened.readRange(stream!, 0, stream!.tail)).toString()).toBe(final.body);
    } finally {
      await reopened.close();
      removeDir(h.dataDir);
    }
  });
});
