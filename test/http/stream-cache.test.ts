/**
 * `rill serve --stream-cache N`: a server whose cache holds fewer streams than it serves
 * reads the others' rows on every write, and must answer exactly as one that caches all
 * (the real binary on SQLite; the storage contract suite runs the same with 3 entries).
 * Then the appends of 1 MiB or more that SQLite keeps for a reader going through one in
 * several responses (storage/large-appends.ts), as /metrics shows them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeDir, startServer, tempDataDir, type RunningServer, type ServerProcess } from '../helpers/server.js';

const STREAMS = 7;
const ROUNDS = 4;
let server: ServerProcess;

beforeAll(async () => {
  server = await startServer({ process: true, args: ['--stream-cache', '2'] });
});

afterAll(async () => {
  await server.stop();
  removeDir(server.dataDir);
});

const url = (i: number) => `${server.url}/v1/stream/cache-${i}`;
const post = (i: number, body: string, headers: Record<string, string> = {}) =>
  fetch(url(i), { method: 'POST', headers: { 'content-type': 'text/plain', ...headers }, body });

describe('a stream cache smaller than the streams written', () => {
  it('keeps every stream whole, producer dedup exact and offsets right, across a restart', async () => {
    for (let i = 0; i < STREAMS; i++) {
      expect((await fetch(url(i), { method: 'PUT', headers: { 'content-type': 'text/plain' } })).status).toBe(201);
    }
    const expected = Array.from({ length: STREAMS }, () => '');
    for (let round = 0; round < ROUNDS; round++) {
      for (let i = 0; i < STREAMS; i++) {
        const text = `<${i}.${round}>`;
        const producer = { 'producer-id': `p-${i}`, 'producer-epoch': '0', 'producer-seq': String(round) };
        const first = await post(i, text, producer);
        expect(first.status).toBe(200);
        expect(first.headers.get('stream-next-offset')).toBe(String(expected[i]!.length + text.length).padStart(20, '0'));
        // The same write again, after other streams pushed this one out of the cache.
        await post((i + 1) % STREAMS, `<x>`);
        expected[(i + 1) % STREAMS] += '<x>';
        expect((await post(i, text, producer)).status).toBe(204);
        expected[i] += text;
      }
    }
    await server.kill();
    server = await startServer({ process: true, dataDir: server.dataDir, args: ['--stream-cache', '2'] });
    for (let i = 0; i < STREAMS; i++) {
      const res = await fetch(`${url(i)}?offset=-1`);
      expect(await res.text()).toBe(expected[i]);
      expect(res.headers.get('stream-next-offset')).toBe(String(expected[i]!.length).padStart(20, '0'));
    }
  });

  it('reads back, from outside the cache, a stream whose name and attributes JSON must escape', async () => {
    // A row read on a miss comes from SQLite as JSON text (stream-rows.ts): quotes, a
    // backslash, a control character and characters beyond ASCII must come back as written.
    const bucket = `${server.url}/esc-bucket`;
    expect((await fetch(bucket, { method: 'PUT' })).status).toBe(201);
    const name = encodeURIComponent('naïve "quoted" \\ ünï 🌊');
    const stream = `${bucket}/${name}`;
    expect((await fetch(stream, { method: 'PUT', headers: { 'content-type': 'text/plain' } })).status).toBe(201);
    const attrs = { title: 'a "title" with \\ and \t and 🌊', metadata: { n: 2 ** 52, 'ключ': ['ü', null] } };
    expect((await fetch(`${stream}/attrs`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(attrs) })).status).toBeLessThan(300);
    expect((await fetch(stream, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'one' })).status).toBe(204);
    // Two other streams written push it out of a cache of two.
    for (const i of [0, 1]) expect((await post(i, '<y>')).status).toBe(204);
    expect((await fetch(stream, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'two' })).status).toBe(204);
    for (const i of [0, 1]) expect((await post(i, '<z>')).status).toBe(204);
    expect(await (await fetch(`${stream}/attrs`)).json()).toEqual(attrs);
    expect(await (await fetch(`${stream}?offset=-1`)).text()).toBe('onetwo');
  });

  it('refuses a cache of no streams at start', async () => {
    const dataDir = tempDataDir();
    try {
      await expect(startServer({ dataDir, args: ['--stream-cache', '0'] })).rejects.toThrow(/positive integer/);
    } finally {
      removeDir(dataDir);
    }
  });
});

/** The value of an unlabelled metric on the server's /metrics. */
async function metric(base: string, name: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  if (line === undefined) throw new Error(`no ${name} in /metrics`);
  return Number(line.slice(name.length + 1));
}

