/**
 * An append's answer is written with its headers put where `res.setHeader` keeps them
 * (src/http/response.ts, `sendOwnHeaders`), which skips writeHead's checks of each name
 * and value. It must put the same bytes on the wire as writeHead with those headers, and
 * must be in use on the Node that runs the tests (else it would fall back unnoticed).
 */
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { madeHeadsInUse, sendOwnHeaders } from '../../src/http/response.js';

/** The answer's headers as an append's: receipt, producer and stream headers. */
function appendHeaders(): Record<string, string> {
  return {
    'stream-offset': '00000000000000000005',
    'stream-next-offset': '00000000000000000010',
    'producer-epoch': '3',
    'producer-seq': '17',
    'stream-incarnation': 'J5M-8sTHOKVjcmBA',
    'cache-control': 'no-store',
    'stream-extensions': 'records-v1',
  };
}

let server: Server;
let port = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    res.sendDate = false;
    const status = req.url === '/204' || req.url === '/checked-204' ? 204 : 200;
    if (req.url === '/set-before') res.setHeader('connection', 'close');
    if (req.url!.startsWith('/checked')) {
      const headers: Record<string, string> = { ...appendHeaders(), 'x-content-type-options': 'nosniff', 'cross-origin-resource-policy': 'cross-origin' };
      if (status !== 204) headers['content-length'] = '0';
      res.writeHead(status, headers);
      return void res.end();
    }
    sendOwnHeaders(res, status, appendHeaders());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as { port: number }).port;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

/** The raw bytes of the answer to one GET of `path`, on a connection of its own. */
function rawAnswer(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      text += chunk;
      if (text.includes('\r\n\r\n')) {
        socket.destroy();
        resolve(text);
      }
    });
    socket.on('error', reject);
    socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
  });
}

describe("an append's answer with its headers made", () => {
  it('is in use on this Node', async () => {
    await rawAnswer('/200');
    expect(madeHeadsInUse()).toBe(true);
  });

  it('puts the same bytes on the wire as writeHead with the same headers, 200 and 204', async () => {
    for (const status of ['200', '204']) {
      const made = await rawAnswer(`/${status}`);
      expect(made).toBe(await rawAnswer(`/checked-${status}`));
      expect(made).toContain('\r\nstream-offset: 00000000000000000005\r\nstream-next-offset: 00000000000000000010\r\n');
    }
  });

  it('keeps a header set before it, through writeHead', async () => {
    const answer = await rawAnswer('/set-before');
    expect(answer).toContain('\r\nconnection: close\r\n');
    expect(answer).toContain('\r\nx-content-type-options: nosniff\r\n');
  });
});
