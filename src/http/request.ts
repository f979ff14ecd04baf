/** Reading requests: headers, query parameters and size-limited bodies. */
import type { IncomingMessage } from 'node:http';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import { H } from '../protocol/headers.js';
import { frameJsonBody, JsonFramer, type JsonFrameResult } from '../protocol/json.js';

export function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  if (Array.isArray(value)) return value.join(', ');
  return value;
}

/** The Stream-Incarnation a request names, or null. */
export function incarnationOf(req: IncomingMessage): string | null {
  return header(req, H.streamIncarnation) ?? null;
}

export type BodyResult = { ok: true; body: Buffer } | { ok: false; error: ProtocolError };

function tooLarge(limit: number): ProtocolError {
  return protocolError('PAYLOAD_TOO_LARGE', `the body is larger than ${limit} bytes`);
}

/**
 * Reads the whole body, refusing it as soon as it passes `limit` bytes. On a refusal
 * the rest of the upload is not read; the caller answers and closes the connection.
 *
 * Plain listeners ('on': each event fires once here, and 'once' wraps each in a
 * closure), none removed: an append took 500 fewer instructions under callgrind than
 * with four. With a declared length there are two, 'data' and 'close', since the last
 * declared byte ends the read (700 fewer than with 'end' too); without one, 'end' ends it.
 * 'close' before the end is an upload cut off: the client hung up, or its socket
 * failed. No 'error' listener is needed: IncomingMessage emits 'error' only to
 * listeners it has, and 'close' follows it.
 */
export function readBody(req: IncomingMessage, limit: number): Promise<BodyResult> {
  const declared = header(req, 'content-length');
  const declaredBytes = declared === undefined ? NaN : Number(declared);
  if (declaredBytes > limit) return Promise.resolve({ ok: false, error: tooLarge(limit) });
  return new Promise((resolve) => {
    const body = new BodyParts(Number.isSafeInteger(declaredBytes) ? declaredBytes : null);
    let done = false;
    const finish = (result: BodyResult) => {
      if (done) return;
      done = true;
      resolve(result);
    };
    // A declared length is the whole body: Node's parser passes on no more, and ends the
    // request with its last byte.
    const wholeBytes = Number.isSafeInteger(declaredBytes) && declaredBytes > 0 ? declaredBytes : -1;
    req.on('data', (chunk: Buffer) => {
      if (done) return;
      if (body.size + chunk.length > limit) return finish({ ok: false, error: tooLarge(limit) });
      body.add(chunk);
      if (body.size === wholeBytes) finish({ ok: true, body: body.whole() });
    });
    if (wholeBytes < 0) req.on('end', () => finish({ ok: true, body: body.whole() }));
    req.on('close', () => finish({ ok: false, error: protocolError('BAD_REQUEST', 'the request body was cut off before its end') }));
  });
}

/** Bodies up to this size are gathered as chunks and joined at the end. */
const JOIN_AT_END_BYTES = 64 * 1024;

/**
 * A body as it arrives. A large body with a declared length is copied chunk by chunk
 * into one buffer of that length, so it is held once and no single event-loop turn
 * copies all of it (joining 32 MiB at the end blocked the loop for tens of ms).
 */
class BodyParts {
  size = 0;
  private parts: Buffer[] = [];
  private preallocated: Buffer | null;

  constructor(declaredBytes: number | null) {
    this.preallocated = declaredBytes !== null && declaredBytes > JOIN_AT_END_BYTES ? Buffer.allocUnsafe(declaredBytes) : null;
  }

  add(chunk: Buffer): void {
    const target = this.preallocated;
    if (target !== null && this.size + chunk.length > target.length) {
      // More than declared (Node's parser does not let this happen): gather chunks instead.
      this.parts = [target.subarray(0, this.size)];
      this.preallocated = null;
    }
    if (this.preallocated !== null) chunk.copy(this.preallocated, this.size);
    else this.parts.push(chunk);
    this.size += chunk.length;
  }

  whole(): Buffer {
    if (this.preallocated !== null) return this.preallocated.subarray(0, this.size);
    return this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts, this.size);
  }
}

/** JSON bodies larger than this are framed in slices, one per turn of the event loop. */
const JSON_SLICE_BYTES = 32 * 1024;
/** How long one slice of a large body's framing may hold the event loop. */
const JSON_SLICE_MS = 2;
/** Bytes framed between looks at the clock. */
const JSON_STEP_BYTES = 4096;

/**
 * Frames a JSON body (src/protocol/json.ts): at once when small, else in slices of about
 * 2 ms between which the server answers other requests. Slices are measured in time,
 * not bytes: the first bodies a server frames run before V8 has optimised the framer,
 * about ten times slower than later ones.
 */
export function frameJson(body: Uint8Array, flatten: boolean, maxMessages: number): JsonFrameResult | Promise<JsonFrameResult> {
  if (body.length <= JSON_SLICE_BYTES) return frameJsonBody(body, flatten, maxMessages);
  return frameJsonInSlices(new JsonFramer(body, flatten, maxMessages));
}

async function frameJsonInSlices(framer: JsonFramer): Promise<JsonFrameResult> {
  for (;;) {
    const sliceEndMs = performance.now() + JSON_SLICE_MS;
    do if (framer.step(JSON_STEP_BYTES)) return framer.result();
    while (performance.now() < sliceEndMs);
    await nextTurn();
  }
}

export type QueryResult = { ok: true; params: Map<string, string> } | { ok: false; error: ProtocolError };

/**
 * Whether the decoded query may hold parameter `name`: false only when it cannot, so a
 * caller may skip parsing. A name may arrive percent-encoded (`%6Cive` is `live`), and
 * handlers decode it, so any `%` means it may.
 */
export function mayHoldParam(search: string, name: string): boolean {
  return search.includes(name) || search.includes('%');
}

/** Whether the query asks for parameter `name`, decoded as the handlers decode it (parseQuery). */
export function asksParam(search: string, name: string): boolean {
  if (!mayHoldParam(search, name)) return false;
  const query = parseQuery(search);
  // A query the handler will refuse (a repeated parameter) still counts until its answer closes.
  return query.ok ? query.params.has(name) : new URLSearchParams(search).has(name);
}

/** Query parameters; a parameter given twice is refused, since its meaning would be ambiguous. */
export function parseQuery(search: string): QueryResult {
  const params = new Map<string, string>();
  for (const [key, value] of new URLSearchParams(search)) {
    if (params.has(key)) return { ok: false, error: protocolError('INVALID_QUERY', `query parameter "${key}" is given more than once`) };
    params.set(key, value);
  }
  return { ok: true, params };
}
