/**
 * Buckets over real HTTP against the rill binary: create, inspect, delete, list, and the
 * id rules of DESIGN.md (bucket `[a-z0-9_-]{4,64}`; stream id at most 122 bytes without
 * `/`, NUL, control characters or `..`; `streams` reserved).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { call, expectRefusal, unique } from './client.js';

let server: RunningServer;
const http = (method: string, path: string, options = {}) => call(server.url, method, path, options);

beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

async function newBucket(prefix = 'bkt'): Promise<string> {
  const id = unique(prefix);
  expect((await http('PUT', `/${id}`)).status).toBe(201);
  return id;
}

async function putStream(bucket: string, id: string): Promise<void> {
  const reply = await http('PUT', `/${bucket}/${encodeURIComponent(id)}`, { headers: { 'content-type': 'text/plain' } });
  expect(reply.status, reply.text()).toBe(201);
}

interface Listing {
  bucket: string;
  streams: string[];
  next: string | null;
}

async function list(bucket: string, query: string): Promise<Listing> {
  const reply = await http('GET', `/${bucket}/streams${query}`);
  expect(reply.status, reply.text()).toBe(200);
  expect(reply.headers['content-type']).toBe('application/json');
  return reply.json() as Listing;
}

describe('bucket lifecycle', () => {
  it('creates with 201, answers 200 for an existing bucket, and describes it as JSON', async () => {
    const id = unique('life');
    const first = await http('PUT', `/${id}`);
    expect(first.status).toBe(201);
    expect(first.json()).toMatchObject({ id });
    const again = await http('PUT', `/${id}`);
    expect(again.status).toBe(200);
    expect(again.json()).toMatchObject({ id });
    const info = await http('GET', `/${id}`);
    expect(info.status).toBe(200);
    expect(info.headers['content-type']).toBe('application/json');
    expect(info.json()).toMatchObject({ id, streamCount: 0 });
  });

  it("a fork in another bucket does not keep the owner's bucket from being deleted once the owner deleted the stream", async () => {
    const owner = await newBucket();
    const other = await newBucket();
    expect((await http('PUT', `/${owner}/src`, { headers: { 'content-type': 'text/plain' }, body: 'owned' })).status).toBe(201);
    expect((await http('PUT', `/${other}/fork`, { headers: { 'stream-forked-from': `/${owner}/src` } })).status).toBe(201);
    expect((await http('DELETE', `/${owner}/src`)).status).toBe(204);
    // The count and the listing agree, and the deletion follows them.
    expect((await http('GET', `/${owner}`)).json()).toMatchObject({ streamCount: 0 });
    expect((await http('GET', `/${owner}/streams`)).json()).toMatchObject({ streams: [] });
    expect((await http('DELETE', `/${owner}`)).status).toBe(204);
    expect((await http('GET', `/${other}/fork?offset=-1`)).text()).toBe('owned');
  });

  it('counts streams, refuses to delete a bucket that holds any, then deletes it', async () => {
    const id = await newBucket();
    await putStream(id, 'one');
    await putStream(id, 'two');
    expect((await http('GET', `/${id}`)).json()).toMatchObject({ id, streamCount: 2 });
    expectRefusal(await http('DELETE', `/${id}`), 'BUCKET_NOT_EMPTY');
    expect((await http('DELETE', `/${id}/one`)).status).toBe(204);
    expect((await http('GET', `/${id}`)).json()).toMatchObject({ streamCount: 1 });
    expectRefusal(await http('DELETE', `/${id}`), 'BUCKET_NOT_EMPTY');
    expect((await http('DELETE', `/${id}/two`)).status).toBe(204);
    expect((await http('DELETE', `/${id}`)).status).toBe(204);
    expectRefusal(await http('GET', `/${id}`), 'BUCKET_NOT_FOUND');
    expectRefusal(await http('DELETE', `/${id}`), 'BUCKET_NOT_FOUND');
    expectRefusal(await http('GET', `/${id}/streams`), 'BUCKET_NOT_FOUND');
  });

  it('refuses a stream in a missing bucket without creating the bucket', async () => {
    const id = unique('ghost');
    expectRefusal(await http('PUT', `/${id}/s`, { headers: { 'content-type': 'text/plain' } }), 'BUCKET_NOT_FOUND');
    expectRefusal(await http('GET', `/${id}`), 'BUCKET_NOT_FOUND');
    expectRefusal(await http('POST', `/${id}/s`, { headers: { 'content-type': 'text/plain' }, body: 'x' }), 'STREAM_NOT_FOUND');
  });
});

describe('listing a bucket', () => {
  const ids = ['m', 'a', 'a-1', 'a-10', 'a-2', 'b', 'é', 'z z', 'Zed', 'a.b', 'c', 'd'];
  const sorted = [...ids].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
  let bucket: string;

  beforeAll(async () => {
    bucket = await newBucket('list');
    for (const id of ids) await putStream(bucket, id);
  });

  it('lists every stream sorted, with no next page', async () => {
    expect(await list(bucket, '')).toEqual({ bucket, streams: sorted, next: null });
  });

  it('pages through with limit and after, each page at most limit long', async () => {
    for (const limit of [1, 5, ids.length - 1, ids.length]) {
      const seen: string[] = [];
      let after: string | null = null;
      for (let guard = 0; guard <= ids.length; guard++) {
        const page: Listing = await list(bucket, `?limit=${limit}${after === null ? '' : `&after=${encodeURIComponent(after)}`}`);
        expect(page.streams.length).toBeLessThanOrEqual(limit);
        seen.push(...page.streams);
        if (page.next === null) break;
        expect(page.next).toBe(page.streams[page.streams.length - 1]);
        after = page.next;
      }
      expect(seen).toEqual(sorted);
    }
  });

  it('filters by prefix and starts after a name', async () => {
    expect((await list(bucket, '?prefix=a-')).streams).toEqual(['a-1', 'a-10', 'a-2']);
    expect((await list(bucket, '?prefix=a&after=a-10')).streams).toEqual(['a-2', 'a.b']);
    expect((await list(bucket, '?prefix=a&after=a-10&limit=1'))).toEqual({ bucket, streams: ['a-2'], next: 'a-2' });
    expect((await list(bucket, `?prefix=${encodeURIComponent('é')}`)).streams).toEqual(['é']);
    expect((await list(bucket, '?after=m')).streams).toEqual(sorted.slice(sorted.indexOf('m') + 1));
    expect((await list(bucket, '?prefix=nothing')).streams).toEqual([]);
  });

  it('accepts limits from 1 to 1000 and refuses others with 400', async () => {
    expect((await list(bucket, '?limit=1')).streams).toEqual(sorted.slice(0, 1));
    expect((await list(bucket, '?limit=1000')).streams).toEqual(sorted);
    for (const bad of ['0', '1001', '-1', 'abc', '01', '1.5', '', '1e2']) {
      expectRefusal(await http('GET', `/${bucket}/streams?limit=${bad}`), 'INVALID_QUERY');
    }
    expectRefusal(await http('GET', `/${bucket}/streams?limit=2&limit=3`), 'INVALID_QUERY');
  });

  it('leaves deleted streams out and keeps other buckets apart', async () => {
    const other = await newBucket('lista');
    await putStream(other, 'a-3');
    await putStream(other, 'gone');
    expect((await http('DELETE', `/${other}/gone`)).status).toBe(204);
    expect((await list(other, '')).streams).toEqual(['a-3']);
    expect((await list(bucket, '?prefix=a-')).streams).toEqual(['a-1', 'a-10', 'a-2']);
  });

  it('?details=true answers each listed stream with its content type, tail, bytes, messages, closure and creation, paged as the names are', async () => {
    const other = await newBucket('listd');
    await putStream(other, 'text');
    expect((await http('POST', `/${other}/text`, { headers: { 'content-type': 'text/plain' }, body: 'hello' })).status).toBe(204);
    expect((await http('PUT', `/${other}/json`, { headers: { 'content-type': 'application/json' }, body: '[{"a":1},{"b":2}]' })).status).toBe(201);
    expect((await http('POST', `/${other}/json`, { headers: { 'content-type': 'application/json', 'stream-closed': 'true' } })).status).toBe(204);
    const reply = await http('GET', `/${other}/streams?details=true&limit=1`);
    expect(reply.status, reply.text()).toBe(200);
    const page = reply.json() as { streams: Array<Record<string, unknown>>; next: string | null };
    expect(page.next).toBe('json');
    expect(page.streams).toEqual([{ id: 'json', contentType: 'application/json', tail: '00000000000000000016', bytes: 16, messages: 2, closed: true, createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) }]);
    const rest = (await http('GET', `/${other}/streams?details=true&after=json`)).json() as { streams: Array<Record<string, unknown>> };
    expect(rest.streams).toMatchObject([{ id: 'text', contentType: 'text/plain', bytes: 5, messages: 1, closed: false }]);
    for (const bad of ['', '1', 'false', 'TRUE']) expectRefusal(await http('GET', `/${other}/streams?details=${bad}`), 'INVALID_QUERY');
  });
});

describe('ids', () => {
  let bucket: string;
  beforeAll(async () => {
    bucket = await newBucket('ids');
  });

  it('accepts bucket ids of 4 to 64 characters of a-z, 0-9, _ and -', async () => {
    for (const id of ['ab_-', `x${'0'.repeat(63)}`, unique('ok_id')]) {
      expect((await http('PUT', `/${id}`)).status).toBe(201);
    }
  });

  it('refuses other bucket ids with 400', async () => {
    for (const id of ['abc', 'a'.repeat(65), 'ABCD', 'ab.cd', 'ab%20cd', 'abc%2Fd', 'ab%00cd', 'abcd%C3%A9']) {
      expectRefusal(await http('PUT', `/${id}`), 'INVALID_ID');
      expectRefusal(await http('PUT', `/${id}/stream`, { headers: { 'content-type': 'text/plain' } }), 'INVALID_ID');
    }
  });

  it('accepts stream ids up to 122 bytes', async () => {
    for (const id of ['x'.repeat(122), 'é'.repeat(61), 'a.b', 'with space', '~!$&\'()*+,;=:@']) {
      const reply = await http('PUT', `/${bucket}/${encodeURIComponent(id)}`, { headers: { 'content-type': 'text/plain' } });
      expect(reply.status, `${id}: ${reply.text()}`).toBe(201);
    }
  });

  it('refuses stream ids that are too long or hold "/", "..", NUL or control characters', async () => {
    const bad = ['x'.repeat(123), encodeURIComponent('é'.repeat(62)), 'a%2Fb', 'a%2fb', '..', '%2E%2E', 'a..b', '.', '%00', 'a%00b', 'a%0Ab', 'a%7F', '%E0%A4%A'];
    for (const path of bad) {
      for (const method of ['PUT', 'GET', 'POST', 'HEAD', 'DELETE']) {
        const reply = await http(method, `/${bucket}/${path}`, method === 'POST' ? { headers: { 'content-type': 'text/plain' }, body: 'x' } : {});
        expect(reply.status, `${method} ${path}`).toBe(400);
        if (method !== 'HEAD') expectRefusal(reply, 'INVALID_ID');
      }
      // A /v1/stream name may be longer (1024 bytes): the two over-long ids are names there.
      if (path.length > 100) continue;
      const v1 = await http('PUT', `/v1/stream/${path}`, { headers: { 'content-type': 'text/plain' } });
      expectRefusal(v1, 'INVALID_ID');
    }
    expectRefusal(await http('PUT', `/v1/stream/${'x'.repeat(1025)}`, { headers: { 'content-type': 'text/plain' } }), 'INVALID_ID');
    expect((await list(bucket, '')).streams.every((s) => Buffer.byteLength(s) <= 122 && !s.includes('/'))).toBe(true);
  });

  it('refuses names holding zero-width, bidi-control or C1 characters with 400 INVALID_ID naming the character', async () => {
    const bucket = await newBucket('hid');
    const hidden = [0x200b, 0x200c, 0x200d, 0x2060, 0xfeff, 0x200e, 0x200f, 0x202a, 0x202e, 0x2066, 0x2069, 0x061c, 0x0080, 0x0085, 0x009f];
    const text = { 'content-type': 'text/plain' };
    for (const code of hidden) {
      const char = encodeURIComponent(String.fromCodePoint(code));
      const point = `U+${code.toString(16).toUpperCase().padStart(4, '0')}`;
      for (const path of [`/${bucket}/pay${char}roll`, `/${bucket}/key${char}/s`, `/${bucket}/key/s${char}`, `/v1/stream/a${char}b`, `/v1/stream/a/b${char}`]) {
        const reply = await http('PUT', path, { headers: text });
        expectRefusal(reply, 'INVALID_ID');
        expect((reply.json() as { message: string }).message, path).toContain(point);
      }
      expectRefusal(await http('PUT', `/abcd${char}e`), 'INVALID_ID');
    }
    // Printable characters beyond ASCII stay valid, right-to-left scripts included.
    for (const id of ['שלום', 'مرحبا', 'a\u00a0b', 'x\u00a9']) await putStream(bucket, id);
    expect((await list(bucket, '')).streams.some((s) => /[\u0080-\u009f\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff\u061c]/.test(s))).toBe(false);
  });

  it('keeps `streams` for the listing: a stream cannot take that name in a bucket', async () => {
    for (const method of ['PUT', 'POST', 'DELETE']) {
      const reply = await http(method, `/${bucket}/streams`, { headers: { 'content-type': 'text/plain' }, body: method === 'POST' ? 'x' : undefined });
      expectRefusal(reply, 'METHOD_NOT_ALLOWED');
    }
    expect((await list(bucket, '?prefix=streams')).streams).toEqual([]);
    expect((await http('GET', `/${bucket}`)).json()).toMatchObject({ streamCount: 5 });
  });
});
