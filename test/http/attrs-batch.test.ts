/**
 * Stream attributes and batched appends over real HTTP, on both URL families.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { errorCode, frames, get, head, offset, post, put } from '../helpers/http.js';
import { extensionUrl } from '../../src/protocol/extensions.js';

let server: RunningServer;
let n = 0;
const MAX_BODY = 64 * 1024;

beforeAll(async () => {
  server = await startServer({ args: ['--max-body', String(MAX_BODY)] });
  expect((await put(`${server.url}/attrdocs`)).status).toBe(201);
});

afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

const urlFor = (family: string) =>
  family === 'v1' ? `${server.url}/v1/stream/ab-${Date.now()}-${n++}` : `${server.url}/attrdocs/ab-${Date.now()}-${n++}`;
const json = { 'content-type': 'application/json' };

describe.each(['v1', 'bucket'])('attributes (%s family)', (family) => {
  test('start empty, are replaced whole, keep only title and metadata, and clear with {}', async () => {
    const url = urlFor(family);
    await put(url, undefined, { 'content-type': 'text/plain' });
    const empty = await get(extensionUrl(url, 'attrs'));
    expect(empty.status).toBe(200);
    expect(empty.json).toEqual({});
    expect(empty.headers.get('stream-incarnation')).toBeTruthy();
    const set = await put(extensionUrl(url, 'attrs'), JSON.stringify({ title: 'Run 42', metadata: { agent: { id: 'a1', v: 2 } }, color: 'red' }), json);
    expect(set.status).toBe(204);
    expect((await get(extensionUrl(url, 'attrs'))).json).toEqual({ title: 'Run 42', metadata: { agent: { id: 'a1', v: 2 } } });
    await put(extensionUrl(url, 'attrs'), JSON.stringify({ title: 'Renamed' }), json);
    expect((await get(extensionUrl(url, 'attrs'))).json).toEqual({ title: 'Renamed' });
    await put(extensionUrl(url, 'attrs'), '{}', json);
    expect((await get(extensionUrl(url, 'attrs'))).json).toEqual({});
  });

  test('changed later, leave the original create idempotent', async () => {
    const url = urlFor(family);
    const create = { 'content-type': 'text/plain', 'stream-ttl': '3600' };
    expect((await put(url, undefined, create)).status).toBe(201);
    await put(extensionUrl(url, 'attrs'), JSON.stringify({ title: 'Later' }), json);
    expect((await put(url, undefined, create)).status).toBe(200);
    expect((await get(extensionUrl(url, 'attrs'))).json).toEqual({ title: 'Later' });
    const other = await put(url, undefined, { 'content-type': 'text/csv' });
    expect(other.status).toBe(409);
    expect((other.json as { message: string }).message).toBe('the stream already exists with another content type (text/plain)');
  });

  test('are refused when malformed, mistyped or over 16 KiB', async () => {
    const url = urlFor(family);
    await put(url, undefined, { 'content-type': 'text/plain' });
    for (const body of ['[]', '"title"', '{"title":3}', '{"metadata":[1]}', '{not json']) {
      const reply = await put(extensionUrl(url, 'attrs'), body, json);
      expect(reply.status, body).toBe(400);
      expect(errorCode(reply)).toBe('INVALID_ATTRS');
    }
    expect((await put(extensionUrl(url, 'attrs'), '{"title":"x"}', { 'content-type': 'text/plain' })).status).toBe(400);
    const big = await put(extensionUrl(url, 'attrs'), JSON.stringify({ metadata: { blob: 'x'.repeat(17 * 1024) } }), json);
    expect(big.status).toBe(413);
    expect((await get(extensionUrl(url, 'attrs'))).json).toEqual({});
  });

  test('may change after closure and never move offsets or change reads', async () => {
    const url = urlFor(family);
    await put(url, 'data', { 'content-type': 'text/plain', 'stream-closed': 'true' });
    const before = await get(`${url}?offset=-1`);
    expect((await put(extensionUrl(url, 'attrs'), '{"title":"closed but labelled"}', json)).status).toBe(204);
    const after = await get(`${url}?offset=-1`);
    expect(after.text).toBe(before.text);
    expect(after.headers.get('etag')).toBe(before.headers.get('etag'));
    expect((await head(url)).headers.get('stream-next-offset')).toBe(offset(4));
  });

  test('Stream-Attrs on create sets the first attributes; repeating the create never conflicts on them', async () => {
    const url = urlFor(family);
    const attrs = JSON.stringify({ title: 'Été', metadata: { b: 1, a: 2 } });
    const headers = { 'content-type': 'text/plain', 'stream-attrs': Buffer.from(attrs).toString('latin1') };
    expect((await put(url, undefined, headers)).status).toBe(201);
    expect((await get(extensionUrl(url, 'attrs'))).json).toEqual({ title: 'Été', metadata: { a: 2, b: 1 } });
    const reordered = Buffer.from(JSON.stringify({ metadata: { a: 2, b: 1 }, title: 'Été' })).toString('latin1');
    expect((await put(url, undefined, { 'content-type': 'text/plain', 'stream-attrs': reordered })).status).toBe(200);
    // Attributes are labels PUT attrs changes at will, not configuration: a create of the
    // existing stream answers 200 whatever attributes it names, and changes none of them.
    expect((await put(url, undefined, { 'content-type': 'text/plain', 'stream-attrs': '{"title":"other"}' })).status).toBe(200);
    expect((await put(url, undefined, { 'content-type': 'text/plain' })).status).toBe(200);
    expect((await get(extensionUrl(url, 'attrs'))).json).toEqual({ title: 'Été', metadata: { a: 2, b: 1 } });
    const plain = urlFor(family);
    await put(plain, undefined, { 'content-type': 'text/plain' });
    expect((await put(plain, undefined, { 'content-type': 'text/plain', 'stream-attrs': '{}' })).status).toBe(200);
  });

  test('answer 404 for a missing stream and 412 for another incarnation', async () => {
    const url = urlFor(family);
    expect((await get(extensionUrl(url, 'attrs'))).status).toBe(404);
    expect((await put(extensionUrl(url, 'attrs'), '{}', json)).status).toBe(404);
    await put(url, undefined, { 'content-type': 'text/plain' });
    const stale = await put(extensionUrl(url, 'attrs'), '{"title":"x"}', { ...json, 'stream-incarnation': 'old' });
    expect(stale.status).toBe(412);
    expect((await get(extensionUrl(url, 'attrs'))).json).toEqual({});
  });
});

describe.each(['v1', 'bucket'])('append-batch (%s family)', (family) => {
  test('each frame is its own append, acknowledged in order, at the offsets separate POSTs would get', async () => {
    const url = urlFor(family);
    await put(url, undefined, { 'content-type': 'text/plain' });
    const reply = await post(extensionUrl(url, 'append-batch'), frames('alpha', 'be', 'gamma!'), { 'content-type': 'text/plain' });
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual([
      { status: 204, streamOffset: offset(0), streamNextOffset: offset(5) },
      { status: 204, streamOffset: offset(5), streamNextOffset: offset(7) },
      { status: 204, streamOffset: offset(7), streamNextOffset: offset(13) },
    ]);
    expect((await get(url)).text).toBe('alphabegamma!');
    expect(reply.headers.get('stream-incarnation')).toBe((await get(url)).headers.get('stream-incarnation'));
    const boot = await get(extensionUrl(url, 'bootstrap'));
    expect(boot.status).toBe(200);
  });

  test('JSON frames are flattened and validated one by one; a bad frame fails alone', async () => {
    const url = urlFor(family);
    await put(url, undefined, json);
    const reply = await post(extensionUrl(url, 'append-batch'), frames('[{"a":1},{"a":2}]', '{"broken"', '[]', '{"a":3}'), json);
    expect(reply.status).toBe(200);
    const acks = reply.json as Array<Record<string, unknown>>;
    expect(acks.map((a) => a.status)).toEqual([204, 400, 400, 204]);
    expect(acks[1]!.code).toBe('INVALID_JSON');
    expect(acks[2]!.code).toBe('EMPTY_JSON_ARRAY');
    expect((await get(url)).json).toEqual([{ a: 1 }, { a: 2 }, { a: 3 }]);
  });

  test("a batch not of the stream's content type is refused whole; closure is reported per frame", async () => {
    const url = urlFor(family);
    await put(url, 'x', { 'content-type': 'text/plain' });
    // curl --data-binary without -H sends application/x-www-form-urlencoded.
    for (const type of ['text/csv', 'application/x-www-form-urlencoded']) {
      const mismatch = await post(extensionUrl(url, 'append-batch'), frames('a'), { 'content-type': type });
      expect(mismatch.status).toBe(409);
      expect(errorCode(mismatch)).toBe('CONTENT_TYPE_MISMATCH');
      expect((mismatch.json as { message: string }).message).toContain("the stream's Content-Type (text/plain)");
    }
    await post(url, undefined, { 'stream-closed': 'true' });
    const closed = await post(extensionUrl(url, 'append-batch'), frames('a', 'b'), { 'content-type': 'text/plain' });
    for (const ack of closed.json as Array<Record<string, unknown>>) {
      expect(ack).toMatchObject({ status: 409, code: 'STREAM_CLOSED', streamClosed: true, streamNextOffset: offset(1) });
    }
  });

  test('malformed framing, oversized batches and per-append headers fail the whole request', async () => {
    const url = urlFor(family);
    await put(url, undefined, { 'content-type': 'text/plain' });
    const text = { 'content-type': 'text/plain' };
    const zero = await post(extensionUrl(url, 'append-batch'), Buffer.from([0, 0, 0, 0]), text);
    expect(zero.status).toBe(400);
    const truncated = await post(extensionUrl(url, 'append-batch'), Buffer.concat([frames('ok'), Buffer.from([0, 0, 0, 9, 1])]), text);
    expect(truncated.status).toBe(400);
    expect(errorCode(truncated)).toBe('INVALID_BATCH');
    const tooMany = await post(extensionUrl(url, 'append-batch'), frames(...Array.from({ length: 513 }, () => 'x')), text);
    expect(tooMany.status).toBe(413);
    const tooBig = await post(extensionUrl(url, 'append-batch'), frames(Buffer.alloc(MAX_BODY)), text);
    expect(tooBig.status).toBe(413);
    const perAppendHeaders: Array<Record<string, string>> = [
      { 'producer-id': 'p', 'producer-epoch': '0', 'producer-seq': '0' },
      { 'stream-seq': '001' },
      { 'stream-closed': 'true' },
    ];
    for (const extra of perAppendHeaders) {
      const refused = await post(extensionUrl(url, 'append-batch'), frames('x'), { ...text, ...extra });
      expect(refused.status).toBe(400);
      expect(errorCode(refused)).toBe('BATCH_HEADERS_NOT_ALLOWED');
    }
    const untyped = await post(extensionUrl(url, 'append-batch'), frames('x'));
    expect(untyped.status).toBe(400);
    expect((await get(url)).text).toBe('');
    const missing = await post(`${url}-missing/append-batch`, frames('x'), text);
    expect(missing.status).toBe(404);
    expect(errorCode(missing)).toBe('STREAM_NOT_FOUND');
  });
});
