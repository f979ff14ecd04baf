/**
 * Hostile input against the real server process, over raw sockets so that any byte
 * sequence can be sent: random methods, paths (traversal, encoded slashes, NUL,
 * overlong ids), query strings, headers (duplicates, huge, non-ASCII, malformed numbers
 * and dates) and bodies (invalid JSON, wrong Content-Length, truncated or malformed
 * chunked encoding). The server must never crash and never answer 5xx, every refusal
 * must be the JSON error body, and a control stream written beside it stays unchanged.
 *
 * fast-check drives the generator with the file's seed (test/helpers/seed.ts: a new one each
 * run, printed when the test fails; RILL_TEST_SEED replays it, RILL_FUZZ_RUNS sets the count),
 * so a failure replays and shrinks to a small request. Before the random requests, one request
 * steered to each status the run must reach is sent, so that no seed misses one: random
 * requests reach a 413, say, about once in 300.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testSeed } from '../helpers/seed.js';
import { removeDir, startServer, type ServerProcess } from '../helpers/server.js';
import { expectJsonRefusal } from './checks.js';
import { openSocket, parseHead } from './net.js';

const RUNS = Number(process.env.RILL_FUZZ_RUNS ?? 300);

let server: ServerProcess;

interface ControlState {
  body: string;
  headers: Record<string, string | null>;
}

async function controlState(url: string): Promise<ControlState> {
  const read = await fetch(`${url}/ctrl-bucket/control?offset=-1`);
  const head = await fetch(`${url}/ctrl-bucket/control`, { method: 'HEAD' });
  const closed = await fetch(`${url}/v1/stream/control-closed?offset=-1`);
  const pick = ['stream-next-offset', 'stream-incarnation', 'stream-last-seq', 'stream-closed', 'content-type'];
  return {
    body: `${await read.text()}|${await closed.text()}`,
    headers: {
      ...Object.fromEntries(pick.map((h) => [h, head.headers.get(h)])),
      closedStream: closed.headers.get('stream-closed'),
      closedTail: closed.headers.get('stream-next-offset'),
    },
  };
}

async function writeControl(url: string): Promise<void> {
  expect((await fetch(`${url}/ctrl-bucket`, { method: 'PUT' })).status).toBe(201);
  expect((await fetch(`${url}/ctrl-bucket/control`, { method: 'PUT', headers: { 'content-type': 'text/plain' } })).status).toBe(201);
  for (let i = 0; i < 3; i++) {
    const headers = { 'content-type': 'text/plain', 'producer-id': 'ctrl', 'producer-epoch': '0', 'producer-seq': String(i), 'stream-seq': `00${i}` };
    expect((await fetch(`${url}/ctrl-bucket/control`, { method: 'POST', headers, body: `c${i};` })).status).toBe(200);
  }
  const closed = `${url}/v1/stream/control-closed`;
  expect((await fetch(closed, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '[1,2]' })).status).toBe(201);
  expect((await fetch(closed, { method: 'POST', headers: { 'stream-closed': 'true' } })).status).toBe(204);
}

let before: ControlState;

beforeAll(async () => {
  server = await startServer({
    process: true,
    args: [
      '--max-body', '65536', '--max-header-bytes', '8192', '--max-url-bytes', '2048',
      '--headers-timeout', '2s', '--request-timeout', '3s',
      '--long-poll-timeout', '200ms', '--max-long-poll-timeout', '300ms', '--sse-lifetime', '1s',
    ],
  });
  await writeControl(server.url);
  // Streams for the fuzzed requests to reach past the router.
  expect((await fetch(`${server.url}/fuzz-bucket`, { method: 'PUT' })).status).toBe(201);
  for (const [path, type] of [['/v1/stream/s1', 'text/plain'], ['/v1/stream/json', 'application/json'], ['/fuzz-bucket/s2', 'application/octet-stream'], ['/fuzz-bucket/json', 'application/json']]) {
    expect((await fetch(server.url + path!, { method: 'PUT', headers: { 'content-type': type! } })).status).toBe(201);
  }
  before = await controlState(server.url);
});

afterAll(async () => {
  if (server.child.exitCode === null) await server.stop();
  removeDir(server.dataDir);
});

// ---- the generator -------------------------------------------------------------

const segment = fc.oneof(
  fc.constantFrom('fuzz-bucket', 'fuzz', 'v1', 'stream', 'streams', 'healthz', 'metrics', 's1', 's2', 'json', 'ABC', 'a_b-c'),
  fc.constantFrom('..', '.', '%2e%2e', '%2F', 'a%2Fb', '%00', 'a%00b', '%', '%ZZ', '%C3%A9', 'é', '%FF%FE', '~', '*', ';x=1', '%0d%0a', ''),
  fc.integer({ min: 100, max: 400 }).map((n) => 'x'.repeat(n)),
  fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 12 }).map((s) => encodeURIComponent(s)),
);

const path = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('/v1/stream/s1', '/v1/stream/json', '/fuzz-bucket/s2', '/fuzz-bucket/json', '/fuzz-bucket', '/fuzz-bucket/streams') },
  { weight: 2, arbitrary: fc.array(segment, { minLength: 1, maxLength: 2 }).map((segs) => `/v1/stream/${segs.join('/')}`) },
  { weight: 2, arbitrary: fc.array(segment, { minLength: 1, maxLength: 2 }).map((segs) => `/fuzz-bucket/${segs.join('/')}`) },
  { weight: 1, arbitrary: fc.array(segment, { minLength: 0, maxLength: 4 }).map((segs) => `/${segs.join('/')}`) },
  { weight: 1, arbitrary: fc.constantFrom('*', '/', '//', 'http://127.0.0.1/v1/stream/s1', '/v1/stream/s1#frag', '/../../etc/passwd', '/v1/stream/s1\u0000') },
);

const queryValue = fc.constantFrom('-1', 'now', '0', '00000000000000000000', '00000000000000000003', '99999999999999999999999', 'abc', '-5', '1e3', ' 1', 'sse', 'long-poll', 'leader', 'local', '%00', '%', '', '0x10', 'é');
const queryKey = fc.constantFrom('offset', 'live', 'max_bytes', 'timeout_ms', 'cursor', 'consistency', 'limit', 'prefix', 'after', 'x', '');
const query = fc.oneof(
  fc.constant(''),
  fc.array(fc.tuple(queryKey, queryValue), { maxLength: 4 }).map((pairs) => `?${pairs.map(([k, v]) => `${k}=${v}`).join('&')}`),
  fc.constantFrom('?', '?&&', '?=', '?offset', '?offset=-1&offset=now', `?pad=${'q'.repeat(2100)}`),
);

const method = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('GET', 'HEAD', 'PUT', 'POST', 'DELETE', 'OPTIONS') },
  { weight: 1, arbitrary: fc.constantFrom('PATCH', 'TRACE', 'PROPFIND', 'FOO', 'get', 'G-ET', 'POST ', '') },
);

const number = fc.constantFrom('0', '1', '7', '-1', '1.5', ' 2', '0x10', '1e3', '007', '9007199254740992', '99999999999999999999', 'abc', '');
const date = fc.constantFrom('2030-01-01T00:00:00Z', '2020-01-01T00:00:00Z', '2024-13-45T99:99:99Z', 'yesterday', 'Tue, 15 Nov 1994 08:12:31 GMT', '0', '');
const headerChoice: fc.Arbitrary<[string, string | Buffer]> = fc.oneof(
  fc.tuple(fc.constant('Content-Type'), fc.constantFrom('text/plain', 'application/json', 'application/octet-stream', 'application/json; charset=utf-8', 'text/plain;;', '', '/', 'x', 'tëxt/plain')),
  fc.tuple(fc.constantFrom('Producer-Id', 'Producer-Epoch', 'Producer-Seq'), fc.oneof(number, fc.constantFrom('fuzz-producer', 'p'.repeat(300)))),
  fc.tuple(fc.constant('Producer-Digest'), fc.constantFrom('0'.repeat(64), 'zz', 'A'.repeat(64))),
  fc.tuple(fc.constant('Stream-Seq'), fc.constantFrom('001', '000', 'z'.repeat(300), '\u00e9', '')),
  fc.tuple(fc.constantFrom('Stream-TTL'), number),
  fc.tuple(fc.constant('Stream-Expires-At'), date),
  fc.tuple(fc.constantFrom('Stream-Closed'), fc.constantFrom('true', 'false', 'TRUE', 'maybe', '')),
  fc.tuple(fc.constant('Stream-Incarnation'), fc.constantFrom('x', '', 'Zm9v')),
  fc.tuple(fc.constantFrom('Stream-Forked-From'), fc.constantFrom('/v1/stream/s1', '../x', 'http://example.invalid/v1/stream/s1', '/ctrl-bucket', '%%')),
  fc.tuple(fc.constantFrom('Stream-Fork-Offset', 'Stream-Fork-Sub-Offset'), number),
  fc.tuple(fc.constantFrom('If-None-Match', 'Accept', 'Origin', 'Access-Control-Request-Headers'), fc.constantFrom('*', 'application/x-ndjson', 'http://a', '"x"', 'W/"y"')),
  fc.tuple(fc.constantFrom('X-Latin1', 'Producer-Id', 'Stream-Seq', 'Content-Type'), fc.constantFrom(Buffer.from([0xe9, 0x41]), Buffer.from('ü€', 'utf8'), Buffer.from([0x7f, 0x41]))),
  fc.tuple(fc.constantFrom('X-Huge', 'Producer-Id'), fc.integer({ min: 9000, max: 12000 }).map((n) => 'h'.repeat(n))),
  fc.tuple(fc.constantFrom('Bad Header', 'X:Y', 'X\u0000', ''), fc.constant('v')),
);

const body = fc.oneof(
  fc.constant(Buffer.alloc(0)),
  fc.constantFrom('hello', '[]', '[1,2,3]', '{"a":1}', '[{"n":1},{"n":2}]', '{', '[1,', 'nul', '"\\ud800"', '[[]]', '\u0000').map((s) => Buffer.from(s)),
  fc.uint8Array({ minLength: 1, maxLength: 300 }).map((a) => Buffer.from(a)),
  fc.integer({ min: 60_000, max: 70_000 }).map((n) => Buffer.alloc(n, 0x62)),
);

type Framing = 'exact' | 'short' | 'long' | 'chunked' | 'chunked-truncated' | 'chunked-bad' | 'both' | 'none' | 'negative';
const framing = fc.constantFrom<Framing>('exact', 'exact', 'exact', 'short', 'long', 'chunked', 'chunked-truncated', 'chunked-bad', 'both', 'none', 'negative');

const fuzzRequest = fc.record({
  method,
  path,
  query,
  headers: fc.array(headerChoice, { maxLength: 5 }),
  duplicate: fc.boolean(),
  body,
  framing,
  close: fc.boolean(),
});
type FuzzRequest = typeof fuzzRequest extends fc.Arbitrary<infer T> ? T : never;

function framed(r: FuzzRequest): { head: Buffer[]; payload: Buffer; endsEarly: boolean } {
  const b = r.body;
  const line = (s: string) => Buffer.from(`${s}\r\n`, 'latin1');
  switch (r.framing) {
    case 'exact':
      return { head: [line(`Content-Length: ${b.length}`)], payload: b, endsEarly: false };
    case 'short':
      return { head: [line(`Content-Length: ${b.length + 10}`)], payload: b, endsEarly: true };
    case 'long':
      return { head: [line(`Content-Length: ${Math.max(0, b.length - 3)}`)], payload: b, endsEarly: false };
    case 'chunked':
      return { head: [line('Transfer-Encoding: chunked')], payload: Buffer.concat([line(b.length.toString(16)), b, line(''), line('0'), line('')]), endsEarly: false };
    case 'chunked-truncated':
      return { head: [line('Transfer-Encoding: chunked')], payload: Buffer.concat([line((b.length + 5).toString(16)), b]), endsEarly: true };
    case 'chunked-bad':
      return { head: [line('Transfer-Encoding: chunked')], payload: Buffer.concat([line('zz'), b, line('')]), endsEarly: false };
    case 'both':
      return { head: [line(`Content-Length: ${b.length}`), line('Transfer-Encoding: chunked')], payload: b, endsEarly: false };
    case 'negative':
      return { head: [line('Content-Length: -1')], payload: b, endsEarly: false };
    case 'none':
      return { head: [], payload: b, endsEarly: false };
  }
  throw new Error(`unknown framing ${String(r.framing)}`);
}

function encode(r: FuzzRequest): { bytes: Buffer; endsEarly: boolean } {
  const head: Buffer[] = [Buffer.from(`${r.method} ${r.path}${r.query} HTTP/1.1\r\nHost: 127.0.0.1\r\n`, 'utf8')];
  const headers = r.duplicate && r.headers.length > 0 ? [...r.headers, r.headers[0]!] : r.headers;
  for (const [name, value] of headers) head.push(Buffer.from(`${name}: `, 'latin1'), typeof value === 'string' ? Buffer.from(value, 'utf8') : value, Buffer.from('\r\n'));
  if (r.close) head.push(Buffer.from('Connection: close\r\n'));
  const body = framed(r);
  return { bytes: Buffer.concat([...head, ...body.head, Buffer.from('\r\n'), body.payload]), endsEarly: body.endsEarly };
}

// ---- sending and checking -----------------------------------------------------

interface Reply {
  status: number;
  contentType: string | null;
  body: Buffer;
  hasBody: boolean;
}

/** Sends the bytes, then reads until the server closes or goes quiet. */
async function exchange(bytes: Buffer, endsEarly: boolean): Promise<Buffer> {
  const socket = await openSocket(server.port);
  return new Promise((resolve) => {
    const parts: Buffer[] = [];
    let quiet: NodeJS.Timeout;
    const done = () => {
      clearTimeout(quiet);
      clearTimeout(overall);
      socket.destroy();
      resolve(Buffer.concat(parts));
    };
    const rearm = () => {
      clearTimeout(quiet);
      quiet = setTimeout(done, 400);
    };
    const overall = setTimeout(done, 4_000);
    socket.on('data', (chunk: Buffer) => {
      parts.push(chunk);
      rearm();
    });
    socket.once('close', done);
    socket.once('error', done);
    socket.write(bytes);
    // A truncated upload: the client gives up on it and closes its side.
    if (endsEarly) socket.end();
    rearm();
  });
}

