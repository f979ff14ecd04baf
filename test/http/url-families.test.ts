/**
 * `/v1/stream/{name}` (bucket-less, for unmodified Durable Streams clients) and
 * `/{bucket}/{stream}` serve the same streams protocol. The same scenario runs against
 * both; each step's answer is checked against the protocol and the two transcripts must
 * be identical. `/v1/stream` names may hold `/` and any segment (issue 36): its extensions
 * are `?ext=`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { STREAM_EXTENSIONS } from '../../src/protocol/ids.js';
import { call, expectRefusal, offset, unique, type Reply } from './client.js';

let server: RunningServer;
let bucket: string;
const http = (method: string, path: string, options = {}) => call(server.url, method, path, options);

beforeAll(async () => {
  server = await startServer();
  bucket = unique('fam');
  expect((await http('PUT', `/${bucket}`)).status).toBe(201);
});
afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

const TEXT = { 'content-type': 'text/plain' };

/** What a step leaves that both families must agree on (incarnations differ by design). */
function summary(r: Reply): string {
  const h = r.headers;
  const keep = ['content-type', 'stream-next-offset', 'stream-offset', 'stream-up-to-date', 'stream-closed'];
  return JSON.stringify([r.status, keep.map((k) => h[k] ?? null), r.status >= 400 && r.body.length > 0 ? (r.json() as { code: string }).code : r.text()]);
}

/** Create, append, read, head, close, delete and recreate one stream at `path`. */
async function lifecycle(path: string): Promise<string[]> {
  const t: string[] = [];
  const step = async (method: string, p: string, options = {}) => {
    const reply = await http(method, p, options);
    t.push(summary(reply));
    return reply;
  };
  const created = await step('PUT', path, { headers: TEXT });
  expect(created.status).toBe(201);
  expect(created.headers['location']).toBe(`${server.url}${path}`);
  expect(created.headers['stream-next-offset']).toBe(offset(0));
  const incarnation = created.headers['stream-incarnation'];
  expect(incarnation).toBeTruthy();
  expect((await step('PUT', path, { headers: TEXT })).status).toBe(200);
  expectRefusal(await step('PUT', path, { headers: { 'content-type': 'application/json' } }), 'STREAM_CONFIG_CONFLICT');
  const a1 = await step('POST', path, { headers: TEXT, body: 'hello ' });
  expect([a1.status, a1.headers['stream-next-offset']]).toEqual([204, offset(6)]);
  const a2 = await step('POST', path, { headers: TEXT, body: 'world' });
  expect([a2.status, a2.headers['stream-next-offset']]).toEqual([204, offset(11)]);
  const all = await step('GET', `${path}?offset=-1`);
  expect([all.status, all.text(), all.headers['content-type']]).toEqual([200, 'hello world', 'text/plain']);
  expect([all.headers['stream-next-offset'], all.headers['stream-up-to-date']]).toEqual([offset(11), 'true']);
  expect((await step('GET', `${path}?offset=${offset(6)}`)).text()).toBe('world');
  const head = await step('HEAD', path);
  expect([head.status, head.body.length, head.headers['stream-next-offset'], head.headers['content-type']]).toEqual([200, 0, offset(11), 'text/plain']);
  expect(head.headers['stream-incarnation']).toBe(incarnation);
  await closeSteps(path, step);
  expect((await step('DELETE', path)).status).toBe(204);
  for (const method of ['GET', 'POST', 'DELETE']) {
    expectRefusal(await step(method, path, method === 'POST' ? { headers: TEXT, body: 'x' } : {}), 'STREAM_NOT_FOUND');
  }
  expect((await step('HEAD', path)).status).toBe(404);
  const again = await step('PUT', path, { headers: TEXT });
  expect(again.status).toBe(201);
  expect(again.headers['stream-incarnation']).not.toBe(incarnation);
  expect((await step('GET', `${path}?offset=-1`)).text()).toBe('');
  return t;
}

type Step = (method: string, path: string, options?: object) => Promise<Reply>;

