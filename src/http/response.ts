/**
 * Writing responses: the headers every response carries, and the one place where a
 * typed error becomes a status, headers and a JSON body.
 */
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { errorFieldsToHeaders } from '../protocol/error-headers.js';
import { statusOf, type ProtocolError } from '../protocol/errors.js';
import { H } from '../protocol/headers.js';
import { requestIdOf } from '../ops/request-log.js';
import { corsOriginOf } from './browsers.js';

export type HeaderMap = Record<string, string>;

/** Headers a browser must be allowed to read on cross-origin responses. */
const EXPOSED_HEADERS = [
  'X-Request-Id',
  H.streamNextOffset,
  H.streamOffset,
  H.streamUpToDate,
  H.streamCursor,
  H.streamClosed,
  H.streamTtl,
  H.streamExpiresAt,
  H.streamLastSeq,
  H.streamIncarnation,
  H.streamSseDataEncoding,
  H.streamEarliestOffset,
  H.streamSnapshotOffset,
  H.streamSnapshotDigest,
  H.streamRetention,
  H.producerEpoch,
  H.producerSeq,
  H.producerExpectedSeq,
  H.producerReceivedSeq,
  H.producerOutcome,
  H.producerClosedEpoch,
  H.producerClosedSeq,
  H.retryAfter,
  H.streamExtensions,
  H.streamRecordFirst,
  H.streamRecordStart,
  H.streamRecordNext,
  H.streamDataContentType,
  'etag',
  'location',
  'www-authenticate',
].join(', ');

const SECURITY_HEADERS: HeaderMap = {
  'x-content-type-options': 'nosniff',
  'cross-origin-resource-policy': 'cross-origin',
};

/**
 * Security headers go on every response, errors included. CORS headers go only where a
 * browser asks for them (it always sends Origin cross-origin), which keeps the answers
 * to other clients small.
 */
export function baseHeaders(origin: string | undefined): HeaderMap {
  if (origin === undefined) return SECURITY_HEADERS;
  return {
    ...SECURITY_HEADERS,
    'access-control-allow-origin': origin,
    'access-control-expose-headers': EXPOSED_HEADERS,
    vary: 'Origin',
  };
}

/** baseHeaders with the request's id, for answers written without send(). */
export function answerHeaders(res: ServerResponse): HeaderMap {
  const requestId = requestIdOf(res);
  const base = baseHeaders(originOf(res));
  return requestId === undefined ? base : { ...base, 'x-request-id': requestId };
}

export const ALLOWED_METHODS = 'GET, HEAD, PUT, POST, DELETE, OPTIONS';
/** What a page of an allowed origin may send: a stream's methods, and PATCH of a bucket's settings (by an admin). */
export const CORS_METHODS = 'GET, HEAD, PUT, POST, PATCH, DELETE, OPTIONS';

/**
 * Answers with a status, headers and a body: a string, a buffer, or buffers written one
 * after another (a read window as its stored appends hold it, never joined into a copy).
 */
export function send(res: ServerResponse, status: number, headers: HeaderMap, body?: Buffer | string | readonly Buffer[]): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (Array.isArray(body)) return sendParts(res, status, headers, body);
  const payload = body === undefined ? undefined : typeof body === 'string' ? Buffer.from(body) : (body as Buffer);
  const all = withBaseHeaders(res, headers);
  if (status !== 204 && status !== 304) all['content-length'] = String(payload?.length ?? 0);
  res.writeHead(status, all);
  if (payload !== undefined && status !== 204 && status !== 304 && res.req.method !== 'HEAD') res.end(payload);
  else res.end();
}

/** The head of an answer whose body of `length` bytes is written after it. */
function writeHeadOfLength(res: ServerResponse, status: number, headers: HeaderMap, length: number): void {
  const all = withBaseHeaders(res, headers);
  all['content-length'] = String(length);
  res.writeHead(status, all);
}

function sendParts(res: ServerResponse, status: number, headers: HeaderMap, parts: readonly Buffer[]): void {
  if (parts.length === 1) return send(res, status, headers, parts[0]);
  let length = 0;
  for (const part of parts) length += part.length;
  writeHeadOfLength(res, status, headers, length);
  if (res.req.method === 'HEAD') return void res.end();
  // Corked: the head and every part leave in one writev.
  res.cork();
  for (const part of parts) res.write(part);
  res.end();
}

/**
 * A 200 answer of `length` bytes written as they load (reads.ts, streamData): its head
 * leaves with the first of them. What arrives in one turn of the event loop (one read of
 * PostgreSQL's socket) leaves in one writev at its end; nothing waits for more to arrive.
 */
