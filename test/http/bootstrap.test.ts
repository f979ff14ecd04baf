/**
 * Bootstrap over real HTTP: the snapshot (or an empty part) followed by one part per
 * retained message, with its continuation headers; and the recovery path a client takes
 * after a 410: bootstrap, then tail live from Stream-Next-Offset, losing and repeating
 * nothing while a writer keeps appending.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { bootstrapParts, errorCode, get, offset, post, put } from '../helpers/http.js';
import { sseBlocks } from '../helpers/sse.js';
import { extensionUrl } from '../../src/protocol/extensions.js';

let server: RunningServer;
let n = 0;
const v1 = (name: string) => `${server.url}/v1/stream/${name}-${Date.now()}-${n++}`;

beforeAll(async () => {
  server = await startServer({ args: ['--long-poll-timeout', '300ms'] });
  expect((await put(`${server.url}/bootdocs`)).status).toBe(201);
});

afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

describe('bootstrap', () => {
  test('without a snapshot: an empty octet-stream part, then one part per JSON message', async () => {
    const url = v1('boot-json');
    await put(url, '[{"n":1},{"n":2}]', { 'content-type': 'application/json' });
    await post(url, '{"n":3}', { 'content-type': 'application/json' });
    const reply = await get(extensionUrl(url, 'bootstrap'));
    expect(reply.status).toBe(200);
    expect(reply.headers.get('stream-snapshot-offset')).toBe('-1');
    expect(reply.headers.get('stream-next-offset')).toBe(offset(24));
    expect(reply.headers.get('stream-up-to-date')).toBe('true');
    expect(reply.headers.get('stream-closed')).toBeNull();
    expect(reply.headers.get('stream-incarnation')).toBeTruthy();
    const parts = bootstrapParts(reply);
    expect(parts[0]).toEqual({ contentType: 'application/octet-stream', body: Buffer.alloc(0) });
    expect(parts.slice(1).map((p) => [p.contentType, JSON.parse(p.body.toString())])).toEqual([
      ['application/json', { n: 1 }],
      ['application/json', { n: 2 }],
      ['application/json', { n: 3 }],
    ]);
  });

  test('with a snapshot: the snapshot part with its own type, then the messages after it, each an original append', async () => {
    const url = `${server.url}/bootdocs/boot-bin-${Date.now()}`;
    await put(url, 'one', { 'content-type': 'text/plain' });
    await post(url, 'two', { 'content-type': 'text/plain' });
    await post(url, 'three', { 'content-type': 'text/plain' });
    await put(extensionUrl(url, `snapshot/${offset(6)}`), '{"folded":"onetwo"}', { 'content-type': 'application/json' });
    await post(url, undefined, { 'stream-closed': 'true' });
    const reply = await get(extensionUrl(url, 'bootstrap'));
    expect(reply.headers.get('stream-snapshot-offset')).toBe(offset(6));
    expect(reply.headers.get('stream-next-offset')).toBe(offset(11));
    expect(reply.headers.get('stream-closed')).toBe('true');
    const parts = bootstrapParts(reply);
    expect(parts.map((p) => [p.contentType, p.body.toString()])).toEqual([
      ['application/json', '{"folded":"onetwo"}'],
      ['text/plain', 'three'],
    ]);
  });

  test('binary parts are carried byte for byte', async () => {
    const url = v1('boot-octets');
    const first = Buffer.from([0, 13, 10, 45, 45, 255]);
    const second = Buffer.from('\r\n--rill-fake-boundary\r\n');
    await put(url, first, { 'content-type': 'application/octet-stream' });
    await post(url, second, { 'content-type': 'application/octet-stream' });
    const parts = bootstrapParts(await get(extensionUrl(url, 'bootstrap')));
    expect(parts.slice(1).map((p) => p.body)).toEqual([first, second]);
  });

  test('live modes are refused; missing streams answer 404; a wrong incarnation 412', async () => {
    const url = v1('boot-refusals');
    const created = await put(url, 'x', { 'content-type': 'text/plain' });
    const live = await get(extensionUrl(url, 'bootstrap', 'live=sse'));
    expect(live.status).toBe(400);
    expect(errorCode(live)).toBe('LIVE_NOT_ALLOWED');
    expect((await get(`${url}-missing/bootstrap`)).status).toBe(404);
    const stale = await get(extensionUrl(url, 'bootstrap'), { 'stream-incarnation': 'not-this-one' });
    expect(stale.status).toBe(412);
    expect(stale.headers.get('stream-incarnation')).toBe(created.headers.get('stream-incarnation'));
  });

  test('a large backlog comes as a partial bootstrap that ordinary reads complete', async () => {
    const url = v1('boot-partial');
    const megabyte = Buffer.alloc(1024 * 1024, 7);
    await put(url, undefined, { 'content-type': 'application/octet-stream' });
    for (let i = 0; i < 10; i++) await post(url, megabyte, { 'content-type': 'application/octet-stream' });
    const reply = await get(extensionUrl(url, 'bootstrap'));
    const parts = bootstrapParts(reply);
    const updates = parts.slice(1);
    expect(updates.length).toBeGreaterThan(0);
    expect(updates.length).toBeLessThan(10);
    for (const part of updates) expect(part.body.length).toBe(megabyte.length);
    expect(reply.headers.get('stream-up-to-date')).toBeNull();
    expect(reply.headers.get('stream-next-offset')).toBe(offset(updates.length * megabyte.length));
  });
});

/** Reads SSE events from a response until `done` says stop or the deadline passes. */
async function sseMessages(url: string, until: (messages: unknown[]) => boolean, timeoutMs: number): Promise<unknown[]> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  const messages: unknown[] = [];
  try {
    const res = await fetch(url, { signal: abort.signal });
    expect(res.status).toBe(200);
    for await (const block of sseBlocks(res)) {
      if (!block.startsWith('event: data')) continue;
      const data = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5)).join('\n');
      messages.push(...(JSON.parse(data) as unknown[]));
      if (until(messages)) break;
    }
  } catch (error) {
    if (!abort.signal.aborted) throw error;
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
  return messages;
}