describe('a stream cache bounded by memory (--stream-cache-bytes)', () => {
  const BOUND_BYTES = 32 * 1024;
  let bounded: RunningServer;

  beforeAll(async () => {
    bounded = await startServer({ args: ['--stream-cache-bytes', '32KiB'] });
    // Attributes are a bucket stream's.
    expect((await fetch(`${bounded.url}/cached`, { method: 'PUT' })).status).toBe(201);
  });

  afterAll(async () => {
    await bounded.stop();
    removeDir(bounded.dataDir);
  });

  const at = (name: string) => `${bounded.url}/cached/${name}`;

  it('holds fewer streams with large attributes, and each still answers whole from outside it', async () => {
    // About 8 KB each in the cache (attributes count two bytes a character): four fit in 32 KiB.
    const attrs = (i: number) => ({ title: `${i}:`.padEnd(4000, 'x') });
    for (let i = 0; i < 12; i++) {
      expect((await fetch(at(`big-${i}`), { method: 'PUT', headers: { 'content-type': 'text/plain' } })).status).toBe(201);
      const put = await fetch(`${at(`big-${i}`)}/attrs`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(attrs(i)) });
      expect(put.status).toBeLessThan(300);
      expect((await fetch(at(`big-${i}`), { method: 'POST', headers: { 'content-type': 'text/plain' }, body: `<${i}>` })).status).toBe(204);
    }
    expect(await metric(bounded.url, 'rill_stream_cache_bytes')).toBeLessThanOrEqual(BOUND_BYTES);
    expect(await metric(bounded.url, 'rill_stream_cache_entries')).toBeLessThanOrEqual(4);
    for (let i = 0; i < 12; i++) {
      expect(await (await fetch(`${at(`big-${i}`)}?offset=-1`)).text()).toBe(`<${i}>`);
      expect(await (await fetch(`${at(`big-${i}`)}/attrs`)).json()).toEqual(attrs(i));
    }
  });

  it('holds many plain streams in the same bound: it counts memory, not streams', async () => {
    for (let i = 0; i < 40; i++) {
      expect((await fetch(at(`plain-${i}`), { method: 'PUT', headers: { 'content-type': 'text/plain' } })).status).toBe(201);
      expect((await fetch(at(`plain-${i}`), { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'x' })).status).toBe(204);
    }
    const misses = await metric(bounded.url, 'rill_stream_cache_misses_total');
    for (let i = 0; i < 40; i++) expect((await fetch(at(`plain-${i}`), { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'y' })).status).toBe(204);
    // Every one of the forty was still cached: the second round missed none.
    expect(await metric(bounded.url, 'rill_stream_cache_misses_total')).toBe(misses);
    expect(await metric(bounded.url, 'rill_stream_cache_entries')).toBeGreaterThanOrEqual(40);
    expect(await metric(bounded.url, 'rill_stream_cache_bytes')).toBeLessThanOrEqual(BOUND_BYTES);
  });
});

describe('large appends kept for the reads that go on through them', () => {
  /** Reads `stream` in eight windows of 256 KiB from its start (2 MiB), and answers the bytes. */
  const readInWindows = async (stream: string): Promise<Buffer> => {
    const parts: Buffer[] = [];
    let offset = '-1';
    for (let reads = 0; reads < 8; reads++) {
      const res = await fetch(`${stream}?offset=${offset}&max_bytes=262144`);
      expect(res.status).toBe(200);
      parts.push(Buffer.from(await res.arrayBuffer()));
      offset = res.headers.get('stream-next-offset')!;
    }
    return Buffer.concat(parts);
  };

  // On the event loop and on the storage thread, whose counters cross with each answer.
  for (const args of [[], ['--sqlite-thread', 'on']]) {
    it(`a reader going through a 5 MiB append in 256 KiB windows gets every byte, kept as written or loaded once (${args.join(' ') || 'default'})`, async () => {
      let server = await startServer({ args });
      try {
        const path = '/v1/stream/large';
        expect((await fetch(`${server.url}${path}`, { method: 'PUT', headers: { 'content-type': 'application/octet-stream' } })).status).toBe(201);
        // Larger than a read at the default window (4 MiB): kept as written.
        const body = Buffer.alloc(5 * 1024 * 1024);
        for (let i = 0; i < body.length; i++) body[i] = (i * 31 + (i >> 11)) & 0xff;
        expect((await fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body })).status).toBe(204);
        expect(await metric(server.url, 'rill_large_append_cache_bytes')).toBe(body.length);
        expect((await readInWindows(`${server.url}${path}`)).equals(body.subarray(0, 2 * 1024 * 1024))).toBe(true);
        // Every window found the append as the write left it.
        expect(await metric(server.url, 'rill_large_append_cache_hits_total')).toBe(8);
        await server.stop();
        server = await startServer({ args, dataDir: server.dataDir });
        expect(await metric(server.url, 'rill_large_append_cache_bytes')).toBe(0);
        expect((await readInWindows(`${server.url}${path}`)).equals(body.subarray(0, 2 * 1024 * 1024))).toBe(true);
        // After a restart the first window loads it and, cutting it, keeps it; the seven after it find it.
        expect(await metric(server.url, 'rill_large_append_cache_hits_total')).toBe(7);
        expect(await metric(server.url, 'rill_large_append_cache_bytes')).toBe(body.length);
      } finally {
        await server.stop();
        removeDir(server.dataDir);
      }
    });
  }
});