export function bodyWriter(res: ServerResponse, headers: HeaderMap, length: number): { write: (bytes: Buffer) => void; end: () => void } {
  let started = false;
  let corked = false;
  const uncork = (): void => {
    corked = false;
    res.uncork();
  };
  const start = (): void => {
    started = true;
    writeHeadOfLength(res, 200, headers, length);
  };
  return {
    write: (bytes) => {
      if (res.destroyed) return;
      if (!started) start();
      if (!corked) {
        corked = true;
        res.cork();
        process.nextTick(uncork);
      }
      res.write(bytes);
    },
    end: () => {
      if (res.destroyed) return;
      if (!started) start();
      // end() uncorks whatever this turn wrote; the uncork to come finds nothing left.
      res.end();
    },
  };
}

/**
 * send() for an answer without a body whose header map was made for it alone (an
 * append's): the base headers and the request id join that map instead of all of them
 * being copied into a new one (about 2,000 instructions an append under callgrind), or,
 * when its head is made (writeMadeHead), join its folded lines.
 * The map must not name a base header (it would be replaced), and its names must be in
 * lower case, as every name of `H` is.
 */
export function sendOwnHeaders(res: ServerResponse, status: 200 | 204, headers: HeaderMap): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const origin = originOf(res);
  const requestId = requestIdOf(res);
  if (origin === undefined && writeMadeHead(res, status, headers, requestId)) return void res.end();
  Object.assign(headers, baseHeaders(origin));
  if (requestId !== undefined) headers['x-request-id'] = requestId;
  if (status !== 204) headers['content-length'] = '0';
  res.writeHead(status, headers);
  res.end();
}

/**
 * Node keeps what `res.setHeader` set in an own property of the response under its
 * internal symbol `kOutHeaders` (lower-cased name -> [name, value]), and `writeHead`
 * sends those without checking them again: setHeader checked each. Headers passed to
 * writeHead are checked there, each name and each value by a regular expression, which
 * cost about 5,600 instructions for a plain append's seven headers under callgrind
 * (7,500 for a producer append's ten). The headers of an append's answer are all made
 * by rill (constant names, offsets and counts in digits, an incarnation and a request id
 * of plain characters, constant tokens), so for it alone they are put where setHeader
 * would have put them (folded, see foldedLines), and writeHead writes the same bytes.
 * Nothing reads an answer's headers back once it is written.
 * Null when this Node keeps them otherwise (found by `madeHeadWorks`): answers then go
 * through writeHead's checks.
 */
let outHeadersKey: symbol | null | undefined;

function outHeadersKeyOf(res: ServerResponse): symbol | null {
  if (outHeadersKey === undefined) {
    const key = Object.getOwnPropertySymbols(res).find((symbol) => symbol.description === 'kOutHeaders');
    outHeadersKey = key !== undefined && madeHeadWorks(key) ? key : null;
  }
  return outHeadersKey;
}

/** Whether answers have been written with their headers made (for a test: the fast path must not fall back unnoticed). */
export function madeHeadsInUse(): boolean {
  return outHeadersKey !== undefined && outHeadersKey !== null;
}

/**
 * The prototype of a made header map: one with nothing to inherit, as Node's own
 * (`{ __proto__: null }`) has, so that no name finds a member of Object's. Not the null
 * prototype itself: V8 keeps an object made with that as a dictionary, which cost about
 * 2,000 instructions an answer (its rehashing, and for-in over its keys).
 */
const NO_MEMBERS: object = Object.freeze(Object.create(null));

/**
 * Whether headers put under `key` are answered as setHeader's are, and a folded value
 * (foldedLines) goes out as it is, on a response that goes nowhere.
 */
function madeHeadWorks(key: symbol): boolean {
  try {
    const probe = new ServerResponse(new IncomingMessage(new Socket()));
    const own = probe as unknown as Record<symbol, unknown>;
    if (own[key] !== null) return false;
    own[key] = { __proto__: null, 'x-probe': ['x-probe', '1'], 'x-folded': ['x-folded', '2\r\nx-line: 3'] };
    probe.writeHead(204);
    const head = (probe as unknown as { _header?: unknown })._header;
    return probe.getHeader('x-probe') === '1' && typeof head === 'string' && head.startsWith('HTTP/1.1 204 No Content\r\nx-probe: 1\r\nx-folded: 2\r\nx-line: 3\r\n');
  } catch {
    return false;
  }
}

/**
 * writeHead of an append's answer with its headers made (see outHeadersKey): `headers`,
 * then the security headers and the request id, as sendOwnHeaders would add them. False,
 * and nothing written, when this Node keeps headers otherwise, something already set one
 * on the response (Connection during a drain, HSTS, a preset Stream-Extensions), or
 * `headers` names one that Node reads.
 */
