/**
 * readBody against a real node:http server and raw client sockets: a whole body, one
 * streamed past the limit, and an upload the client cuts off. Each must settle: a body
 * read that never settles would hold its handler (and its request) forever.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { readBody, type BodyResult } from '../../src/http/request.js';
import { openSocket } from '../reliability/net.js';

let server: Server | null = null;

afterEach(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = null;
});

/** A server whose handler reads each body with `limit` and hands the result to the test. */
async function serveReads(limit: number): Promise<{ port: number; next: () => Promise<BodyResult> }> {
  const results: BodyResult[] = [];
  const waiting: Array<(r: BodyResult) => void> = [];
  server = createServer((req, res) => {
    void readBody(req, limit).then((result) => {
      const waiter = waiting.shift();
      if (waiter) waiter(result);
      else results.push(result);
      if (!res.destroyed) res.writeHead(result.ok ? 204 : 400, { connection: 'close' }).end();
    });
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const next = () => {
    const ready = results.shift();
    if (ready) return Promise.resolve(ready);
    return new Promise<BodyResult>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the body read did not settle within 3 s')), 3_000);
      waiting.push((r) => {
        clearTimeout(timer);
        resolve(r);
      });
    });
  };
  return { port, next };
}

const head = (length: number) => `POST /x HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\nContent-Length: ${length}\r\n\r\n`;

describe('readBody', () => {
  it('reads a body sent in pieces, whole and in order', async () => {
    const { port, next } = await serveReads(1024);
    const socket = await openSocket(port);
    socket.write(head(10) + 'abcd');
    await new Promise((r) => setTimeout(r, 50));
    socket.write('efghij');
    const result = await next();
    socket.destroy();
    expect(result.ok && result.body.toString()).toBe('abcdefghij');
  });

  it('refuses a body streamed past the limit without a declared length', async () => {
    const { port, next } = await serveReads(8);
    const socket = await openSocket(port);
    socket.write('POST /x HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n5\r\nfghij\r\n0\r\n\r\n');
    const result = await next();
    socket.destroy();
    expect(result.ok).toBe(false);
    expect(!result.ok && result.error.code).toBe('PAYLOAD_TOO_LARGE');
  });

  it('settles with a refusal when the client hangs up before the end of its body', async () => {
    const { port, next } = await serveReads(1024);
    const socket = await openSocket(port);
    socket.write(head(100) + 'only part of it');
    await new Promise((r) => setTimeout(r, 50));
    socket.destroy();
    const result = await next();
    expect(result.ok).toBe(false);
    expect(!result.ok && result.error.code).toBe('BAD_REQUEST');
  });
});
