/**
 * Every refusal answers `Content-Type: application/json` with a body of exactly
 * `{"code", "message"}`, and its status is the one ERROR_STATUS maps the code to. One
 * table of requests that each provoke a refusal, run against the real binary.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_STATUS, type ErrorCode } from '../../src/protocol/errors.js';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { call, expectRefusal, offset, rawExchange, unique } from './client.js';

let server: RunningServer;
let b: string;
const http = (method: string, path: string, options = {}) => call(server.url, method, path, options);
const TEXT = { 'content-type': 'text/plain' };
const JSON_HEADERS = { 'content-type': 'application/json' };

async function ok(method: string, path: string, options = {}): Promise<void> {
  const reply = await http(method, path, options);
  expect(reply.status, `${method} ${path}: ${reply.text()}`).toBeLessThan(300);
}

/** Streams the table's requests run against. */
async function setUp(): Promise<void> {
  b = unique('err');
  await ok('PUT', `/${b}`);
  await ok('PUT', `/${b}/text`, { headers: TEXT, body: 'hello' });
  await ok('PUT', `/${b}/json`, { headers: JSON_HEADERS, body: '[{"n":1},{"n":2}]' });
  await ok('PUT', `/${b}/closed`, { headers: { ...TEXT, 'stream-closed': 'true' }, body: 'done' });
  await ok('PUT', `/${b}/src`, { headers: TEXT, body: 'source' });
  await ok('PUT', `/${b}/fork`, { headers: { 'stream-forked-from': `/${b}/src` } });
  await ok('DELETE', `/${b}/src`);
}

