/**
 * Group transactions over HTTP (Ursula's `group-append-transaction-v1`,
 * `POST /{bucket}/{affinity_key}/$transaction`): every operation commits or none does,
 * whatever refuses one; the answer is the acknowledgements in request order, or the
 * refusal a plain append would get with the index of its operation; a producer retry
 * applies nothing; readers see the operations together; both extension tokens are
 * advertised on every answer. Expected figures are counted from what the test wrote.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_STATUS, type ErrorCode } from '../../src/protocol/errors.js';
import { seededRandom } from '../helpers/seed.js';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { call, offset, rawExchange, unique, type Reply } from './client.js';

const JSON_TYPE = { 'content-type': 'application/json' };
const TOKENS = ['path-affinity-v1', 'group-append-transaction-v1'];
const MAX_BODY_BYTES = 256 * 1024;

let server: RunningServer;
let bucket: string;
const http = (method: string, path: string, headers: Record<string, string> = {}, body?: string | Buffer) => call(server.url, method, path, { headers, body });

beforeAll(async () => {
  server = await startServer({ args: ['--max-body', String(MAX_BODY_BYTES)] });
  bucket = unique('txb').toLowerCase().slice(0, 60);
  expect((await http('PUT', `/${bucket}`)).status).toBe(201);
});
afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

interface Operation {
  stream: string;
  content_type?: string;
  payload_base64?: string;
  close_after?: boolean;
  stream_seq?: string;
  producer?: { producer_id: string; producer_epoch: number; producer_seq: number };
  record_match?: number;
  [member: string]: unknown;
}

const b64 = (text: string) => Buffer.from(text).toString('base64');
const jsonOp = (stream: string, value: unknown, extra: Partial<Operation> = {}): Operation => ({
  stream,
  content_type: 'application/json',
  payload_base64: b64(JSON.stringify(value)),
  ...extra,
});
/** The values of an NDJSON answer (a record-aware read). */
const ndjson = (reply: Reply) => reply.text().split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as unknown);
const tokens = (reply: Reply) => (reply.headers['stream-extensions'] ?? '').split(',').map((t) => t.trim()).filter((t) => t !== '');

/** A fresh affinity key with JSON streams `journal` and `queue` and a text stream `notes`, each holding one message. */
async function group(): Promise<{ key: string; path: (stream: string) => string }> {
  const key = unique('run');
  const path = (stream: string) => `/${bucket}/${key}/${stream}`;
  for (const stream of ['journal', 'queue']) expect((await http('PUT', path(stream), JSON_TYPE, `{"first":"${stream}"}`)).status).toBe(201);
  expect((await http('PUT', path('notes'), { 'content-type': 'text/plain' }, 'n0\n')).status).toBe(201);
  return { key, path };
}

function transact(key: string, body: unknown, headers: Record<string, string> = JSON_TYPE): Promise<Reply> {
  return http('POST', `/${bucket}/${key}/$transaction`, headers, typeof body === 'string' ? body : JSON.stringify(body));
}

/** Asserts a refusal of the endpoint: the code's status, both tokens, and the operation index when one is named. */
function expectRefused(reply: Reply, code: ErrorCode, operation: number | null): void {
  const context = `${reply.status} ${reply.text()}`;
  expect(reply.status, context).toBe(ERROR_STATUS[code]);
  const body = reply.json() as Record<string, unknown>;
  expect(body.code, context).toBe(code);
  expect(body.operation, context).toBe(operation ?? undefined);
  expect(tokens(reply), context).toEqual(TOKENS);
}

async function stateOf(path: string): Promise<{ body: string; next: string | undefined; records: string | undefined; closed: string | undefined }> {
  const read = await http('GET', `${path}?offset=-1`);
  const head = await http('HEAD', path);
  return { body: read.text(), next: head.headers['stream-next-offset'], records: head.headers['stream-record-next'], closed: head.headers['stream-closed'] };
}

async function statesOf(paths: string[]) {
  return Promise.all(paths.map(stateOf));
}

