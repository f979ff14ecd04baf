/**
 * A minimal HTTP client for tests over `node:http`: the path is sent exactly as given
 * (fetch would resolve `..` and `%2e%2e` segments before sending), bodies are bytes, and
 * no header is added that the test did not ask for.
 */
import { request } from 'node:http';
import { connect } from 'node:net';
import { expect } from 'vitest';
import { ERROR_STATUS, type ErrorCode } from '../../src/protocol/errors.js';

export interface Reply {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  text(): string;
  json(): unknown;
}

export interface CallOptions {
  headers?: Record<string, string>;
  body?: string | Buffer;
  timeoutMs?: number;
}

export function call(baseUrl: string, method: string, path: string, options: CallOptions = {}): Promise<Reply> {
  const { hostname, port } = new URL(baseUrl);
  const body = options.body === undefined ? undefined : Buffer.from(options.body);
  const headers: Record<string, string> = { ...options.headers };
  if (body !== undefined) headers['content-length'] = String(body.length);
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, method, path, headers, timeout: options.timeoutMs ?? 10_000 }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => {
        const flat: Record<string, string> = {};
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) flat[k] = Array.isArray(v) ? v.join(', ') : v;
        const data = Buffer.concat(parts);
        resolve({ status: res.statusCode!, headers: flat, body: data, text: () => data.toString('utf8'), json: () => JSON.parse(data.toString('utf8')) });
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.on('error', reject);
    req.end(body);
  });
}

/** Sends raw bytes on a fresh connection and answers everything the server wrote back. */
export function rawExchange(baseUrl: string, payload: string, timeoutMs = 5_000): Promise<string> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const parts: Buffer[] = [];
    const timer = setTimeout(() => socket.destroy(new Error('raw exchange timed out')), timeoutMs);
    socket.on('data', (d) => parts.push(d));
    socket.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(parts).toString('utf8'));
    });
    socket.write(payload);
  });
}

/** Asserts a refusal: its status is the one ERROR_STATUS maps its code to, and its body is `{code, message}` JSON. */
export function expectRefusal(reply: Reply, code: ErrorCode): void {
  const context = `${reply.status} ${reply.text()}`;
  expect(reply.headers['content-type'], context).toBe('application/json');
  const body = reply.json() as Record<string, unknown>;
  expect(Object.keys(body).sort(), context).toEqual(['code', 'message']);
  expect(body.code, context).toBe(code);
  expect(typeof body.message === 'string' && body.message.length > 0, context).toBe(true);
  expect(reply.status, context).toBe(ERROR_STATUS[code]);
}

/** 20-digit offsets, written here from the protocol's definition rather than imported. */
export function offset(position: number): string {
  return String(position).padStart(20, '0');
}

let counter = 0;
/** A name no other test in the run uses. */
export function unique(prefix: string): string {
  counter += 1;
  return `${prefix}-${process.pid.toString(36)}-${Date.now().toString(36)}-${counter}`;
}