interface Case {
  code: ErrorCode;
  method: string;
  /** `{b}` is replaced by the test bucket. */
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

const CASES: Case[] = [
  { code: 'INVALID_OFFSET', method: 'GET', path: '/{b}/text?offset=abc' },
  { code: 'INVALID_OFFSET', method: 'GET', path: '/{b}/text?offset=-2' },
  { code: 'INVALID_OFFSET', method: 'GET', path: '/{b}/text?offset=123' },
  { code: 'INVALID_OFFSET', method: 'GET', path: '/{b}/text?live=long-poll' },
  { code: 'INVALID_QUERY', method: 'GET', path: '/{b}/text?offset=-1&live=bogus' },
  { code: 'INVALID_QUERY', method: 'GET', path: '/{b}/text?offset=-1&max_bytes=0' },
  { code: 'INVALID_QUERY', method: 'GET', path: '/{b}/text?offset=-1&offset=-1' },
  { code: 'INVALID_QUERY', method: 'GET', path: '/{b}/text?offset=-1&consistency=strong' },
  { code: 'INVALID_QUERY', method: 'GET', path: '/{b}/text?offset=-1&timeout_ms=-5&live=long-poll' },
  { code: 'INVALID_QUERY', method: 'GET', path: '/{b}/streams?limit=0' },
  { code: 'INVALID_ID', method: 'PUT', path: '/ab' },
  { code: 'INVALID_ID', method: 'PUT', path: '/{b}/a%2Fb', headers: TEXT },
  { code: 'INVALID_ID', method: 'GET', path: '/v1/stream/%00' },
  { code: 'INVALID_JSON', method: 'POST', path: '/{b}/json', headers: JSON_HEADERS, body: '{"n":' },
  { code: 'INVALID_JSON', method: 'PUT', path: '/{b}/new-json', headers: JSON_HEADERS, body: 'nope' },
  { code: 'EMPTY_JSON_ARRAY', method: 'POST', path: '/{b}/json', headers: JSON_HEADERS, body: '[]' },
  { code: 'EMPTY_BODY', method: 'POST', path: '/{b}/text', headers: TEXT },
  { code: 'MISSING_CONTENT_TYPE', method: 'POST', path: '/{b}/text', body: 'x' },
  { code: 'INVALID_CONTENT_TYPE', method: 'POST', path: '/{b}/text', headers: { 'content-type': 'nonsense' }, body: 'x' },
  { code: 'INVALID_CONTENT_TYPE', method: 'PUT', path: '/{b}/new', headers: { 'content-type': 'text/' } },
  { code: 'INVALID_TTL', method: 'PUT', path: '/{b}/new', headers: { ...TEXT, 'stream-ttl': '-1' } },
  { code: 'INVALID_TTL', method: 'PUT', path: '/{b}/new', headers: { ...TEXT, 'stream-ttl': '010' } },
  { code: 'INVALID_EXPIRES_AT', method: 'PUT', path: '/{b}/new', headers: { ...TEXT, 'stream-expires-at': 'tomorrow' } },
  { code: 'INVALID_EXPIRES_AT', method: 'PUT', path: '/{b}/past', headers: { ...TEXT, 'stream-expires-at': '2020-01-01T00:00:00Z' } },
  { code: 'TTL_AND_EXPIRES_AT', method: 'PUT', path: '/{b}/new', headers: { ...TEXT, 'stream-ttl': '60', 'stream-expires-at': '2099-01-01T00:00:00Z' } },
  { code: 'INVALID_FORK', method: 'PUT', path: '/{b}/new', headers: { 'stream-fork-offset': offset(0) } },
  { code: 'INVALID_FORK', method: 'PUT', path: '/{b}/new', headers: { 'stream-forked-from': '/{b}/text', 'stream-fork-offset': offset(99) } },
  { code: 'INVALID_FORK', method: 'PUT', path: '/{b}/new', headers: { 'stream-forked-from': '/{b}/text', 'stream-fork-offset': 'x' } },
  { code: 'INVALID_HEADER', method: 'POST', path: '/{b}/text', headers: { ...TEXT, 'stream-closed': 'maybe' }, body: 'x' },
  { code: 'INVALID_HEADER', method: 'PUT', path: '/{b}/new', headers: { 'stream-forked-from': 'text' } },
  { code: 'MISALIGNED_OFFSET', method: 'GET', path: `/{b}/json?offset=${offset(2)}` },
  // `GET /` lists buckets (issue 26); a reserved top-level name is no bucket.
  { code: 'NOT_FOUND', method: 'GET', path: '/stats/x' },
  // A third segment names an affinity stream (`/{bucket}/{affinity_key}/{stream}`); a fourth that is no extension is no route.
  { code: 'NOT_FOUND', method: 'GET', path: '/{b}/text/extra/more' },
  { code: 'NOT_FOUND', method: 'GET', path: '/v1/other/x' },
  { code: 'STREAM_NOT_FOUND', method: 'GET', path: '/{b}/missing' },
  { code: 'STREAM_NOT_FOUND', method: 'GET', path: '/{b}/text/extra' },
  { code: 'STREAM_NOT_FOUND', method: 'POST', path: '/{b}/missing', headers: TEXT, body: 'x' },
  { code: 'STREAM_NOT_FOUND', method: 'DELETE', path: '/{b}/missing' },
  { code: 'STREAM_NOT_FOUND', method: 'PUT', path: '/{b}/new', headers: { 'stream-forked-from': '/{b}/missing' } },
  { code: 'BUCKET_NOT_FOUND', method: 'GET', path: '/nobucket' },
  { code: 'BUCKET_NOT_FOUND', method: 'PUT', path: '/nobucket/s', headers: TEXT },
  { code: 'BUCKET_NOT_FOUND', method: 'GET', path: '/nobucket/streams' },
  { code: 'METHOD_NOT_ALLOWED', method: 'PATCH', path: '/{b}/text' },
  { code: 'METHOD_NOT_ALLOWED', method: 'POST', path: '/{b}' },
  { code: 'METHOD_NOT_ALLOWED', method: 'PUT', path: '/{b}/streams' },
  { code: 'STREAM_CONFIG_CONFLICT', method: 'PUT', path: '/{b}/text', headers: JSON_HEADERS },
  { code: 'STREAM_CONFIG_CONFLICT', method: 'PUT', path: '/{b}/text', headers: { ...TEXT, 'stream-ttl': '60' } },
  { code: 'STREAM_CLOSED', method: 'POST', path: '/{b}/closed', headers: TEXT, body: 'x' },
  { code: 'CONTENT_TYPE_MISMATCH', method: 'POST', path: '/{b}/text', headers: JSON_HEADERS, body: '1' },
  { code: 'CONTENT_TYPE_MISMATCH', method: 'PUT', path: '/{b}/new', headers: { ...JSON_HEADERS, 'stream-forked-from': '/{b}/text' } },
  { code: 'BUCKET_NOT_EMPTY', method: 'DELETE', path: '/{b}' },
  { code: 'STREAM_NAME_RESERVED', method: 'PUT', path: '/{b}/src', headers: TEXT },
  { code: 'FORK_SOURCE_GONE', method: 'PUT', path: '/{b}/new', headers: { 'stream-forked-from': '/{b}/src' } },
  { code: 'STREAM_GONE', method: 'GET', path: '/{b}/src?offset=-1' },
  { code: 'STREAM_GONE', method: 'POST', path: '/{b}/src', headers: TEXT, body: 'x' },
  { code: 'STREAM_GONE', method: 'DELETE', path: '/{b}/src' },
  { code: 'OFFSET_BEYOND_TAIL', method: 'GET', path: `/{b}/text?offset=${offset(6)}` },
];

beforeAll(async () => {
  server = await startServer();
  await setUp();
});
afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

describe('error bodies', () => {
  const fill = (s: string) => s.replaceAll('{b}', b);

  it.each(CASES.map((c) => [`${c.method} ${c.path} -> ${c.code}`, c] as const))('%s', async (_label, c) => {
    const headers = Object.fromEntries(Object.entries(c.headers ?? {}).map(([k, v]) => [k, fill(v)]));
    const reply = await http(c.method, fill(c.path), { headers, body: c.body });
    expectRefusal(reply, c.code);
  });

  it('covers refusals of every 4xx class the table maps', () => {
    const statuses = new Set(CASES.map((c) => ERROR_STATUS[c.code]));
    expect([...statuses].sort()).toEqual([400, 404, 405, 409, 410, 416]);
    expect(new Set(CASES.map((c) => c.code)).size).toBeGreaterThanOrEqual(25);
  });

  it('leaves state unchanged after refusals', async () => {
    const text = await http('GET', `/${b}/text?offset=-1`);
    expect(text.text()).toBe('hello');
    expect((await http('GET', `/${b}/json?offset=-1`)).json()).toEqual([{ n: 1 }, { n: 2 }]);
    expect((await http('GET', `/${b}/new?offset=-1`)).status).toBe(404);
    expect((await http('GET', `/${b}/streams`)).json()).toMatchObject({ streams: ['closed', 'fork', 'json', 'text'] });
  });

  it('answers a request that is not HTTP with a JSON 400 before closing', async () => {
    const answer = await rawExchange(server.url, 'THIS IS NOT HTTP\r\n\r\n');
    const [head, body] = answer.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 400 /);
    expect(head!.toLowerCase()).toContain('content-type: application/json');
    const parsed = JSON.parse(body!) as Record<string, unknown>;
    expect(Object.keys(parsed).sort()).toEqual(['code', 'message']);
    expect(ERROR_STATUS[parsed.code as ErrorCode]).toBe(400);
  });

  it('answers HEAD refusals with the mapped status and no body', async () => {
    for (const [path, code] of [[`/${b}/missing`, 'STREAM_NOT_FOUND'], [`/${b}/src`, 'STREAM_GONE']] as const) {
      const reply = await http('HEAD', path);
      expect([reply.status, reply.body.length, reply.headers['content-type']]).toEqual([ERROR_STATUS[code], 0, 'application/json']);
    }
  });
});

