/**
 * One webhook delivery attempt against a real receiver on 127.0.0.1 (with the development
 * setting): what is sent, how each kind of answer is told, what is never followed or read
 * whole, and that private destinations are refused before any connection is made.
 */
import { execFileSync } from 'node:child_process';
import { lookup } from 'node:dns/promises';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { isForbiddenAddress } from '../../src/core/webhook-url.js';
import { sendWebhook, type WebhookAttempt } from '../../src/subscriptions/sender.js';
import { EVENT_TIMEOUT_MS, within } from '../helpers/processing.js';

interface Received {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
}

const received: Received[] = [];
/** The receiver's side of the last request, and when the sender closed its connection. */
let lastAnswer: { res: ServerResponse; senderLeft: Promise<void> } | undefined;
let connections = 0;
let base = '';
let port = 0;

/** What the receiver answers, by path. */
const ROUTES: Record<string, (res: ServerResponse) => void> = {
  '/done': (res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"done": true}'),
  '/not-done': (res) => res.writeHead(202, { 'content-type': 'application/json' }).end('{"done": false}'),
  '/empty': (res) => res.writeHead(204).end(),
  '/text-done': (res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('done: true'),
  '/fail': (res) => res.writeHead(500).end('{"done": true}'),
  '/redirect': (res) => res.writeHead(302, { location: '/done' }).end(),
  '/silent': () => {},
  '/slow-body': (res) => res.writeHead(200, { 'content-type': 'application/json' }).write('{"done": '),
  // Were it read whole, this would be done.
  '/huge': (res) => res.writeHead(200, { 'content-type': 'application/json' }).end(`{"done": true, "pad": "${'x'.repeat(1 << 20)}"}`),
};

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    received.push({ method: req.method!, path: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
    lastAnswer = { res, senderLeft: new Promise((resolve) => res.once('close', () => resolve())) };
    ROUTES[new URL(req.url!, 'http://x').pathname]!(res);
  });
});
server.on('connection', () => connections++);

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});
beforeEach(() => {
  received.length = 0;
  connections = 0;
});

const BODY = JSON.stringify({ subscription_id: 'orders', wake_id: 'w_1', streams: [{ path: 'événements/1' }] });
const send = (url: string, more: Partial<WebhookAttempt> = {}) =>
  sendWebhook({ url, rawBody: BODY, signature: 't=1,kid=ds_k,ed25519=sig', deliveryId: 'w_1', timeoutMs: 2000, allowLocalhost: true, ...more });

