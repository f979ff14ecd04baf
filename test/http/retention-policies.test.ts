/**
 * Retention policies over real HTTP (SQLite, and PostgreSQL in the postgres project): a
 * stream's own policy on create (Stream-Retention), a bucket's default (PATCH /{bucket}),
 * trimming after each append with reads below the earliest offset answered 410, the
 * policy shown by HEAD and GET /{bucket}, and bootstrap of a policy-trimmed stream.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { bootstrapParts, call, errorCode, get, head, offset, post, put } from '../helpers/http.js';
import { extensionUrl } from '../../src/protocol/extensions.js';
import { RillClient } from '../../src/client/index.js';
import { TestClock } from '../helpers/clock.js';

let server: RunningServer;
let n = 0;
const clock = new TestClock();
const JSON_TYPE = { 'content-type': 'application/json' };
const bucketUrl = (bucket: string) => `${server.url}/${bucket}`;
const unique = (name: string) => `${name}-${Date.now()}-${n++}`;
const patch = (bucket: string, body: unknown) => call(bucketUrl(bucket), { method: 'PATCH', body: JSON.stringify(body), headers: JSON_TYPE });

beforeAll(async () => {
  server = await startServer({ clock });
  expect((await put(bucketUrl('keep'))).status).toBe(201);
});

afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

describe("a stream's own policy", () => {
  test('keeps the newest messages; a read below the earliest offset answers 410, one from it the retained messages', async () => {
    const url = `${bucketUrl('keep')}/${unique('own')}`;
    const created = await put(url, undefined, { ...JSON_TYPE, 'stream-retention': '{"maxMessages": 2}' });
    expect(created.status).toBe(201);
    for (const n of [1, 2, 3]) expect((await post(url, `{"n":${n}}`, JSON_TYPE)).status).toBe(204);
    const described = await head(url);
    expect(described.headers.get('stream-retention')).toBe('{"maxBytes":null,"maxMessages":2,"maxAgeMs":null}');
    expect(described.headers.get('stream-earliest-offset')).toBe(offset(8));
    expect(described.headers.get('stream-record-first')).toBe('1');
    expect(errorCode(await get(`${url}?offset=-1`))).toBe('OFFSET_TRIMMED');
    expect(errorCode(await get(`${url}?offset=${offset(0)}`))).toBe('OFFSET_TRIMMED');
    const read = await get(`${url}?offset=${offset(8)}`);
    expect(read.status).toBe(200);
    expect(read.json).toEqual([{ n: 2 }, { n: 3 }]);
  });

  test('a byte limit on a text stream cuts at an append boundary, never inside the bytes it keeps', async () => {
    const url = `${bucketUrl('keep')}/${unique('bytes')}`;
    expect((await put(url, 'aaaa', { 'content-type': 'text/plain', 'stream-retention': '{"maxBytes": 6}' })).status).toBe(201);
    expect((await post(url, 'bbb', { 'content-type': 'text/plain' })).status).toBe(204);
    expect((await head(url)).headers.get('stream-earliest-offset')).toBe(offset(4));
    expect((await post(url, 'cc', { 'content-type': 'text/plain' })).status).toBe(204);
    const read = await get(`${url}?offset=${offset(4)}`);
    expect(read.text).toBe('bbbcc');
  });

  test('a malformed policy is refused with 400; another policy on a repeated create with 409, the same one is idempotent', async () => {
    const url = `${bucketUrl('keep')}/${unique('bad')}`;
    for (const value of ['{"maxBytes": 0}', '{"maxAgeMs": 0}', 'not json', '{"maxMessages": 1.5}', '[1]']) {
      const refused = await put(url, undefined, { 'stream-retention': value });
      expect([value, refused.status, errorCode(refused)]).toEqual([value, 400, 'INVALID_RETENTION_POLICY']);
    }
    expect((await put(url, undefined, { 'stream-retention': '{"maxBytes": 100}' })).status).toBe(201);
    expect((await put(url, undefined, { 'stream-retention': '{"maxBytes": 100}' })).status).toBe(200);
    expect(errorCode(await put(url, undefined, { 'stream-retention': '{"maxBytes": 101}' }))).toBe('STREAM_CONFIG_CONFLICT');
    expect(errorCode(await put(url))).toBe('STREAM_CONFIG_CONFLICT');
  });

  test('bootstrap of a policy-trimmed stream starts at the earliest retained offset; a snapshot the policy passed is withdrawn', async () => {
    const url = `${bucketUrl('keep')}/${unique('boot')}`;
    expect((await put(url, '[{"n":1},{"n":2}]', { ...JSON_TYPE, 'stream-retention': '{"maxMessages": 2}' })).status).toBe(201);
    expect((await put(extensionUrl(url, `snapshot/${offset(8)}`), 'STATE', { 'content-type': 'text/plain' })).status).toBe(204);
    expect((await post(url, '[{"n":3},{"n":4}]', JSON_TYPE)).status).toBe(204);
    expect(errorCode(await get(extensionUrl(url, 'snapshot')))).toBe('SNAPSHOT_NOT_FOUND');
    const reply = await get(extensionUrl(url, 'bootstrap'));
    expect(reply.status).toBe(200);
    expect(reply.headers.get('stream-snapshot-offset')).toBe('-1');
    const parts = bootstrapParts(reply);
    expect(parts[0]!.body.length).toBe(0);
    expect(parts.slice(1).map((p) => p.body.toString())).toEqual(['{"n":3}', '{"n":4}']);
  });
});

describe('an age limit', () => {
  test('an append trims what was written longer ago than the limit, never what is younger', async () => {
    const url = `${bucketUrl('keep')}/${unique('age')}`;
    expect((await put(url, undefined, { 'content-type': 'text/plain', 'stream-retention': '{"maxAgeMs": 60000}' })).status).toBe(201);
    expect((await post(url, 'old', { 'content-type': 'text/plain' })).status).toBe(204);
    clock.advance(30_000);
    expect((await post(url, 'mid', { 'content-type': 'text/plain' })).status).toBe(204);
    clock.advance(31_000);
    expect((await post(url, 'new', { 'content-type': 'text/plain' })).status).toBe(204);
    expect((await head(url)).headers.get('stream-earliest-offset')).toBe(offset(3));
    expect((await get(`${url}?offset=${offset(3)}`)).text).toBe('midnew');
    expect(errorCode(await get(`${url}?offset=${offset(0)}`))).toBe('OFFSET_TRIMMED');
  });
});

describe('the client', () => {
  test('creates a stream with a policy and reads it back from HEAD', async () => {
    const stream = new RillClient({ url: server.url }).stream(`keep/${unique('client')}`);
    await stream.create({ contentType: 'application/json', retention: { maxMessages: 2 } });
    await stream.appendMessages([1, 2, 3]);
    const info = await stream.head();
    expect(info.retention).toEqual({ maxBytes: null, maxMessages: 2, maxAgeMs: null });
    expect(info.earliestOffset).toBe(offset(2));
    expect(info.recordFirst).toBe(1);
  });
});

describe("a bucket's default policy", () => {
  test('applies to its streams without a policy of their own from their next append, is shown by GET /{bucket}, and can be removed', async () => {
    const bucket = unique('dflt').slice(0, 60);
    expect((await put(bucketUrl(bucket))).status).toBe(201);
    const plain = `${bucketUrl(bucket)}/plain`;
    const own = `${bucketUrl(bucket)}/own`;
    expect((await put(plain, undefined, JSON_TYPE)).status).toBe(201);
    expect((await put(own, undefined, { ...JSON_TYPE, 'stream-retention': '{"maxMessages": 3}' })).status).toBe(201);
    const set = await patch(bucket, { retention: { maxMessages: 1 } });
    expect(set.status).toBe(200);
    expect(set.json).toMatchObject({ retention: { maxBytes: null, maxMessages: 1 } });
    expect((await get(bucketUrl(bucket))).json).toMatchObject({ retention: { maxMessages: 1 } });
    for (const url of [plain, own]) expect((await post(url, '[1,2,3,4]', JSON_TYPE)).status).toBe(204);
    expect((await head(plain)).headers.get('stream-record-first')).toBe('3');
    expect((await head(own)).headers.get('stream-record-first')).toBe('1');

    expect((await patch(bucket, { retention: null })).json).toMatchObject({ retention: null });
    expect((await post(plain, '[5,6]', JSON_TYPE)).status).toBe(204);
    expect((await head(plain)).headers.get('stream-record-first')).toBe('3');
  });

  test('a malformed default is refused with 400 INVALID_BUCKET_SETTINGS', async () => {
    for (const retention of [{ maxBytes: -1 }, { maxCount: 3 }, 'big']) {
      const refused = await patch('keep', { retention });
      expect([refused.status, errorCode(refused)]).toEqual([400, 'INVALID_BUCKET_SETTINGS']);
    }
  });
});
