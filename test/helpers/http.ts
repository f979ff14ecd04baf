/** Small HTTP helpers for tests that talk to a real server. */
import { parseMultipart } from '@remix-run/multipart-parser';

export interface Reply {
  status: number;
  headers: Headers;
  body: Buffer;
  text: string;
  /** Parsed JSON body, when it is JSON. */
  json: unknown;
}

export async function call(url: string, init: RequestInit = {}): Promise<Reply> {
  const res = await fetch(url, { redirect: 'manual', ...init });
  const body = Buffer.from(await res.arrayBuffer());
  const text = body.toString('utf8');
  let json: unknown = undefined;
  if ((res.headers.get('content-type') ?? '').includes('json')) {
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
  }
  return { status: res.status, headers: res.headers, body, text, json };
}

/** Bodies: strings, or bytes (Buffers are sent as their bytes). */
export type Body = string | Uint8Array;

const asBody = (body: Body | undefined): BodyInit | undefined => (body instanceof Uint8Array ? new Uint8Array(body) : body);

export const put = (url: string, body?: Body, headers: Record<string, string> = {}) => call(url, { method: 'PUT', body: asBody(body), headers });
export const post = (url: string, body?: Body, headers: Record<string, string> = {}) => call(url, { method: 'POST', body: asBody(body), headers });
export const get = (url: string, headers: Record<string, string> = {}) => call(url, { headers });
export const head = (url: string, headers: Record<string, string> = {}) => call(url, { method: 'HEAD', headers });
export const del = (url: string, headers: Record<string, string> = {}) => call(url, { method: 'DELETE', headers });

/** The error code of a refusal, asserting the body is the JSON error shape. */
export function errorCode(reply: Reply): string {
  const body = reply.json as { code?: unknown; message?: unknown } | undefined;
  if (!body || typeof body.code !== 'string' || typeof body.message !== 'string') {
    throw new Error(`expected a JSON error body, got ${reply.status} ${reply.text}`);
  }
  return body.code;
}

export interface BootstrapPart {
  contentType: string;
  body: Buffer;
}

/** Splits a multipart/mixed bootstrap answer into its parts. */
export function bootstrapParts(reply: Reply): BootstrapPart[] {
  const type = reply.headers.get('content-type') ?? '';
  const match = /boundary=([^;]+)/.exec(type);
  if (!type.startsWith('multipart/mixed') || !match) throw new Error(`not multipart/mixed: ${type}`);
  const parts: BootstrapPart[] = [];
  for (const part of parseMultipart(new Uint8Array(reply.body), { boundary: match[1]! })) {
    parts.push({ contentType: part.headers['content-type'] ?? '', body: Buffer.from(part.bytes) });
  }
  return parts;
}

/** Reads a stream from `offset` to its tail with catch-up reads; returns bytes and the final offset. */
export async function readAll(url: string, offset = '-1', maxBytes?: number): Promise<{ body: Buffer; next: string }> {
  const parts: Buffer[] = [];
  let next = offset;
  for (let i = 0; i < 10_000; i++) {
    const res = await call(`${url}?offset=${next}${maxBytes ? `&max_bytes=${maxBytes}` : ''}`, {
      headers: { accept: 'application/x-ndjson' },
    });
    if (res.status !== 200) throw new Error(`read ${url} at ${next}: ${res.status} ${res.text}`);
    parts.push(res.body);
    next = res.headers.get('stream-next-offset')!;
    if (res.headers.get('stream-up-to-date') === 'true') return { body: Buffer.concat(parts), next };
  }
  throw new Error('readAll did not reach the tail');
}

/** Length-prefixed frames for append-batch. */
export function frames(...payloads: Array<string | Buffer>): Buffer {
  const out: Buffer[] = [];
  for (const payload of payloads) {
    const bytes = typeof payload === 'string' ? Buffer.from(payload) : payload;
    const length = Buffer.alloc(4);
    length.writeUInt32BE(bytes.length);
    out.push(length, bytes);
  }
  return Buffer.concat(out);
}

export const offset = (n: number) => String(n).padStart(20, '0');
