/**
 * Ursula publishes HTTP test vectors for JSON record coordinates
 * (tonbo-io/ursula, crates/ursula-stream/tests/fixtures/record_coordinates_http_v1.json).
 * Each case below is one of them, written here in this file's own form, run against a
 * real rill. Two translations, both the base protocol's: offsets are rill's 20-digit
 * tokens of the same byte positions, and an offset read asks for NDJSON with
 * `Accept: application/x-ndjson` (without it rill answers the base protocol's JSON array).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { sseBlocks } from '../helpers/sse.js';
import { call, offset, unique, type Reply } from './client.js';
import { extensionUrl } from '../../src/protocol/extensions.js';

const TOKEN = 'json-record-coordinates-v1';

interface Expected {
  status: number;
  extension: boolean;
  recordFirst?: number;
  recordStart?: number;
  recordNext?: number;
  nextOffset?: number;
  body?: string;
  sseControl?: { streamFirstRecord: number; streamNextRecord: number; streamNextOffset: number; upToDate: boolean };
}

interface VectorCase {
  name: string;
  contentType: string;
  setup?: string[];
  retainFrom?: number;
  operation: 'head' | 'append' | 'read';
  body?: string;
  recordMatch?: number;
  /** The read's query, as the vector states it. */
  query?: string;
  live?: 'long-poll' | 'sse';
  expected: Expected;
}

const THREE = '[{"id":0},{"id":1},{"id":2}]';

const CASES: VectorCase[] = [
  { name: 'json-head-advertises-active-extension', contentType: 'application/json', setup: [THREE], operation: 'head', expected: { status: 200, extension: true, recordFirst: 0, recordNext: 3, nextOffset: 27 } },
  { name: 'binary-head-does-not-advertise-json-extension', contentType: 'application/octet-stream', operation: 'head', expected: { status: 200, extension: false, nextOffset: 0 } },
  { name: 'append-acknowledges-contiguous-range', contentType: 'application/json', setup: [THREE], operation: 'append', body: '[{"id":3},{"id":4}]', expected: { status: 204, extension: true, recordStart: 3, recordNext: 5, nextOffset: 45 } },
  { name: 'record-match-failure-reports-current-tails', contentType: 'application/json', setup: [THREE], operation: 'append', body: '{"id":3}', recordMatch: 2, expected: { status: 412, extension: true, recordNext: 3, nextOffset: 27 } },
  {
    name: 'record-aligned-read',
    contentType: 'application/json',
    setup: [THREE],
    operation: 'read',
    query: 'record=1&max_records=2',
    expected: { status: 200, extension: true, recordFirst: 0, recordStart: 1, recordNext: 3, nextOffset: 27, body: '{"id":1}\n{"id":2}\n' },
  },
  {
    name: 'envelope-view-does-not-change-continuation',
    contentType: 'application/json',
    setup: [THREE],
    operation: 'read',
    query: 'record=1&max_records=2&record_view=envelope',
    expected: { status: 200, extension: true, recordFirst: 0, recordStart: 1, recordNext: 3, nextOffset: 27, body: '{"record":1,"value":{"id":1}}\n{"record":2,"value":{"id":2}}\n' },
  },
  { name: 'trimmed-record-is-gone', contentType: 'application/json', setup: [THREE], retainFrom: 2, operation: 'read', query: 'record=1', expected: { status: 410, extension: true, recordFirst: 2, recordNext: 3 } },
  { name: 'record-beyond-tail-is-bad-request', contentType: 'application/json', setup: [THREE], operation: 'read', query: 'record=4', expected: { status: 400, extension: true, recordNext: 3 } },
  { name: 'record-and-offset-are-mutually-exclusive', contentType: 'application/json', setup: ['[{"id":0}]'], operation: 'read', query: `record=0&offset=${offset(0)}`, expected: { status: 400, extension: true } },
  {
    name: 'ordinary-offset-read-remains-byte-oriented',
    contentType: 'application/json',
    setup: ['[{"id":0},{"id":1}]'],
    operation: 'read',
    query: `offset=${offset(0)}`,
    expected: { status: 200, extension: true, nextOffset: 18, body: '{"id":0}\n{"id":1}\n' },
  },
  {
    name: 'empty-long-poll-keeps-record-continuation',
    contentType: 'application/json',
    setup: [THREE],
    operation: 'read',
    query: 'record=3&timeout_ms=10',
    live: 'long-poll',
    expected: { status: 204, extension: true, recordFirst: 0, recordStart: 3, recordNext: 3, nextOffset: 27, body: '' },
  },
  {
    name: 'sse-control-carries-matching-record-and-offset-tail',
    contentType: 'application/json',
    setup: [THREE],
    operation: 'read',
    query: 'record=2',
    live: 'sse',
    expected: { status: 200, extension: true, recordFirst: 0, recordStart: 2, recordNext: 3, body: '{"id":2}\n', sseControl: { streamFirstRecord: 0, streamNextRecord: 3, streamNextOffset: 27, upToDate: true } },
  },
];