function writeMadeHead(res: ServerResponse, status: 200 | 204, headers: HeaderMap, requestId: string | undefined): boolean {
  const key = outHeadersKeyOf(res);
  if (key === null) return false;
  const own = res as unknown as Record<symbol, unknown>;
  if (own[key] !== null) return false;
  const folded = foldedLines(headers);
  if (folded === null) return false;
  const made = Object.create(NO_MEMBERS) as Record<string, [string, string]>;
  const [first, lines] = folded;
  made[first] = [first, requestId === undefined ? `${lines}${SECURITY_LINES}` : `${lines}${SECURITY_LINES}\r\nx-request-id: ${requestId}`];
  if (status !== 204) made['content-length'] = ['content-length', '0'];
  own[key] = made;
  res.writeHead(status);
  return true;
}

/**
 * Whether Node's writeHead looks for header `name` among those it writes (its
 * `matchHeader`). A switch: names are constants, so each case is one comparison of
 * pointers, where a Set's lookup cost about 65 instructions a name.
 */
function readByNode(name: string): boolean {
  switch (name) {
    case 'connection':
    case 'content-length':
    case 'date':
    case 'expect':
    case 'keep-alive':
    case 'trailer':
    case 'transfer-encoding':
      return true;
    default:
      return false;
  }
}

/**
 * `headers` as one entry of a made head: the first's name, and its value followed by
 * `\r\nname: value` for each of the others. Node writes an entry as `name: value\r\n`,
 * so the bytes are the same as with an entry each. Node spent about 450 instructions an
 * entry (lower-casing its name to look for the headers it reads, joining its line), and
 * making the entries about 150 more: a plain append's head, one entry instead of seven
 * (the security headers and the request id joined as lines made once, SECURITY_LINES),
 * took about 3,800 instructions fewer under callgrind (writeMadeHead 7,300 -> 3,500).
 * Null when `headers` is empty or names a header Node reads, which must stay an entry of
 * its own. `madeHeadWorks` checks that a folded value goes out as it is.
 */
function foldedLines(headers: HeaderMap): [string, string] | null {
  let first: string | null = null;
  let lines = '';
  for (const name in headers) {
    if (readByNode(name)) return null;
    const value = headers[name]!;
    if (first === null) {
      first = name;
      lines = value;
    } else {
      lines += `\r\n${name}: ${value}`;
    }
  }
  return first === null ? null : [first, lines];
}

/** The security headers as folded lines, each `\r\nname: value`, made once. */
const SECURITY_LINES = Object.entries(SECURITY_HEADERS)
  .map(([name, value]) => `\r\n${name}: ${value}`)
  .join('');

/**
 * A new map of the base headers (CORS, security), `headers` over them, and the request's
 * id. Object.assign, not object spread: spread copies here made V8 promote the header
 * objects of every response out of the young generation (measured with --trace-gc-nvp:
 * 0.5 MB promoted per scavenge on /healthz with spread, none with assign; 55k -> 73k/s).
 */
function withBaseHeaders(res: ServerResponse, headers: HeaderMap): HeaderMap {
  const all: HeaderMap = Object.assign({}, baseHeaders(originOf(res)), headers);
  const requestId = requestIdOf(res);
  if (requestId !== undefined) all['x-request-id'] = requestId;
  return all;
}

/** The request's Origin when it is allowed CORS headers (see BrowserPolicy). */
export function originOf(res: ServerResponse): string | undefined {
  return corsOriginOf(res.req);
}

export function errorHeaders(error: ProtocolError): HeaderMap {
  return error.fields ? errorFieldsToHeaders(error.fields) : {};
}

/** Every 401 names the scheme that would be accepted (RFC 6750); callers may add the error. */
const AUTH_CHALLENGE: HeaderMap = { 'www-authenticate': 'Bearer realm="rill"' };

/** Answers a refusal: its status, headers and `{code, message}` body (with `members` added, when given). */
export function sendError(res: ServerResponse, error: ProtocolError, extra: HeaderMap = {}, members: Record<string, unknown> = {}): void {
  const body = JSON.stringify({ code: error.code, message: error.message, ...members });
  const status = statusOf(error.code);
  send(
    res,
    status,
    Object.assign({ 'content-type': 'application/json', 'cache-control': 'no-store' }, status === 401 ? AUTH_CHALLENGE : {}, extra, errorHeaders(error)),
    body,
  );
}

export function sendJson(res: ServerResponse, status: number, value: unknown, headers: HeaderMap = {}): void {
  send(res, status, Object.assign({ 'content-type': 'application/json', 'cache-control': 'no-store' }, headers), JSON.stringify(value));
}

/** Refuses a request whose body was not read to the end: the connection cannot carry another request. */
export function sendBodyRefusal(res: ServerResponse, error: ProtocolError): void {
  res.setHeader('connection', 'close');
  sendError(res, error);
}