function dechunk(data: Buffer): { body: Buffer; rest: Buffer } {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = data.indexOf('\r\n', at);
    if (eol < 0) return { body: Buffer.concat(parts), rest: Buffer.alloc(0) };
    const size = parseInt(data.subarray(at, eol).toString('latin1'), 16);
    at = eol + 2;
    if (!(size > 0)) return { body: Buffer.concat(parts), rest: data.subarray(Math.min(data.length, at + 2)) };
    parts.push(data.subarray(at, at + size));
    at += size + 2;
  }
}

/** Splits what came back into responses (pipelined leftovers can produce several). */
function replies(data: Buffer, method: string): Reply[] {
  const out: Reply[] = [];
  let rest = data;
  while (rest.length > 0) {
    const head = parseHead(rest);
    if (!head) throw new Error(`a truncated response head: ${JSON.stringify(rest.subarray(0, 200).toString('latin1'))}`);
    // A HEAD answer has no body, unless the server could not parse the request as HEAD
    // at all (then its refusal is a plain response with a body).
    const headAnswer = out.length === 0 && method === 'HEAD' && (head.rest.length === 0 || head.rest.subarray(0, 7).toString('latin1') === 'HTTP/1.');
    const noBody = headAnswer || head.status === 204 || head.status === 304;
    let body: Buffer;
    if (noBody) {
      body = Buffer.alloc(0);
      rest = head.rest;
    } else if (head.headers['content-length'] !== undefined) {
      const length = Number(head.headers['content-length']);
      body = head.rest.subarray(0, length);
      rest = head.rest.subarray(length);
    } else if (/chunked/i.test(head.headers['transfer-encoding'] ?? '')) {
      ({ body, rest } = dechunk(head.rest));
    } else {
      body = head.rest;
      rest = Buffer.alloc(0);
    }
    out.push({ status: head.status, contentType: head.headers['content-type'] ?? null, body, hasBody: !noBody });
  }
  return out;
}

