/**
 * The operator routes and commands against a running server: `GET /` lists buckets with
 * their stream counts, page by page (`rill buckets ls`); `/stats` and `{stream}/stats`
 * (`rill stats`, server-wide bytes and messages, the messages kept as streams are written
 * so that stats reads no stream body); the reserved names never shadow a bucket; /readyz
 * while starting.
 */
import { execFile } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RillClient } from '../../src/client/index.js';
import { createRillServer } from '../../src/http/server.js';
import { DEFAULT_PRODUCER_SETTINGS } from '../../src/core/types.js';
import { SqliteStore } from '../../src/storage/sqlite/engine.js';
import { v1StreamKey } from '../../src/protocol/ids.js';
import { CLI, removeDir, tempDataDir } from '../helpers/server.js';
import { appendRequest, createRequest } from '../storage/fixtures.js';
import { memoryLogger, startInProcess, type Running } from './ops-helpers.js';

const run = promisify(execFile);

async function cli(url: string, ...args: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, [CLI, '--url', url, ...args]);
  return stdout;
}

describe('operator routes', () => {
  let server: Running;
  let client: RillClient;

  beforeAll(async () => {
    server = await startInProcess();
    client = new RillClient({ url: server.url });
    // Buckets adm-0 .. adm-4 holding 0 .. 4 streams.
    for (let b = 0; b < 5; b++) {
      await client.bucket(`adm-${b}`).create();
      for (let s = 0; s < b; s++) await client.stream(`adm-${b}/s${s}`).create({ contentType: 'application/json' });
    }
  });
  afterAll(() => server.stop());

  it('GET / lists buckets in id order with their stream counts, a page at a time', async () => {
    const first = await (await fetch(`${server.url}/?limit=2`)).json();
    expect(first.buckets.map((b: { id: string; streamCount: number }) => [b.id, b.streamCount])).toEqual([
      ['adm-0', 0],
      ['adm-1', 1],
    ]);
    expect(first.next).toBe('adm-1');
    const rest = await client.listBuckets({ after: 'adm-1', limit: 10 });
    expect(rest.buckets.map((b) => [b.id, b.streamCount])).toEqual([
      ['adm-2', 2],
      ['adm-3', 3],
      ['adm-4', 4],
    ]);
    expect(rest.next).toBeNull();
    expect(rest.buckets[0]!.createdAt).toMatch(/^\d{4}-\d\d-\d\dT/);
    const all: string[] = [];
    for await (const bucket of client.buckets({ limit: 2 })) all.push(bucket.id);
    expect(all).toEqual(['adm-0', 'adm-1', 'adm-2', 'adm-3', 'adm-4']);
    const bad = await fetch(`${server.url}/?limit=0`);
    expect([bad.status, (await bad.json()).code]).toEqual([400, 'INVALID_QUERY']);
  });

  it('the reserved top-level names are not buckets', async () => {
    for (const name of ['stats', 'readyz', 'metrics']) {
      const res = await fetch(`${server.url}/${name}`, { method: 'PUT' });
      expect([name, res.status]).toEqual([name, 405]);
    }
    expect((await fetch(`${server.url}/stats/x`, { method: 'PUT' })).status).toBe(404);
    // Names of an object's members are buckets like any other, not operator routes.
    for (const name of ['constructor', '__proto__', 'toString']) expect((await (await fetch(`${server.url}/${name}`)).json()).code).toBe(name === 'toString' ? 'INVALID_ID' : 'BUCKET_NOT_FOUND');
    expect((await client.listBuckets()).buckets.map((b) => b.id)).toEqual(['adm-0', 'adm-1', 'adm-2', 'adm-3', 'adm-4']);
  });

  it('/stats and {stream}/stats count what the server and a stream hold', async () => {
    const stream = client.stream('adm-4/s0');
    await stream.appendMessages([{ a: 1 }, { b: 2 }, { c: 3 }]);
    const producer = { 'content-type': 'application/json', 'producer-id': 'w', 'producer-epoch': '0', 'producer-seq': '0' };
    expect((await fetch(`${server.url}/adm-4/s0`, { method: 'POST', headers: producer, body: '[4]' })).status).toBe(200);
    const stats = await client.stats();
    expect(stats).toEqual({ buckets: 5, streams: 10, producers: 1, bytes: 26, messages: 4, liveReaders: { sse: 0, longPoll: 0 }, store: 'sqlite', startedAt: expect.any(String) });
    // When the node began to serve: before this test asked, and a time.
    expect(Date.parse(stats.startedAt!)).toBeLessThanOrEqual(Date.now());
    // '{"a":1}\n{"b":2}\n{"c":3}\n4\n'
    expect(await client.streamStats('adm-4/s0')).toEqual({ tail: '00000000000000000026', earliestOffset: '00000000000000000000', bytes: 26, messages: 4, producers: 1, liveReaders: 0, closed: false });
    const missing = await fetch(`${server.url}/adm-4/nope/stats`);
    expect([missing.status, (await missing.json()).code]).toEqual([404, 'STREAM_NOT_FOUND']);
  });

  it('rill buckets ls and rill stats print them', async () => {
    const [ls, total, one] = await Promise.all([cli(server.url, 'buckets', 'ls', '--limit', '2'), cli(server.url, 'stats'), cli(server.url, '--json', 'stats', 'adm-2/s1')]);
    expect(ls.trim().split('\n').map((l) => l.split('\t').slice(0, 2).join(' '))).toEqual(['adm-0 0 streams', 'adm-1 1 streams', 'adm-2 2 streams', 'adm-3 3 streams', 'adm-4 4 streams']);
    expect(total).toContain('streams: 10\n');
    expect(total).toContain('bytes: 26\n');
    expect(total).toContain('messages: 4\n');
    expect(total).toContain('liveReaders.sse: 0\n');
    expect(JSON.parse(one)).toMatchObject({ bytes: 0, messages: 0, producers: 0 });
  });

  it('{stream}/producers lists the producer records by id, paged, and refuses a bad limit or after', async () => {
    const write = (id: string, epoch: number, seq: number) =>
      fetch(`${server.url}/adm-3/s0`, { method: 'POST', headers: { 'content-type': 'application/json', 'producer-id': id, 'producer-epoch': String(epoch), 'producer-seq': String(seq) }, body: `[${seq}]` });
    for (const [id, epoch, seq] of [['w-b', 1, 0], ['w-a', 0, 0], ['w-a', 0, 1], ['w-c', 2, 0]] as const) expect((await write(id, epoch, seq)).status).toBe(200);
    const first = await client.streamProducers('adm-3/s0', { limit: 2 });
    expect(first.producers.map(({ id, epoch, lastSeq }) => ({ id, epoch, lastSeq }))).toEqual([{ id: 'w-a', epoch: 0, lastSeq: 1 }, { id: 'w-b', epoch: 1, lastSeq: 0 }]);
    expect(first.next).toBe('w-b');
    // The record's last write time, as an ISO timestamp.
    expect(first.producers[0]!.lastWriteAt).toBe(new Date(Date.parse(first.producers[0]!.lastWriteAt)).toISOString());
    const rest = await client.streamProducers('adm-3/s0', { after: first.next! });
    expect([rest.producers.map((p) => p.id), rest.next]).toEqual([['w-c'], null]);
    expect(await client.streamProducers('adm-2/s0')).toEqual({ producers: [], next: null });
    expect((await client.streamProducers('adm-3/s0', { after: '' })).producers.map((p) => p.id)).toEqual(['w-a', 'w-b', 'w-c']);
    for (const query of ['limit=0', 'limit=1001', 'limit=x', 'limit=01', 'limit=1&limit=2', 'after=a&after=b']) {
      const res = await fetch(`${server.url}/adm-3/s0/producers?${query}`);
      expect([query, res.status, (await res.json()).code]).toEqual([query, 400, 'INVALID_QUERY']);
    }
    const missing = await fetch(`${server.url}/adm-4/nope/producers`);
    expect([missing.status, (await missing.json()).code]).toEqual([404, 'STREAM_NOT_FOUND']);
    expect((await fetch(`${server.url}/adm-3/s0/producers`, { method: 'POST' })).status).toBe(405);
    // A /v1/stream stream's records are ?ext=producers.
    await client.stream('v1/stream/adm-producers').create({ contentType: 'application/json' });
    const v1 = await fetch(`${server.url}/v1/stream/adm-producers`, { method: 'POST', headers: { 'content-type': 'application/json', 'producer-id': 'v', 'producer-epoch': '0', 'producer-seq': '0' }, body: '[1]' });
    expect(v1.status).toBe(200);
    expect((await client.streamProducers('v1/stream/adm-producers')).producers.map((p) => p.id)).toEqual(['v']);
  });
});

