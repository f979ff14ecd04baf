/** Reading requests: headers, query parameters and size-limited bodies. */
import type { IncomingMessage } from 'node:http';
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import { H } from '../protocol/headers.js';

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
 * Three plain listeners ('on': each event fires once here, and 'once' wraps each in a
 * closure), none removed: an append took 500 fewer instructions under callgrind than
 * with four. 'close' before 'end' is an upload cut off: the client hung up, or its
 * socket failed. No 'error' listener is needed: IncomingMessage emits 'error' only to
 * listeners it has, and 'close' follows it.
 */
export function readBody(req: IncomingMessage, limit: number): Promise<BodyResult> {
  const declared = header(req, 'content-length');
  if (declared !== undefined && Number(declared) > limit) return Promise.resolve({ ok: false, error: tooLarge(limit) });
  return new Promise((resolve) => {
    const parts: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (result: BodyResult) => {
      if (done) return;
      done = true;
      resolve(result);
    };
    req.on('data', (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > limit) finish({ ok: false, error: tooLarge(limit) });
      else parts.push(chunk);
    });
    req.on('end', () => finish({ ok: true, body: parts.length === 1 ? parts[0]! : Buffer.concat(parts, size) }));
    req.on('close', () => finish({ ok: false, error: protocolError('BAD_REQUEST', 'the request body was cut off before its end') }));
  });
}

export type QueryResult = { ok: true; params: Map<string, string> } | { ok: false; error: ProtocolError };

/** Query parameters; a parameter given twice is refused, since its meaning would be ambiguous. */
export function parseQuery(search: string): QueryResult {
  const params = new Map<string, string>();
  for (const [key, value] of new URLSearchParams(search)) {
    if (params.has(key)) return { ok: false, error: protocolError('INVALID_QUERY', `query parameter "${key}" is given more than once`) };
    params.set(key, value);
  }
  return { ok: true, params };
}