function check(reply: Reply): void {
  expect(reply.status).toBeGreaterThanOrEqual(100);
  expect(reply.status).toBeLessThan(500);
  if (reply.status < 400) return;
  if (!reply.hasBody) {
    expect(reply.contentType ?? '').toMatch(/^application\/json/);
    return;
  }
  expectJsonRefusal({ status: reply.status, contentType: reply.contentType, body: reply.body.toString('utf8') });
}

// ---- requests steered to the statuses the run must reach -----------------------

const KNOWN_STREAMS = ['/v1/stream/s1', '/v1/stream/json', '/fuzz-bucket/s2', '/fuzz-bucket/json'];

/** A well-formed request; `overrides` decide its answer, the rest is drawn among values that do not. */
function plainRequest(overrides: Partial<FuzzRequest>): fc.Arbitrary<FuzzRequest> {
  return fc
    .record({ path: fc.constantFrom(...KNOWN_STREAMS), close: fc.boolean() })
    .map((free) => ({ method: 'GET', query: '', headers: [], duplicate: false, body: Buffer.alloc(0), framing: 'exact' as const, ...free, ...overrides }));
}

/** The statuses a run must reach: past the router, writes accepted and refused for many reasons. */
const MUST_REACH = [200, 204, 400, 404, 413, 431] as const;