describe('sendWebhook', () => {
  test('POSTs the body as signed, with its content type, signature and user agent', async () => {
    expect(await send(`${base}/done?x=1`)).toEqual({ kind: 'done' });
    expect(received).toEqual([
      {
        method: 'POST',
        path: '/done?x=1',
        headers: expect.objectContaining({ 'content-type': 'application/json', 'webhook-signature': 't=1,kid=ds_k,ed25519=sig', 'webhook-id': 'w_1', 'user-agent': 'rill', 'content-length': String(Buffer.byteLength(BODY)) }),
        body: BODY,
      },
    ]);
  });

  test('a 2xx is done only with a JSON body {"done": true}; any other 2xx is accepted', async () => {
    expect(await send(`${base}/not-done`)).toEqual({ kind: 'accepted' });
    expect(await send(`${base}/empty`)).toEqual({ kind: 'accepted' });
    expect(await send(`${base}/text-done`)).toEqual({ kind: 'accepted' });
    expect(await send(`http://localhost:${port}/done`)).toEqual({ kind: 'done' }); // a name, through the checked lookup
  });

  test('a 5xx fails; a redirect fails and is not followed', async () => {
    expect(await send(`${base}/fail`)).toEqual({ kind: 'failed', error: 'HTTP 500' });
    expect(await send(`${base}/redirect`)).toEqual({ kind: 'failed', error: 'redirect not followed (HTTP 302)' });
    expect(received.map((r) => r.path)).toEqual(['/fail', '/redirect']);
  });

  test('an endpoint that does not answer in time fails; one that answered 2xx but not finished its body was accepted', async () => {
    // Each time the sender gives up by itself, on its timer: it closes the connection while
    // the receiver, which would hold it forever, has not finished its answer.
    expect(await send(`${base}/silent`, { timeoutMs: 150 })).toEqual({ kind: 'failed', error: 'timed out after 150 ms' });
    await within(lastAnswer!.senderLeft, EVENT_TIMEOUT_MS, 'the sender closing the connection');
    expect([lastAnswer!.res.headersSent, lastAnswer!.res.writableEnded]).toEqual([false, false]);
    expect(await send(`${base}/slow-body`, { timeoutMs: 150 })).toEqual({ kind: 'accepted' });
    await within(lastAnswer!.senderLeft, EVENT_TIMEOUT_MS, 'the sender closing the connection');
    expect([lastAnswer!.res.headersSent, lastAnswer!.res.writableEnded]).toEqual([true, false]);
  });

  test('reads at most maxResponseBytes of an answer: more is accepted, not read whole', async () => {
    expect(await send(`${base}/huge`)).toEqual({ kind: 'accepted' });
    expect(await send(`${base}/huge`, { maxResponseBytes: 2 << 20 })).toEqual({ kind: 'done' });
    expect(await send(`${base}/done`, { maxResponseBytes: 5 })).toEqual({ kind: 'accepted' });
  });

  test('over https, a certificate the system does not trust fails the attempt before anything is sent', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rill-webhook-tls-'));
    try {
      execFileSync('openssl', [
        'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
        '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
      ], { stdio: 'ignore' });
      let requests = 0;
      const tls = createHttpsServer({ key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) }, (_req, res) => {
        requests++;
        res.end('{"done": true}');
      });
      await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve));
      const result = await send(`https://localhost:${(tls.address() as AddressInfo).port}/done`);
      tls.closeAllConnections();
      await new Promise((resolve) => tls.close(resolve));
      expect(result).toEqual({ kind: 'failed', error: expect.stringMatching(/self[- ]signed certificate/) });
      expect(requests).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a closed port or a missing host fails with a short reason', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const refused = await send(`http://127.0.0.1:${closedPort}/done`);
    expect(refused).toEqual({ kind: 'failed', error: expect.stringContaining('ECONNREFUSED') });
    const missing = await send('https://no-such-host.invalid/hook', { allowLocalhost: false });
    expect(missing).toEqual({ kind: 'failed', error: expect.stringMatching(/ENOTFOUND|EAI_AGAIN/) });
  });
});

describe('sendWebhook refuses private destinations before connecting', () => {
  test('URLs the check refuses: loopback without the development setting, private addresses with it', async () => {
    expect(await send(`${base}/done`, { allowLocalhost: false })).toEqual({ kind: 'failed', error: 'refused: the webhook URL must use https; a server started with --webhook-allow-localhost (development only) calls localhost, over http too' });
    expect(await send(`https://127.0.0.1:${port}/done`, { allowLocalhost: false })).toEqual({ kind: 'failed', error: 'refused: the webhook URL\'s host 127.0.0.1 is not a public address; a server started with --webhook-allow-localhost (development only) calls localhost, over http too' });
    expect(await send(`https://localhost:${port}/done`, { allowLocalhost: false })).toEqual({ kind: 'failed', error: 'refused: the webhook URL\'s host localhost is local; a server started with --webhook-allow-localhost (development only) calls localhost, over http too' });
    expect(await send('https://10.0.0.1/hook')).toEqual({ kind: 'failed', error: 'refused: the webhook URL\'s host 10.0.0.1 is not a public address' });
    expect(connections).toBe(0);
  });

  test('a name that resolves to a non-public address is refused at connect time', async () => {
    // A name other than localhost that this machine resolves to loopback (or, in a container, a private address).
    const candidates = [hostname(), 'ip6-localhost', 'ip6-loopback', 'localhost.localdomain'];
    let name: string | undefined;
    for (const candidate of candidates) {
      const addresses = await lookup(candidate, { all: true }).catch(() => []);
      if (addresses.length > 0 && addresses.every((a) => isForbiddenAddress(a.address, false))) {
        name = candidate;
        break;
      }
    }
    expect(name, `one of ${candidates.join(', ')} resolves to a non-public address`).toBeDefined();
    const result = await send(`https://${name}:${port}/done`, { allowLocalhost: false });
    expect(result).toEqual({ kind: 'failed', error: expect.stringMatching(new RegExp(`^refused: ${name} resolves to .*, which is not a public address$`)) });
    // With the development setting, http to that name is still refused: it is not a localhost name.
    expect(await send(`http://${name}:${port}/done`)).toEqual({ kind: 'failed', error: 'refused: the webhook URL must use https unless its host is localhost' });
    expect(connections).toBe(0);
  });
});