describe('recovering from 410 with bootstrap', () => {
  test('a reader told 410 bootstraps and continues live from Stream-Next-Offset without a gap or a repeat', async () => {
    const url = v1('boot-recover');
    await put(url, undefined, { 'content-type': 'application/json' });
    for (let i = 0; i < 20; i++) await post(url, JSON.stringify({ i }), { 'content-type': 'application/json' });
    // The application folds the first 10 events into a snapshot and trims them.
    const foldedUpTo = 10 * Buffer.byteLength('{"i":0}\n') ;
    const tenth = await get(`${url}?offset=-1&max_bytes=${foldedUpTo}`);
    expect(tenth.headers.get('stream-next-offset')).toBe(offset(foldedUpTo));
    await put(extensionUrl(url, `snapshot/${offset(foldedUpTo)}`), JSON.stringify({ upTo: 9 }), { 'content-type': 'application/json' });
    expect((await put(extensionUrl(url, `retention/${offset(foldedUpTo)}`))).status).toBe(204);

    const stale = await get(`${url}?offset=${offset(0)}`);
    expect(stale.status).toBe(410);
    const writer = (async () => {
      for (let i = 20; i < 60; i++) {
        await post(url, JSON.stringify({ i }), { 'content-type': 'application/json' });
        await new Promise((r) => setTimeout(r, 3)); // the pause is the behaviour: appends keep arriving while the reader bootstraps and goes live
      }
    })();
    const boot = await get(extensionUrl(url, 'bootstrap'));
    const parts = bootstrapParts(boot);
    const snapshot = JSON.parse(parts[0]!.body.toString()) as { upTo: number };
    const fromBootstrap = parts.slice(1).map((p) => (JSON.parse(p.body.toString()) as { i: number }).i);
    const next = boot.headers.get('stream-next-offset')!;
    const live = await sseMessages(`${url}?offset=${next}&live=sse`, (m) => fromBootstrap.length + m.length + snapshot.upTo + 1 >= 60, 15_000);
    await writer;
    const seen = [...fromBootstrap, ...live.map((m) => (m as { i: number }).i)];
    const expected = Array.from({ length: 60 - (snapshot.upTo + 1) }, (_, k) => k + snapshot.upTo + 1);
    expect(seen).toEqual(expected);
  }, 30_000);
});