const STEERED: Record<(typeof MUST_REACH)[number], fc.Arbitrary<FuzzRequest>> = {
  200: fc.constantFrom('?offset=-1', '?offset=now', '').chain((query) => plainRequest({ query })),
  // An append without a producer, or a preflight without an Origin.
  204: fc.oneof(
    fc.constantFrom('hello', 'more').chain((text) => plainRequest({ method: 'POST', path: '/v1/stream/s1', headers: [['Content-Type', 'text/plain']], body: Buffer.from(text) })),
    plainRequest({ method: 'OPTIONS' }),
  ),
  400: fc.constantFrom('abc', '-5', '1e3', '0x10').chain((offset) => plainRequest({ query: `?offset=${offset}` })),
  404: fc.stringMatching(/^[a-z0-9]{1,12}$/).chain((name) => plainRequest({ path: `/fuzz-bucket/missing-${name}` })),
  // A body above --max-body 65536.
  413: fc.integer({ min: 65_537, max: 70_000 }).chain((n) =>
    plainRequest({ method: 'POST', path: '/fuzz-bucket/s2', headers: [['Content-Type', 'application/octet-stream']], body: Buffer.alloc(n, 0x62) }),
  ),
  // A header above --max-header-bytes 8192.
  431: fc.integer({ min: 9_000, max: 12_000 }).chain((n) => plainRequest({ headers: [['X-Huge', 'h'.repeat(n)]] })),
};