async function closeSteps(path: string, step: Step): Promise<void> {
  const closed = await step('POST', path, { headers: { 'stream-closed': 'true' } });
  expect([closed.status, closed.headers['stream-closed'], closed.headers['stream-next-offset']]).toEqual([204, 'true', offset(11)]);
  const refused = await step('POST', path, { headers: TEXT, body: '!' });
  expectRefusal(refused, 'STREAM_CLOSED');
  expect(refused.headers['stream-closed']).toBe('true');
  const read = await step('GET', `${path}?offset=-1`);
  expect([read.text(), read.headers['stream-closed']]).toEqual(['hello world', 'true']);
  expect((await step('HEAD', path)).headers['stream-closed']).toBe('true');
}

/** Create-closed with an initial body, and append-and-close. */
async function closingWrites(path: string, other: string): Promise<string[]> {
  const t: string[] = [];
  const step = async (method: string, p: string, options = {}) => {
    const reply = await http(method, p, options);
    t.push(summary(reply));
    return reply;
  };
  const created = await step('PUT', path, { headers: { ...TEXT, 'stream-closed': 'true' }, body: 'sealed' });
  expect([created.status, created.headers['stream-closed'], created.headers['stream-next-offset']]).toEqual([201, 'true', offset(6)]);
  const read = await step('GET', `${path}?offset=-1`);
  expect([read.text(), read.headers['stream-closed']]).toEqual(['sealed', 'true']);
  expect((await step('PUT', other, { headers: TEXT, body: 'ab' })).status).toBe(201);
  const last = await step('POST', other, { headers: { ...TEXT, 'stream-closed': 'true' }, body: 'cd' });
  expect([last.status, last.headers['stream-closed'], last.headers['stream-next-offset']]).toEqual([204, 'true', offset(4)]);
  expect((await step('GET', `${other}?offset=-1`)).text()).toBe('abcd');
  return t;
}

describe('both URL families', () => {
  it('run the same stream lifecycle with the same answers', async () => {
    const name = unique('life');
    const v1 = await lifecycle(`/v1/stream/${name}`);
    const bucketed = await lifecycle(`/${bucket}/${name}`);
    expect(bucketed).toEqual(v1);
  });

  it('create closed and append-and-close the same way', async () => {
    const name = unique('close');
    const v1 = await closingWrites(`/v1/stream/${name}`, `/v1/stream/${name}-b`);
    const bucketed = await closingWrites(`/${bucket}/${name}`, `/${bucket}/${name}-b`);
    expect(bucketed).toEqual(v1);
  });

  it('keep streams of the same name apart', async () => {
    const name = unique('apart');
    expect((await http('PUT', `/v1/stream/${name}`, { headers: TEXT, body: 'v1 bytes' })).status).toBe(201);
    expect((await http('PUT', `/${bucket}/${name}`, { headers: TEXT, body: 'bucket bytes' })).status).toBe(201);
    expect((await http('GET', `/v1/stream/${name}?offset=-1`)).text()).toBe('v1 bytes');
    expect((await http('GET', `/${bucket}/${name}?offset=-1`)).text()).toBe('bucket bytes');
    expect((await http('DELETE', `/v1/stream/${name}`)).status).toBe(204);
    expect((await http('GET', `/${bucket}/${name}?offset=-1`)).text()).toBe('bucket bytes');
  });

  it('let a fork in one family read a source in the other', async () => {
    const name = unique('cross');
    expect((await http('PUT', `/v1/stream/${name}`, { headers: TEXT, body: 'from v1' })).status).toBe(201);
    const fork = await http('PUT', `/${bucket}/${name}-fork`, { headers: { 'stream-forked-from': `/v1/stream/${name}` } });
    expect(fork.status, fork.text()).toBe(201);
    await http('POST', `/${bucket}/${name}-fork`, { headers: TEXT, body: '+fork' });
    expect((await http('GET', `/${bucket}/${name}-fork?offset=-1`)).text()).toBe('from v1+fork');
  });
});