describe('a single-valued protocol header given twice', () => {
  const twice = async (path: string, headers: string[]) => {
    const answer = await rawExchange(server.url, `POST ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n${headers.join('\r\n')}\r\nContent-Length: 1\r\n\r\nz`);
    return { status: Number(answer.split(' ')[1]), body: answer.slice(answer.indexOf('\r\n\r\n') + 4) };
  };

  it('is refused with 400 INVALID_HEADER naming it, and nothing is appended', async () => {
    const before = (await http('GET', `/${b}/text?offset=-1`)).text();
    const cases = [
      ['Content-Type: text/plain', 'Producer-Id: d3', 'Producer-Id: d4', 'Producer-Epoch: 0', 'Producer-Seq: 0'],
      ['Content-Type: text/plain', 'Content-Type: application/json'],
      ['Content-Type: text/plain', 'Stream-Seq: a', 'stream-seq: b'],
      ['Content-Type: text/plain', 'Stream-Closed: false', 'Stream-Closed: false'],
    ];
    for (const headers of cases) {
      const reply = await twice(`/${b}/text`, headers);
      expect(reply.status, headers.join(' | ')).toBe(400);
      expect(JSON.parse(reply.body)).toEqual({ code: 'INVALID_HEADER', message: expect.stringMatching(/header is given more than once/) });
    }
    expect((await http('GET', `/${b}/text?offset=-1`)).text()).toBe(before);
  });

  it('while headers that may repeat (Accept, Cookie) do not stop a request', async () => {
    const reply = await twice(`/${b}/text`, ['Content-Type: text/plain', 'Accept: text/plain', 'Accept: */*']);
    expect(reply.status).toBe(204);
  });
});

describe('a valid request followed by garbage on the same connection', () => {
  it('answers the valid request, then 400 for the garbage, then closes', async () => {
    const answer = await rawExchange(server.url, `GET /${b}/text?offset=-1 HTTP/1.1\r\nHost: localhost\r\n\r\nXXXX\r\n\r\n`);
    const statuses = [...answer.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
    expect(statuses).toEqual([200, 400]);
    expect(answer.indexOf('hello')).toBeGreaterThan(0);
    expect(answer.indexOf('hello')).toBeLessThan(answer.lastIndexOf('HTTP/1.1 400'));
    expect(answer).toContain('"code":"BAD_REQUEST"');
  });

  it('answers every pipelined request before the garbage, in order, then 400, whether answered at once or later', async () => {
    const healthz = 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n';
    const read = `GET /${b}/text?offset=-1 HTTP/1.1\r\nHost: localhost\r\n\r\n`;
    for (const requests of [[healthz], [healthz, read], [read, healthz], [healthz, read, healthz]]) {
      const answer = await rawExchange(server.url, `${requests.join('')}XXXX\r\n\r\n`);
      const statuses = [...answer.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
      expect(statuses, requests.join(' + ')).toEqual([...requests.map(() => 200), 400]);
      expect(answer).toContain('"code":"BAD_REQUEST"');
    }
  });
});
