/**
 * `rill serve --stream-cache N`: a server whose cache holds fewer streams than it serves
 * reads the others' rows on every write, and must answer exactly as one that caches all
 * (the real binary on SQLite; the storage contract suite runs the same with 3 entries).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeDir, startServer, tempDataDir, type ServerProcess } from '../helpers/server.js';

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

  it('refuses a cache of no streams at start', async () => {
    const dataDir = tempDataDir();
    try {
      await expect(startServer({ dataDir, args: ['--stream-cache', '0'] })).rejects.toThrow(/positive integer/);
    } finally {
      removeDir(dataDir);
    }
  });
});
