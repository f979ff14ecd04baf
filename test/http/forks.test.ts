/**
 * Forks beyond what the upstream suite checks: the bucket family, forks across
 * families, isolation from the source's later appends under concurrent live reads,
 * and forks, snapshots, retention and attributes surviving a restart.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { bootstrapParts, del, get, head, offset, post, put, readAll } from '../helpers/http.js';
import { extensionUrl } from '../../src/protocol/extensions.js';

let server: RunningServer;
let n = 0;
const text = { 'content-type': 'text/plain' };

beforeAll(async () => {
  server = await startServer({ args: ['--long-poll-timeout', '300ms'] });
  expect((await put(`${server.url}/forkdocs`)).status).toBe(201);
});

afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

const bucketUrl = (name: string) => `${server.url}/forkdocs/${name}-${Date.now()}-${n++}`;
const pathOf = (url: string) => new URL(url).pathname;

describe('forks', () => {
  test('work in the bucket family and across families', async () => {
    const source = bucketUrl('src');
    await put(source, 'shared ', text);
    const bucketFork = bucketUrl('fork');
    const v1Fork = `${server.url}/v1/stream/xfork-${Date.now()}-${n++}`;
    expect((await put(bucketFork, undefined, { 'stream-forked-from': pathOf(source) })).status).toBe(201);
    expect((await put(v1Fork, undefined, { 'stream-forked-from': source })).status).toBe(201);
    await post(bucketFork, 'bucket', text);
    await post(v1Fork, 'v1', text);
    expect((await get(bucketFork)).text).toBe('shared bucket');
    expect((await get(v1Fork)).text).toBe('shared v1');
    expect((await get(source)).text).toBe('shared ');
    const missing = await put(bucketUrl('fork'), undefined, { 'stream-forked-from': `/forkdocs/none-${Date.now()}` });
    expect(missing.status).toBe(404);
  });

  test("a fork's reads, catch-up and live, never show the source's appends after the fork point", async () => {
    const source = bucketUrl('iso-src');
    await put(source, undefined, { 'content-type': 'application/json' });
    for (let i = 0; i < 5; i++) await post(source, JSON.stringify({ src: i }), { 'content-type': 'application/json' });
    const fork = bucketUrl('iso-fork');
    const created = await put(fork, undefined, { 'stream-forked-from': pathOf(source) });
    const forkPoint = created.headers.get('stream-next-offset')!;
    const sourceWriter = (async () => {
      for (let i = 5; i < 40; i++) await post(source, JSON.stringify({ src: i }), { 'content-type': 'application/json' });
    })();
    const liveRead = get(`${fork}?offset=${forkPoint}&live=long-poll`);
    await post(fork, JSON.stringify({ fork: 1 }), { 'content-type': 'application/json' });
    const live = await liveRead;
    await sourceWriter;
    expect(live.json).toEqual([{ fork: 1 }]);
    const whole = await get(`${fork}?offset=-1`);
    expect(whole.json).toEqual([{ src: 0 }, { src: 1 }, { src: 2 }, { src: 3 }, { src: 4 }, { fork: 1 }]);
    const parts = bootstrapParts(await get(extensionUrl(fork, 'bootstrap')));
    expect(parts.slice(1).map((p) => JSON.parse(p.body.toString()))).toEqual([{ src: 0 }, { src: 1 }, { src: 2 }, { src: 3 }, { src: 4 }, { fork: 1 }]);
    expect(((await get(`${source}?offset=-1`)).json as unknown[]).length).toBe(40);
  });

  test('retention on a fork source keeps the history the fork still reads', async () => {
    const source = bucketUrl('ret-src');
    await put(source, 'aaaa', text);
    await post(source, 'bbbb', text);
    const fork = bucketUrl('ret-fork');
    await put(fork, undefined, { 'stream-forked-from': pathOf(source), 'stream-fork-offset': offset(8) });
    await put(extensionUrl(source, `snapshot/${offset(8)}`), 'S');
    expect((await put(extensionUrl(source, `retention/${offset(8)}`))).status).toBe(204);
    expect((await get(`${source}?offset=-1`)).status).toBe(410);
    expect((await get(`${fork}?offset=-1`)).text).toBe('aaaabbbb');
  });
});

describe('restart', () => {
  test('snapshots, retention, forks, soft-deleted sources and attributes survive a SIGKILL', async () => {
    const own = await startServer({ process: true });
    const base = `${own.url}/v1/stream`;
    const doc = `${base}/doc`;
    await put(doc, 'one,', { ...text, 'stream-attrs': '{"title":"kept"}' });
    await post(doc, 'two,', text);
    await post(doc, 'three,', text);
    const snap = await put(extensionUrl(doc, `snapshot/${offset(8)}`), 'one,two', { 'content-type': 'text/x-fold' });
    await put(extensionUrl(doc, `retention/${offset(8)}`));
    await put(`${base}/src`, 'history', text);
    await put(`${base}/fork`, undefined, { 'stream-forked-from': '/v1/stream/src' });
    await post(`${base}/fork`, '+fork', text);
    await post(`${base}/src`, '+after', text);
    expect((await del(`${base}/src`)).status).toBe(204);
    const incarnation = (await head(doc)).headers.get('stream-incarnation');
    await own.kill();
    const again = await startServer({ dataDir: own.dataDir });
    try {
      const b = `${again.url}/v1/stream`;
      const meta = await head(`${b}/doc`);
      expect(meta.headers.get('stream-incarnation')).toBe(incarnation);
      expect(meta.headers.get('stream-earliest-offset')).toBe(offset(8));
      expect(meta.headers.get('stream-snapshot-digest')).toBe(snap.headers.get('stream-snapshot-digest'));
      expect((await get(`${b}/doc?offset=-1`)).status).toBe(410);
      expect((await readAll(`${b}/doc`, offset(8))).body.toString()).toBe('three,');
      expect((await get(extensionUrl(`${b}/doc`, `snapshot/${offset(8)}`))).text).toBe('one,two');
      expect((await get(extensionUrl(`${b}/doc`, 'attrs'))).json).toEqual({ title: 'kept' });
      expect((await get(`${b}/fork`)).text).toBe('history+fork');
      expect((await head(`${b}/src`)).status).toBe(410);
      expect((await del(`${b}/fork`)).status).toBe(204);
      expect((await head(`${b}/src`)).status).toBe(404);
    } finally {
      await again.stop();
      removeDir(own.dataDir);
    }
  });
});