let server: RunningServer;
const http = (method: string, path: string, headers: Record<string, string> = {}, body?: string) => call(server.url, method, path, { headers, body });

beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

async function prepare(vector: VectorCase): Promise<string> {
  const path = `/v1/stream/${unique('vector')}`;
  const [first, ...rest] = vector.setup ?? [];
  expect((await http('PUT', path, { 'content-type': vector.contentType }, first)).status).toBe(201);
  for (const body of rest) expect((await http('POST', path, { 'content-type': vector.contentType }, body)).status).toBe(204);
  if (vector.retainFrom !== undefined) {
    expect((await http('PUT', extensionUrl(path, 'snapshot', `record=${vector.retainFrom}`), { 'content-type': 'application/json' }, '{}')).status).toBe(204);
    expect((await http('PUT', extensionUrl(path, 'retention', `record=${vector.retainFrom}`))).status).toBe(204);
  }
  return path;
}

function checkHeaders(reply: Reply, expected: Expected): void {
  const context = `${reply.status} ${reply.text()}`;
  expect(reply.status, context).toBe(expected.status);
  const tokens = (reply.headers['stream-extensions'] ?? '').split(',').map((t) => t.trim());
  expect(tokens.includes(TOKEN), context).toBe(expected.extension);
  const numeric: Array<[keyof Expected, string]> = [
    ['recordFirst', 'stream-record-first'],
    ['recordStart', 'stream-record-start'],
    ['recordNext', 'stream-record-next'],
  ];
  for (const [field, header] of numeric) if (expected[field] !== undefined) expect(reply.headers[header], `${header}: ${context}`).toBe(String(expected[field]));
  if (expected.nextOffset !== undefined) expect(reply.headers['stream-next-offset'], context).toBe(offset(expected.nextOffset));
}

/** The first data event's payload and the control event after it, then the connection is dropped. */
async function sseFirstEvents(path: string): Promise<{ reply: Reply; data: string; control: Record<string, unknown> }> {
  const abort = new AbortController();
  const res = await fetch(`${server.url}${path}`, { signal: abort.signal });
  const headers: Record<string, string> = {};
  res.headers.forEach((value, name) => (headers[name] = value));
  const reply: Reply = { status: res.status, headers, body: Buffer.alloc(0), text: () => '', json: () => null };
  let data = '';
  let control: Record<string, unknown> | null = null;
  for await (const block of sseBlocks(res)) {
    const payload = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5)).join('\n');
    if (block.startsWith('event: data')) data += payload;
    else if (block.startsWith('event: control')) {
      control = JSON.parse(payload) as Record<string, unknown>;
      break;
    }
  }
  abort.abort();
  if (control === null) throw new Error('the SSE answer ended before a control event');
  return { reply, data, control };
}

describe("Ursula's record-coordinate HTTP vectors", () => {
  for (const vector of CASES) {
    it(vector.name, async () => {
      const path = await prepare(vector);
      const { expected } = vector;
      if (vector.operation === 'head') return checkHeaders(await http('HEAD', path), expected);
      if (vector.operation === 'append') {
        const headers: Record<string, string> = { 'content-type': vector.contentType };
        if (vector.recordMatch !== undefined) headers['stream-record-match'] = String(vector.recordMatch);
        return checkHeaders(await http('POST', path, headers, vector.body), expected);
      }
      const live = vector.live === undefined ? '' : `&live=${vector.live}`;
      const target = `${path}?${vector.query}${live}`;
      if (vector.live === 'sse') {
        const { reply, data, control } = await sseFirstEvents(target);
        checkHeaders(reply, expected);
        // The default JSON view's data event is the base protocol's JSON array of the same messages.
        expect(JSON.parse(data)).toEqual(expected.body!.trim().split('\n').map((line) => JSON.parse(line)));
        const sse = expected.sseControl!;
        expect(control).toMatchObject({ streamFirstRecord: sse.streamFirstRecord, streamNextRecord: sse.streamNextRecord, streamNextOffset: offset(sse.streamNextOffset), upToDate: sse.upToDate });
        return;
      }
      const reply = await http('GET', target, vector.query!.startsWith('offset=') ? { accept: 'application/x-ndjson' } : {});
      checkHeaders(reply, expected);
      if (expected.body !== undefined) expect(reply.text()).toBe(expected.body);
    });
  }
});