describe('a committed transaction', () => {
  it('appends to every stream, answering each operation in request order with both tokens', async () => {
    const { key, path } = await group();
    const reply = await transact(key, {
      operations: [jsonOp('journal', { step: 1 }, { record_match: 1 }), { stream: 'notes', content_type: 'text/plain', payload_base64: b64('n1\n') }, jsonOp('queue', [{ a: 1 }, { b: 2 }])],
    });
    expect(reply.status, reply.text()).toBe(200);
    expect(tokens(reply)).toEqual(TOKENS);
    const journalFirst = '{"first":"journal"}\n'.length;
    const queueFirst = '{"first":"queue"}\n'.length;
    expect(reply.json()).toEqual([
      { stream: 'journal', stream_offset: offset(journalFirst), stream_next_offset: offset(journalFirst + '{"step":1}\n'.length), stream_closed: false, duplicate: false, stream_record_start: 1, stream_record_next: 2 },
      { stream: 'notes', stream_offset: offset(3), stream_next_offset: offset(6), stream_closed: false, duplicate: false },
      { stream: 'queue', stream_offset: offset(queueFirst), stream_next_offset: offset(queueFirst + '{"a":1}\n{"b":2}\n'.length), stream_closed: false, duplicate: false, stream_record_start: 1, stream_record_next: 3 },
    ]);
    expect((await http('GET', `${path('queue')}?offset=-1`)).json()).toEqual([{ first: 'queue' }, { a: 1 }, { b: 2 }]);
    expect((await http('GET', `${path('notes')}?offset=-1`)).text()).toBe('n0\nn1\n');
    expect(ndjson(await http('GET', `${path('journal')}?record=1`))).toEqual([{ step: 1 }]);
  });

  it('normalises content_type as a Content-Type header, and chains operations on one stream', async () => {
    const { key, path } = await group();
    const reply = await transact(key, { operations: [jsonOp('queue', 'a', { content_type: ' Application/JSON ', record_match: 1 }), jsonOp('queue', 'b', { record_match: 2 })] });
    expect(reply.status, reply.text()).toBe(200);
    expect((reply.json() as Array<Record<string, unknown>>).map((a) => [a.stream_record_start, a.stream_record_next])).toEqual([[1, 2], [2, 3]]);
    expect((await http('GET', `${path('queue')}?offset=-1`)).json()).toEqual([{ first: 'queue' }, 'a', 'b']);
  });

  it('closes a stream with close_after, and a later transaction naming it is refused whole', async () => {
    const { key, path } = await group();
    const reply = await transact(key, { operations: [jsonOp('journal', 'last', { close_after: true }), jsonOp('queue', 'q')] });
    expect((reply.json() as Array<Record<string, unknown>>).map((a) => a.stream_closed)).toEqual([true, false]);
    expect((await http('HEAD', path('journal'))).headers['stream-closed']).toBe('true');
    const before = await statesOf([path('journal'), path('queue')]);
    expectRefused(await transact(key, { operations: [jsonOp('queue', 'r'), jsonOp('journal', 'more')] }), 'STREAM_CLOSED', 1);
    expect(await statesOf([path('journal'), path('queue')])).toEqual(before);
  });

  it('takes 64 operations', async () => {
    const { key, path } = await group();
    const operations = Array.from({ length: 64 }, (_, i) => jsonOp(i % 2 === 0 ? 'journal' : 'queue', { i }));
    const reply = await transact(key, { operations });
    expect(reply.status, reply.text()).toBe(200);
    expect(reply.json()).toHaveLength(64);
    expect((await http('HEAD', path('queue'))).headers['stream-record-next']).toBe('33');
  });
});