describe('/v1/stream names that hold "/"', () => {
  it('run the same lifecycle as a bucket stream, with the slashes kept in Location', async () => {
    const name = unique('slash');
    const v1 = await lifecycle(`/v1/stream/events/${name}`);
    const bucketed = await lifecycle(`/${bucket}/${name}-b`);
    expect(bucketed).toEqual(v1);
  });

  it('keep a/b apart from a, serve extensions after the full name, and fork from a slash name by path or URL', async () => {
    const name = unique('nest');
    expect((await http('PUT', `/v1/stream/${name}`, { headers: TEXT, body: 'parent' })).status).toBe(201);
    expect((await http('PUT', `/v1/stream/${name}/child/leaf`, { headers: TEXT, body: 'leaf' })).status).toBe(201);
    expect((await http('GET', `/v1/stream/${name}?offset=-1`)).text()).toBe('parent');
    expect((await http('GET', `/v1/stream/${name}/child/leaf?offset=-1`)).text()).toBe('leaf');
    expect((await http('GET', `/v1/stream/${name}/child/leaf?ext=attrs`)).json()).toEqual({});
    expectRefusal(await http('GET', `/v1/stream/${name}/child?offset=-1`), 'STREAM_NOT_FOUND');
    for (const from of [`/v1/stream/${name}/child/leaf`, `${server.url}/v1/stream/${name}/child/leaf`]) {
      const fork = await http('PUT', `/v1/stream/forks/${unique('f')}`, { headers: { 'stream-forked-from': from } });
      expect(fork.status, fork.text()).toBe(201);
      expect((await http('GET', `${new URL(fork.headers['location']!).pathname}?offset=-1`)).text()).toBe('leaf');
    }
  });

  it('refuse a second spelling (%2F), an empty segment, and "__ds" as a stream', async () => {
    const name = unique('spell');
    for (const path of [`/v1/stream/events%2F${name}`, `/v1/stream/events//${name}`]) {
      expectRefusal(await http('PUT', path, { headers: TEXT }), 'INVALID_ID');
    }
    expectRefusal(await http('PUT', '/v1/stream/__ds', { headers: TEXT }), 'NOT_FOUND');
    expectRefusal(await http('PUT', `/${bucket}/__ds`, { headers: TEXT }), 'NOT_FOUND');
    expectRefusal(await http('GET', `/v1/stream/events/${name}?offset=-1`), 'STREAM_NOT_FOUND');
  });

  it('take every name the Yjs provider builds: 256-character doc ids with "/", names ending in an extension keyword, .snapshots/{offset}_snapshot', async () => {
    // A doc id of [a-zA-Z0-9_/-], 256 characters, with "/" in it (never two in a row, never at the end).
    const docId = `${unique('doc')}-${'aB/c_9-'.repeat(40)}`.slice(0, 255) + 'z';
    expect(docId).toMatch(/^[a-zA-Z0-9_/-]{256}$/);
    const root = `/v1/stream/yjs/notes/docs/${docId}`;
    const names = [`${root}/updates`, `${root}/.snapshots/00000000000000000042_snapshot`, ...STREAM_EXTENSIONS.map((ext) => `${root}/${ext}`), `${root}/snapshot/00000000000000000000`];
    for (const path of names) {
      expect((await http('PUT', path, { headers: TEXT, body: path.slice(-12) })).status, path).toBe(201);
    }
    // Each is its own plain stream: its bytes, its HEAD, its appends, and its own extensions by ?ext=.
    for (const path of names) {
      expect((await http('POST', path, { headers: TEXT, body: '+' })).status, path).toBe(204);
      expect((await http('GET', `${path}?offset=-1`)).text(), path).toBe(`${path.slice(-12)}+`);
      expect((await http('GET', `${path}?ext=stats`)).json(), path).toMatchObject({ messages: 2 });
    }
    expect((await http('GET', `${root}?offset=-1`)).status).toBe(404);
    expect((await http('PUT', `${root}/updates?ext=attrs`, { headers: { 'content-type': 'application/json' }, body: '{"title":"doc"}' })).status).toBe(204);
    expect((await http('GET', `${root}/updates?ext=attrs`)).json()).toEqual({ title: 'doc' });
    expect((await http('GET', `${root}/attrs?ext=attrs`)).json()).toEqual({});
  });

  it('name the longest /v1/stream name 1024 bytes, counted in UTF-8', async () => {
    const prefix = `/v1/stream/${unique('long')}/`;
    const room = 1024 - Buffer.byteLength(prefix.slice('/v1/stream/'.length));
    expect((await http('PUT', `${prefix}${'x'.repeat(room)}`, { headers: TEXT })).status).toBe(201);
    expectRefusal(await http('PUT', `${prefix}${'x'.repeat(room + 1)}`, { headers: TEXT }), 'INVALID_ID');
    expectRefusal(await http('PUT', `${prefix}${'x'.repeat(room - 1)}${encodeURIComponent('é')}`, { headers: TEXT }), 'INVALID_ID');
  });
});