/** The real SQLite engine, counting the reads that return stream bodies. */
class BodyReadCounter extends SqliteStore {
  bodyReads = 0;

  override readRange(...args: Parameters<SqliteStore['readRange']>): ReturnType<SqliteStore['readRange']> {
    this.bodyReads++;
    return super.readRange(...args);
  }

  override readChunks(...args: Parameters<SqliteStore['readChunks']>): ReturnType<SqliteStore['readChunks']> {
    this.bodyReads++;
    return super.readChunks(...args);
  }

  override chunkAt(...args: Parameters<SqliteStore['chunkAt']>): ReturnType<SqliteStore['chunkAt']> {
    this.bodyReads++;
    return super.chunkAt(...args);
  }
}

describe('stats read no stream body', () => {
  let server: Running;
  let store: BodyReadCounter;
  const dataDir = tempDataDir('rill-ops-stats-');
  afterAll(async () => {
    await server?.stop();
    removeDir(dataDir);
  });

  it('answers messages from the stream states, exact after appends and a fork, without reading a body', async () => {
    store = new BodyReadCounter({ dataDir, producers: DEFAULT_PRODUCER_SETTINGS });
    server = await startInProcess({}, store);
    const client = new RillClient({ url: server.url });
    const bin = v1StreamKey('stats-bin');
    await store.run('createStream', createRequest(bin, { contentType: 'application/octet-stream' }));
    for (const body of ['abc', 'de', 'f', '', 'gh']) await store.run('append', { name: bin, request: appendRequest(body) });
    const json = client.stream('v1/stream/stats-json');
    await json.create({ contentType: 'application/json' });
    await json.appendMessages([{ a: 1 }, { b: 2 }, { c: 3 }]);
    await json.appendMessages([{ d: 4 }]);
    await store.run('createStream', createRequest(v1StreamKey('stats-fork'), { fork: { sourceName: bin, offset: 5, subOffset: 0 } }));
    await store.run('append', { name: v1StreamKey('stats-fork'), request: appendRequest('xyz') });

    const before = store.bodyReads;
    // bin: abc de f gh (the empty append is none); json: 4 lines; fork: abc de of bin, then xyz.
    expect(await client.streamStats('v1/stream/stats-bin')).toMatchObject({ bytes: 8, messages: 4 });
    expect(await client.streamStats('v1/stream/stats-json')).toMatchObject({ bytes: 32, messages: 4 });
    expect(await client.streamStats('v1/stream/stats-fork')).toMatchObject({ bytes: 8, messages: 3 });
    expect(await client.stats()).toMatchObject({ streams: 3, bytes: 8 + 32 + 8, messages: 4 + 4 + 3 });
    expect(store.bodyReads).toBe(before);
  });
}, 60_000);

describe('readiness while starting', () => {
  it('answers /readyz 503 "starting" (and /healthz 200) until listen() has completed', async () => {
    const dataDir = tempDataDir('rill-ops-');
    const rill = createRillServer({ settings: { host: '127.0.0.1', port: 0, dataDir }, logger: memoryLogger().log });
    try {
      // The HTTP server takes connections before rill's own start (listen()) has run.
      await new Promise<void>((resolve) => rill.server.listen(0, '127.0.0.1', resolve));
      const url = `http://127.0.0.1:${(rill.server.address() as AddressInfo).port}`;
      const res = await fetch(`${url}/readyz`);
      expect([res.status, await res.json(), res.headers.get('retry-after')]).toEqual([503, { status: 'starting' }, '1']);
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
    } finally {
      await rill.close();
      removeDir(dataDir);
    }
  });
});