describe('a refused operation refuses the whole transaction', () => {
  const cases: Array<{ name: string; operation: Operation; code: ErrorCode }> = [
    { name: 'a record precondition', operation: jsonOp('queue', 'x', { record_match: 5 }), code: 'RECORD_MATCH_FAILED' },
    { name: 'a content type', operation: { stream: 'queue', content_type: 'text/plain', payload_base64: b64('x') }, code: 'CONTENT_TYPE_MISMATCH' },
    { name: 'a Stream-Seq', operation: jsonOp('queue', 'x', { stream_seq: '0001' }), code: 'STREAM_SEQ_CONFLICT' },
    { name: 'a producer sequence', operation: jsonOp('queue', 'x', { producer: { producer_id: 'p', producer_epoch: 0, producer_seq: 3 } }), code: 'PRODUCER_SEQ_GAP' },
    { name: 'a missing stream', operation: jsonOp('absent', 'x'), code: 'STREAM_NOT_FOUND' },
    { name: 'a record precondition on a stream without records', operation: { stream: 'notes', content_type: 'text/plain', payload_base64: b64('x'), record_match: 1 }, code: 'RECORDS_NOT_ACTIVE' },
    { name: 'invalid JSON in a payload', operation: { stream: 'queue', content_type: 'application/json', payload_base64: b64('{"open":') }, code: 'INVALID_JSON' },
    { name: 'an empty JSON array', operation: { stream: 'queue', content_type: 'application/json', payload_base64: b64('[]') }, code: 'EMPTY_JSON_ARRAY' },
  ];
  for (const { name, operation, code } of cases) {
    it(`on ${name}, at any position, with that failure's status and code`, async () => {
      const { key, path } = await group();
      expect((await http('POST', path('queue'), { ...JSON_TYPE, 'stream-seq': '0005' }, '"seq"')).status).toBe(204);
      const paths = [path('journal'), path('queue'), path('notes')];
      const before = await statesOf(paths);
      const good = [jsonOp('journal', 'a', { producer: { producer_id: 'p', producer_epoch: 0, producer_seq: 0 } }), { stream: 'notes', content_type: 'text/plain', payload_base64: b64('b\n') }];
      for (let at = 0; at <= good.length; at++) {
        expectRefused(await transact(key, { operations: [...good.slice(0, at), operation, ...good.slice(at)] }), code, at);
        expect(await statesOf(paths)).toEqual(before);
      }
    });
  }

  it('of two concurrent transactions expecting the same record tail, exactly one commits', async () => {
    const { key, path } = await group();
    const rng = seededRandom();
    const attempts = await Promise.all(
      Array.from({ length: 6 }, (_, i) => transact(key, { operations: [jsonOp('journal', { i }, { record_match: 1 }), jsonOp('queue', { i, n: rng.int(0, 9) }, { record_match: 1 })] })),
    );
    const statuses = attempts.map((a) => a.status).sort();
    expect(statuses).toEqual([200, 412, 412, 412, 412, 412]);
    const winner = attempts.find((a) => a.status === 200)!.json() as Array<Record<string, unknown>>;
    const journal = (await http('GET', `${path('journal')}?offset=-1`)).json() as Array<{ i?: number }>;
    const queue = (await http('GET', `${path('queue')}?offset=-1`)).json() as Array<{ i?: number }>;
    expect(journal).toHaveLength(2);
    expect(queue).toHaveLength(2);
    expect(journal[1]!.i).toBe(queue[1]!.i);
    expect(winner.map((a) => a.stream_record_start)).toEqual([1, 1]);
  });
});

describe('retries', () => {
  it('a retry with the same producer fields is answered with the original acknowledgements and applies nothing', async () => {
    const { key, path } = await group();
    const producer = (seq: number) => ({ producer: { producer_id: 'writer', producer_epoch: 2, producer_seq: seq } });
    const body = { operations: [jsonOp('journal', 'j', producer(0)), jsonOp('queue', ['q1', 'q2'], producer(0))] };
    const first = await transact(key, body);
    expect(first.status, first.text()).toBe(200);
    const before = await statesOf([path('journal'), path('queue')]);
    const retry = await transact(key, body);
    expect(retry.status, retry.text()).toBe(200);
    const original = first.json() as Array<Record<string, unknown>>;
    expect(retry.json()).toEqual(original.map((ack) => ({ ...ack, duplicate: true })));
    expect(original.map((a) => [a.producer_epoch, a.producer_seq])).toEqual([[2, 0], [2, 0]]);
    expect(await statesOf([path('journal'), path('queue')])).toEqual(before);
  });

  it('a retry that would apply some operations again is refused, applying nothing', async () => {
    const { key, path } = await group();
    const body = { operations: [jsonOp('journal', 'j', { producer: { producer_id: 'w', producer_epoch: 0, producer_seq: 0 } }), jsonOp('queue', 'no producer')] };
    expect((await transact(key, body)).status).toBe(200);
    const before = await statesOf([path('journal'), path('queue')]);
    expectRefused(await transact(key, body), 'TRANSACTION_PARTLY_APPLIED', 1);
    expect(await statesOf([path('journal'), path('queue')])).toEqual(before);
  });
});

describe('live readers', () => {
  it('a reader woken by one operation finds the others already committed', async () => {
    const { key, path } = await group();
    const tail = (await http('HEAD', path('queue'))).headers['stream-next-offset']!;
    const waiting = http('GET', `${path('queue')}?offset=${tail}&live=long-poll&timeout_ms=20000`);
    // Parked or not yet when the transaction commits, the reader answers with the queue's operation.
    const reply = await transact(key, { operations: [jsonOp('journal', 'j'), jsonOp('queue', 'q')] });
    expect(reply.status).toBe(200);
    const woken = await waiting;
    expect(woken.json()).toEqual(['q']);
    expect(ndjson(await http('GET', `${path('journal')}?record=1`))).toEqual(['j']);
  });
});

