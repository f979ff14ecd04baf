/**
 * JSON-mode streams over real HTTP: a POSTed array is one message per element, reads
 * answer a JSON array (or NDJSON on `Accept: application/x-ndjson`), a read never ends
 * inside a message even under `max_bytes`, and every token keeps its digits.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { call, expectRefusal, offset, unique, type Reply } from './client.js';

let server: RunningServer;
const http = (method: string, path: string, options = {}) => call(server.url, method, path, options);
const JSON_HEADERS = { 'content-type': 'application/json' };
const NDJSON = { accept: 'application/x-ndjson' };

beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

async function jsonStream(body?: string): Promise<string> {
  const path = `/v1/stream/${unique('json')}`;
  const reply = await http('PUT', path, { headers: JSON_HEADERS, body });
  expect(reply.status, reply.text()).toBe(201);
  return path;
}

async function append(path: string, body: string): Promise<Reply> {
  const reply = await http('POST', path, { headers: JSON_HEADERS, body });
  expect(reply.status, reply.text()).toBe(204);
  return reply;
}

describe('JSON reads', () => {
  it('answers a JSON array of the messages, one per element of each POSTed array', async () => {
    const path = await jsonStream();
    await append(path, '[{"a":1},{"b":[1,2]}]');
    await append(path, ' { "c" : "x  y" } ');
    await append(path, '[[1,2],[3]]');
    const read = await http('GET', `${path}?offset=-1`);
    expect(read.status).toBe(200);
    expect(read.headers['content-type']).toBe('application/json');
    expect(read.json()).toEqual([{ a: 1 }, { b: [1, 2] }, { c: 'x  y' }, [1, 2], [3]]);
  });

  it('answers one message per line with Accept: application/x-ndjson', async () => {
    const path = await jsonStream();
    await append(path, '[{"a":1},"two",3]');
    await append(path, '{ "d" : [ true , null ] }');
    const read = await http('GET', `${path}?offset=-1`, { headers: NDJSON });
    expect(read.status).toBe(200);
    expect(read.headers['content-type']).toBe('application/x-ndjson');
    expect(read.text()).toBe('{"a":1}\n"two"\n3\n{"d":[true,null]}\n');
  });

  it('keeps every digit of numbers JavaScript cannot hold', async () => {
    const tokens = ['12345678901234567890123456789', '-0.0', '1.000000000000000000001', '1E+400', '9007199254740993'];
    const path = await jsonStream();
    await append(path, `[${tokens.join(', ')}]`);
    await append(path, '{"id":12345678901234567890}');
    const ndjson = await http('GET', `${path}?offset=-1`, { headers: NDJSON });
    expect(ndjson.text()).toBe([...tokens, '{"id":12345678901234567890}'].map((t) => `${t}\n`).join(''));
    const array = await http('GET', `${path}?offset=-1`);
    expect(array.text()).toBe(`[${[...tokens, '{"id":12345678901234567890}'].join(',')}]`);
  });

  it('refuses [] on POST but creates an empty stream from [] on PUT', async () => {
    const path = await jsonStream('[]');
    const empty = await http('GET', `${path}?offset=-1`);
    expect([empty.status, empty.text(), empty.headers['stream-next-offset']]).toEqual([200, '[]', offset(0)]);
    expectRefusal(await http('POST', path, { headers: JSON_HEADERS, body: '[]' }), 'EMPTY_JSON_ARRAY');
    expectRefusal(await http('POST', path, { headers: JSON_HEADERS, body: ' [ ] ' }), 'EMPTY_JSON_ARRAY');
    expect((await http('HEAD', path)).headers['stream-next-offset']).toBe(offset(0));
    const seeded = await jsonStream('[{"i":0},{"i":1}]');
    expect((await http('GET', `${seeded}?offset=-1`)).json()).toEqual([{ i: 0 }, { i: 1 }]);
  });

  it('refuses an offset inside a message and reads from a message boundary', async () => {
    const path = await jsonStream();
    await append(path, '[{"n":1},{"n":22}]');
    const first = '{"n":1}\n'.length;
    for (const inside of [1, first - 1, first + 3]) {
      expectRefusal(await http('GET', `${path}?offset=${offset(inside)}`), 'MISALIGNED_OFFSET');
    }
    const rest = await http('GET', `${path}?offset=${offset(first)}`);
    expect([rest.status, rest.text()]).toEqual([200, '[{"n":22}]']);
    const atTail = await http('GET', `${path}?offset=${offset(first + '{"n":22}\n'.length)}`);
    expect([atTail.status, atTail.text(), atTail.headers['stream-up-to-date']]).toEqual([200, '[]', 'true']);
  });
});

/** Messages of varied sizes, some larger than the read limit used below. */
function messages(count: number): string[] {
  return Array.from({ length: count }, (_, i) => JSON.stringify({ i, pad: 'p'.repeat((i * 37) % 90) }));
}

/** Reads the whole stream `maxBytes` at a time, checking each response ends on a message. */
async function readInPieces(path: string, maxBytes: number, accept: Record<string, string>): Promise<Reply[]> {
  const replies: Reply[] = [];
  let next = offset(0);
  for (let guard = 0; guard < 1_000; guard++) {
    const reply = await http('GET', `${path}?offset=${next}&max_bytes=${maxBytes}`, { headers: accept });
    expect(reply.status).toBe(200);
    replies.push(reply);
    if (reply.headers['stream-up-to-date'] === 'true') return replies;
    next = reply.headers['stream-next-offset']!;
  }
  throw new Error('read did not reach the tail');
}

describe('JSON reads with max_bytes', () => {
  const all = messages(60);
  const maxBytes = 64;
  let path: string;

  beforeAll(async () => {
    path = await jsonStream();
    for (let i = 0; i < all.length; i += 7) await append(path, `[${all.slice(i, i + 7).join(',')}]`);
  });

  it('never ends a response inside a message, and a message above max_bytes comes whole and alone', async () => {
    const replies = await readInPieces(path, maxBytes, NDJSON);
    let position = 0;
    const seen: string[] = [];
    for (const reply of replies) {
      const text = reply.text();
      expect(text.endsWith('\n')).toBe(true);
      const lines = text.slice(0, -1).split('\n');
      if (Buffer.byteLength(text) > maxBytes) expect(lines).toHaveLength(1);
      position += Buffer.byteLength(text);
      expect(reply.headers['stream-next-offset']).toBe(offset(position));
      seen.push(...lines);
    }
    expect(seen).toEqual(all);
    expect(replies.some((r) => r.body.length > maxBytes)).toBe(true);
    expect(replies.length).toBeGreaterThan(10);
  });

  it('answers each piece as a JSON array of whole messages', async () => {
    const replies = await readInPieces(path, maxBytes, {});
    const seen = replies.flatMap((r) => {
      expect(r.headers['content-type']).toBe('application/json');
      return r.json() as unknown[];
    });
    expect(seen).toEqual(all.map((m) => JSON.parse(m)));
  });
});
