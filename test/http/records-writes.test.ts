/**
 * JSON record coordinates, the writing side (Ursula's extensions, section 6): every JSON
 * message gets one ordinal, contiguous in commit order and never reused; create and
 * append answer the range they made, a producer's retry its original range,
 * Stream-Record-Match guards an append by the record tail, append-batch frames carry
 * their ranges, and a stream without records never advertises them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { frames } from '../helpers/http.js';
import { seededRandom } from '../helpers/seed.js';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { call, expectRefusal, offset, unique, type Reply } from './client.js';
import { extensionUrl } from '../../src/protocol/extensions.js';

const TOKEN = 'json-record-coordinates-v1';
const JSON_TYPE = { 'content-type': 'application/json' };

let server: RunningServer;
const http = (method: string, path: string, headers: Record<string, string> = {}, body?: string | Buffer) => call(server.url, method, path, { headers, body });

beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

const range = (reply: Reply) => [Number(reply.headers['stream-record-start']), Number(reply.headers['stream-record-next'])];
const tokens = (reply: Reply) => (reply.headers['stream-extensions'] ?? '').split(',').map((t) => t.trim()).filter((t) => t !== '');

async function jsonStream(body?: string): Promise<{ path: string; created: Reply }> {
  const path = `/v1/stream/${unique('rec')}`;
  const created = await http('PUT', path, JSON_TYPE, body);
  expect(created.status, created.text()).toBe(201);
  return { path, created };
}

async function append(path: string, body: string, headers: Record<string, string> = {}): Promise<Reply> {
  const reply = await http('POST', path, { ...JSON_TYPE, ...headers }, body);
  expect([200, 204], reply.text()).toContain(reply.status);
  return reply;
}

async function tails(path: string): Promise<{ first: number; next: number }> {
  const head = await http('HEAD', path);
  return { first: Number(head.headers['stream-record-first']), next: Number(head.headers['stream-record-next']) };
}

describe('create and append acknowledgements', () => {
  it('numbers messages from 0 in order: a value is one record, an array one per element, a nested array one', async () => {
    const { path, created } = await jsonStream('[{"a":0},{"a":1}]');
    expect(range(created)).toEqual([0, 2]);
    expect(tokens(created)).toEqual([TOKEN]);
    expect(range(await append(path, '{"single":true}'))).toEqual([2, 3]);
    expect(range(await append(path, '42'))).toEqual([3, 4]);
    expect(range(await append(path, '[[1,2,3]]'))).toEqual([4, 5]);
    const three = await append(path, '[1, "two", {"three":3}]');
    expect(range(three)).toEqual([5, 8]);
    expect(tokens(three)).toEqual([TOKEN]);
    expect(await tails(path)).toEqual({ first: 0, next: 8 });
  });

  it('an empty JSON create makes no records; a repeated create answers the record tail', async () => {
    const { path, created } = await jsonStream('[]');
    expect(range(created)).toEqual([0, 0]);
    await append(path, '[1,2,3]');
    const again = await http('PUT', path, JSON_TYPE);
    expect(again.status).toBe(200);
    expect(range(again)).toEqual([3, 3]);
    expect(tokens(again)).toEqual([TOKEN]);
  });

  it('a refused body takes no ordinal: invalid JSON, an empty array, a wrong type', async () => {
    const { path } = await jsonStream('[1,2]');
    expectRefusal(await http('POST', path, JSON_TYPE, '{"broken"'), 'INVALID_JSON');
    expectRefusal(await http('POST', path, JSON_TYPE, '[]'), 'EMPTY_JSON_ARRAY');
    const wrong = await http('POST', path, { 'content-type': 'text/plain' }, 'x');
    expectRefusal(wrong, 'CONTENT_TYPE_MISMATCH');
    expect(tokens(wrong)).toEqual([TOKEN]);
    expect(range(await append(path, '3'))).toEqual([2, 3]);
  });

  it('a close-only append makes no records and answers the record tail; so does closing it again', async () => {
    const { path } = await jsonStream('[1,2]');
    const closed = await http('POST', path, { 'stream-closed': 'true' });
    expect(closed.status).toBe(204);
    expect(range(closed)).toEqual([2, 2]);
    const again = await http('POST', path, { 'stream-closed': 'true' });
    expect(again.status).toBe(204);
    expect(range(again)).toEqual([2, 2]);
    expect(tokens(again)).toEqual([TOKEN]);
  });

  it('a stream of another type has no record headers and no token, on any answer', async () => {
    for (const type of ['text/plain', 'application/octet-stream', 'application/x-ndjson']) {
      const path = `/v1/stream/${unique('plain')}`;
      const created = await http('PUT', path, { 'content-type': type }, 'abc');
      const appended = await http('POST', path, { 'content-type': type }, 'def');
      const head = await http('HEAD', path);
      const read = await http('GET', `${path}?offset=-1`);
      for (const reply of [created, appended, head, read]) {
        expect(tokens(reply), type).toEqual([]);
        expect(Object.keys(reply.headers).filter((h) => h.startsWith('stream-record-')), type).toEqual([]);
      }
    }
  });

  it('a JSON type with parameters numbers records too', async () => {
    const path = `/v1/stream/${unique('charset')}`;
    const created = await http('PUT', path, { 'content-type': 'application/json; charset=utf-8' }, '[1,2]');
    expect(range(created)).toEqual([0, 2]);
    expect(tokens(created)).toEqual([TOKEN]);
  });

  it('concurrent appends get disjoint ranges in commit order, covering [0, N) without a gap', async () => {
    const rng = seededRandom();
    const { path } = await jsonStream();
    const sizes = Array.from({ length: 40 }, () => rng.int(1, 6));
    const replies = await Promise.all(sizes.map((n, i) => append(path, JSON.stringify(Array.from({ length: n }, (_, k) => ({ w: i, k }))))));
    const ranges = replies.map(range).map(([start, next], i) => ({ start: start!, next: next!, writer: i }));
    for (const r of ranges) expect(r.next - r.start).toBe(sizes[r.writer]);
    ranges.sort((a, b) => a.start - b.start);
    let expected = 0;
    for (const r of ranges) {
      expect(r.start).toBe(expected);
      expected = r.next;
    }
    expect((await tails(path)).next).toBe(expected);
    // Commit order: each writer's messages sit at its own ordinals.
    const read = await http('GET', `${path}?record=0`);
    const values = read.text().trim().split('\n').map((l) => JSON.parse(l) as { w: number; k: number });
    for (const r of ranges) for (let o = r.start; o < r.next; o++) expect(values[o]).toEqual({ w: r.writer, k: o - r.start });
  });
});

describe('producer retries', () => {
  const producer = (seq: number) => ({ 'producer-id': 'p1', 'producer-epoch': '0', 'producer-seq': String(seq) });

  it('answers a retry of the newest write with its original range, and an older one without a range', async () => {
    const { path } = await jsonStream('[0]');
    const first = await append(path, '[1,2]', producer(0));
    expect(range(first)).toEqual([1, 3]);
    const second = await append(path, '[3,4,5]', producer(1));
    expect(range(second)).toEqual([3, 6]);
    await append(path, '6');
    const retry = await append(path, '[3,4,5]', producer(1));
    expect(retry.status).toBe(204);
    expect(range(retry)).toEqual([3, 6]);
    expect(retry.headers['stream-next-offset']).toBe(second.headers['stream-next-offset']);
    const old = await append(path, '[1,2]', producer(0));
    expect(old.status).toBe(204);
    expect(old.headers['stream-record-start']).toBeUndefined();
    expect(old.headers['stream-next-offset']).toBeUndefined();
    expect(old.headers['producer-seq']).toBeDefined();
    expect(tokens(old)).toEqual([TOKEN]);
    expect((await tails(path)).next).toBe(7);
  });
});

describe('Stream-Record-Match', () => {
  it('appends when it names the record tail; otherwise 412 with both tails, and nothing is appended', async () => {
    const { path } = await jsonStream('[1,2,3]');
    expect(range(await append(path, '4', { 'stream-record-match': '3' }))).toEqual([3, 4]);
    const stale = await http('POST', path, { ...JSON_TYPE, 'stream-record-match': '3' }, '5');
    expectRefusal(stale, 'RECORD_MATCH_FAILED');
    expect(stale.status).toBe(412);
    expect(stale.headers['stream-record-next']).toBe('4');
    expect(stale.headers['stream-next-offset']).toBe(offset(8));
    expect(tokens(stale)).toEqual([TOKEN]);
    expect(await tails(path)).toEqual({ first: 0, next: 4 });
  });

  it('composes with Stream-Seq: both must hold', async () => {
    const { path } = await jsonStream('[1]');
    await append(path, '2', { 'stream-seq': 'b', 'stream-record-match': '1' });
    expectRefusal(await http('POST', path, { ...JSON_TYPE, 'stream-seq': 'c', 'stream-record-match': '1' }, '3'), 'RECORD_MATCH_FAILED');
    expectRefusal(await http('POST', path, { ...JSON_TYPE, 'stream-seq': 'a', 'stream-record-match': '2' }, '3'), 'STREAM_SEQ_CONFLICT');
    expect(range(await append(path, '3', { 'stream-seq': 'c', 'stream-record-match': '2' }))).toEqual([2, 3]);
  });

  it("composes with a producer: a retry of an applied write is its duplicate, whatever tail it expected", async () => {
    const { path } = await jsonStream('[1]');
    const headers = { 'producer-id': 'pm', 'producer-epoch': '0', 'producer-seq': '0', 'stream-record-match': '1' };
    const first = await append(path, '[2,3]', headers);
    expect(range(first)).toEqual([1, 3]);
    const retry = await append(path, '[2,3]', headers);
    expect(retry.status).toBe(204);
    expect(range(retry)).toEqual([1, 3]);
    const next = await http('POST', path, { ...JSON_TYPE, ...headers, 'producer-seq': '1' }, '4');
    expectRefusal(next, 'RECORD_MATCH_FAILED');
    expect(next.headers['stream-record-next']).toBe('3');
  });

  it('is refused on a stream without records, and when it is not an unsigned integer', async () => {
    const path = `/v1/stream/${unique('text')}`;
    await http('PUT', path, { 'content-type': 'text/plain' });
    expectRefusal(await http('POST', path, { 'content-type': 'text/plain', 'stream-record-match': '0' }, 'x'), 'RECORDS_NOT_ACTIVE');
    const { path: json } = await jsonStream('[1]');
    for (const bad of ['-1', '01', '1.0', 'one', ' ']) {
      expectRefusal(await http('POST', json, { ...JSON_TYPE, 'stream-record-match': bad }, '2'), 'INVALID_HEADER');
    }
    expect((await tails(json)).next).toBe(1);
  });
});

describe('append-batch', () => {
  it('gives each frame its own range; a refused frame takes no ordinal', async () => {
    const { path } = await jsonStream('[0]');
    const reply = await http('POST', extensionUrl(path, 'append-batch'), JSON_TYPE, frames('[1,2]', '{"broken"', '3', '[4,5,6]'));
    expect(reply.status).toBe(200);
    expect(tokens(reply)).toEqual([TOKEN]);
    const acks = reply.json() as Array<Record<string, unknown>>;
    expect(acks.map((a) => [a.stream_record_start, a.stream_record_next])).toEqual([
      [1, 3],
      [undefined, undefined],
      [3, 4],
      [4, 7],
    ]);
    expect((await tails(path)).next).toBe(7);
  });

  it('refuses Stream-Record-Match, which needs a plain append', async () => {
    const { path } = await jsonStream('[0]');
    expectRefusal(await http('POST', extensionUrl(path, 'append-batch'), { ...JSON_TYPE, 'stream-record-match': '1' }, frames('1')), 'BATCH_HEADERS_NOT_ALLOWED');
  });
});