describe('malformed transactions', () => {
  const malformed: Array<{ name: string; body: unknown; code: ErrorCode; operation: number | null }> = [
    { name: 'a body that is not JSON', body: '{"operations":', code: 'INVALID_TRANSACTION', operation: null },
    { name: 'no operations array', body: { ops: [] }, code: 'INVALID_TRANSACTION', operation: null },
    { name: 'no operations', body: { operations: [] }, code: 'INVALID_TRANSACTION', operation: null },
    { name: '65 operations', body: { operations: Array.from({ length: 65 }, () => jsonOp('queue', 1)) }, code: 'INVALID_TRANSACTION', operation: null },
    { name: 'an unknown member', body: { operations: [jsonOp('queue', 1), jsonOp('queue', 1, { stream_closed: true })] }, code: 'INVALID_TRANSACTION', operation: 1 },
    { name: 'unpadded base64', body: { operations: [{ stream: 'queue', content_type: 'application/json', payload_base64: 'MQ' }] }, code: 'INVALID_TRANSACTION', operation: 0 },
    { name: 'an empty payload', body: { operations: [{ stream: 'queue', content_type: 'application/json', payload_base64: '' }] }, code: 'EMPTY_BODY', operation: 0 },
    { name: 'no content_type', body: { operations: [{ stream: 'queue', payload_base64: b64('1') }] }, code: 'INVALID_TRANSACTION', operation: 0 },
    { name: 'a negative record_match', body: { operations: [jsonOp('queue', 1, { record_match: -1 })] }, code: 'INVALID_TRANSACTION', operation: 0 },
    { name: 'a producer missing its sequence', body: { operations: [jsonOp('queue', 1, { producer: { producer_id: 'p', producer_epoch: 0 } as never })] }, code: 'INVALID_TRANSACTION', operation: 0 },
    { name: 'an empty producer id', body: { operations: [jsonOp('queue', 1, { producer: { producer_id: '', producer_epoch: 0, producer_seq: 0 } })] }, code: 'INVALID_PRODUCER_HEADERS', operation: 0 },
    { name: 'a stream id with a slash', body: { operations: [jsonOp('a/b', 1)] }, code: 'INVALID_ID', operation: 0 },
    { name: 'a reserved stream id', body: { operations: [jsonOp('snapshot', 1)] }, code: 'INVALID_ID', operation: 0 },
  ];
  for (const { name, body, code, operation } of malformed) {
    it(`refuses ${name}`, async () => {
      const { key, path } = await group();
      const before = await stateOf(path('queue'));
      expectRefused(await transact(key, body), code, operation);
      expect(await stateOf(path('queue'))).toEqual(before);
    });
  }

  it('refuses a body sent as another type, another method, and a body over the size limit', async () => {
    const { key } = await group();
    expectRefused(await transact(key, { operations: [jsonOp('queue', 1)] }, { 'content-type': 'text/plain' }), 'INVALID_TRANSACTION', null);
    expectRefused(await http('GET', `/${bucket}/${key}/$transaction`), 'METHOD_NOT_ALLOWED', null);
    const big = await transact(key, { operations: [{ stream: 'queue', content_type: 'application/json', payload_base64: b64(`"${'x'.repeat(MAX_BODY_BYTES)}"`) }] });
    expect(big.status).toBe(413);
    expect((big.json() as { code: string }).code).toBe('PAYLOAD_TOO_LARGE');
  });

  it('refuses a header given twice, before the handler runs, with both tokens', async () => {
    const { key, path } = await group();
    const before = await stateOf(path('queue'));
    const body = JSON.stringify({ operations: [jsonOp('queue', 1)] });
    const head = [`POST /${bucket}/${key}/$transaction HTTP/1.1`, 'Host: localhost', 'Connection: close', 'Content-Type: application/json', 'Content-Type: application/json'];
    const answer = await rawExchange(server.url, `${head.join('\r\n')}\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer.toLowerCase()).toContain(`\r\nstream-extensions: ${TOKENS.join(', ')}\r\n`);
    expect(answer).toContain('"code":"INVALID_HEADER"');
    expect(await stateOf(path('queue'))).toEqual(before);
  });

  it('answers 404 for a bucket that does not exist', async () => {
    const reply = await http('POST', `/nobucket-${Date.now().toString(36)}/k/$transaction`, JSON_TYPE, JSON.stringify({ operations: [jsonOp('s', 1)] }));
    expect(reply.status, reply.text()).toBe(404);
  });
});