const steeredRequests = fc.tuple(...MUST_REACH.map((status) => STEERED[status].map((request) => ({ status, request }))));

/** Sends `r`, checks every reply, and counts their statuses; returns the replies. */
async function sendAndCheck(r: FuzzRequest, statuses: Map<number, number>): Promise<Reply[]> {
  const { bytes, endsEarly } = encode(r);
  const answered = replies(await exchange(bytes, endsEarly), r.method);
  for (const reply of answered) {
    statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
    check(reply);
  }
  expect(server.child.exitCode).toBeNull();
  return answered;
}

describe('fuzzed requests', () => {
  it(`never crash the server, never answer 5xx, refuse with JSON, and leave the control stream alone (${RUNS} requests)`, async () => {
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(steeredRequests, async (steered) => {
        for (const { status, request } of steered) expect((await sendAndCheck(request, statuses))[0]?.status, `the request steered to ${status}`).toBe(status);
      }),
      { seed: testSeed() + 1, numRuns: 1 },
    );
    await fc.assert(
      fc.asyncProperty(fuzzRequest, async (r) => {
        await sendAndCheck(r, statuses);
      }),
      { seed: testSeed(), numRuns: RUNS, endOnFailure: false },
    );
    expect(server.child.exitCode).toBeNull();
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    expect(await controlState(server.url)).toEqual(before);
    console.log(`fuzz statuses: ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}`);
    // The run reached past the router: writes were accepted and refused for many reasons.
    const seen = [...statuses.keys()];
    for (const status of MUST_REACH) expect(seen).toContain(status);
    expect(server.output()).not.toMatch(/request failed/);
  }, Math.max(120_000, RUNS * 400));
});
