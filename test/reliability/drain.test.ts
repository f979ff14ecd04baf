/**
 * SIGTERM drains the real server process: it stops accepting connections, finishes the
 * writes in flight, ends live readers (long-poll answers, SSE ends), exits 0, and loses
 * nothing it acknowledged. A client that stops reading cannot hold the shutdown.
 */
import { Agent, get, type IncomingMessage } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { removeDir, startServer, type ServerProcess } from '../helpers/server.js';
import { sleep } from './checks.js';
import { collect, openSocket, readIncoming, startUpload } from './net.js';

let server: ServerProcess | undefined;
const dirs: string[] = [];

afterEach(async () => {
  if (server && server.child.exitCode === null && server.child.signalCode === null) await server.kill();
  server = undefined;
  for (const dir of dirs.splice(0)) removeDir(dir);
});

function exitOf(s: ServerProcess): Promise<{ code: number | null; atMs: number }> {
  return new Promise((resolve) => s.child.once('exit', (code) => resolve({ code, atMs: Date.now() })));
}

function getStream(url: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => get(url, resolve).once('error', reject));
}

async function connectRefused(port: number): Promise<boolean> {
  try {
    (await openSocket(port)).destroy();
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ECONNREFUSED';
  }
}

describe('SIGTERM', () => {
  it('stops accepting, finishes in-flight writes, ends live readers, exits 0 and keeps every acknowledged write', async () => {
    server = await startServer({ process: true, args: ['--long-poll-timeout', '30s', '--sse-lifetime', '60s'] });
    const s = server;
    dirs.push(s.dataDir);
    const stream = `${s.url}/v1/stream/drain`;
    expect((await fetch(stream, { method: 'PUT', headers: { 'content-type': 'text/plain' } })).status).toBe(201);
    let expected = '';
    for (let i = 0; i < 20; i++) {
      const res = await fetch(stream, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: `w${i};` });
      expect(res.status).toBe(204);
      expected += `w${i};`;
    }
    const tail = (await fetch(stream, { method: 'HEAD' })).headers.get('stream-next-offset')!;

    const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 });
    const longPoll = fetch(`${stream}?offset=${tail}&live=long-poll`);
    const sse = await getStream(`${stream}?offset=${tail}&live=sse`);
    const sseText = readIncoming(sse);
    // A write in flight on a keep-alive connection: its head is sent, its body is not.
    const upload = startUpload(stream, { 'content-type': 'text/plain', 'content-length': '9' }, 'in-', keepAlive);
    await sleep(300);

    const exited = exitOf(s);
    const termAt = Date.now();
    s.child.kill('SIGTERM');
    const poll = await longPoll;
    // Both were set to wait 30 s or more; the drain ends them at once.
    expect(poll.status).toBe(204);
    expect(Date.now() - termAt).toBeLessThan(4_000);
    expect(await sseText).toContain('event: control');
    expect(Date.now() - termAt).toBeLessThan(4_000);
    expect(await connectRefused(s.port)).toBe(true);

    upload.req.end('flight');
    const answer = await upload.response;
    expect(answer.statusCode).toBe(204);
    expect(answer.headers.connection).toBe('close');
    const finishedAt = Date.now();
    const { code, atMs } = await exited;
    expect(code).toBe(0);
    // Nothing (an idle keep-alive socket included) holds the process once work is done;
    // an idle keep-alive socket alone would hold it for the 5 s keep-alive timeout.
    expect(atMs - finishedAt).toBeLessThan(3_500);
    keepAlive.destroy();

    server = await startServer({ process: true, dataDir: s.dataDir });
    const after = await fetch(`${server.url}/v1/stream/drain?offset=-1`);
    expect(await after.text()).toBe(`${expected}in-flight`);
    expect(await server.stop()).toBe(0);
  });

  it('does not let stalled clients hold the shutdown past the drain timeout, and still exits 0', async () => {
    server = await startServer({ process: true, args: ['--drain-timeout', '1s', '--sse-lifetime', '60s', '--sse-heartbeat', '30s'] });
    const s = server;
    dirs.push(s.dataDir);
    const stream = `${s.url}/v1/stream/big`;
    const binary = { 'content-type': 'application/octet-stream' };
    expect((await fetch(stream, { method: 'PUT', headers: binary })).status).toBe(201);
    const chunk = Buffer.alloc(2 * 1024 * 1024, 7);
    for (let i = 0; i < 8; i++) expect((await fetch(stream, { method: 'POST', headers: binary, body: chunk })).status).toBe(204);
    // Readers that never read, far behind: a catch-up read and an SSE tail.
    const stalled = [];
    for (const query of ['offset=-1&max_bytes=8388608', 'offset=-1&live=sse']) {
      const socket = await openSocket(s.port);
      socket.write(`GET /v1/stream/big?${query} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
      socket.pause();
      stalled.push(socket);
    }
    // A writer that stops sending half way through its body.
    const upload = startUpload(stream, { ...binary, 'content-length': '100' }, 'half');
    await sleep(500);
    const exited = exitOf(s);
    const termAt = Date.now();
    s.child.kill('SIGTERM');
    const { code, atMs } = await exited;
    expect(code).toBe(0);
    expect(atMs - termAt).toBeGreaterThanOrEqual(900);
    expect(atMs - termAt).toBeLessThan(6_000);
    for (const socket of stalled) socket.destroy();
    upload.req.destroy();

    // The unfinished write was never acknowledged, and nothing of it was applied.
    server = await startServer({ process: true, dataDir: s.dataDir });
    const head = await fetch(`${server.url}/v1/stream/big`, { method: 'HEAD' });
    expect(Number(head.headers.get('stream-next-offset'))).toBe(8 * chunk.length);
    expect(await server.stop()).toBe(0);
  });

  it('with --shutdown-delay, answers /readyz 503 "draining" while it goes on serving reads and writes, then drains and exits 0', async () => {
    // Long enough for a loaded machine to answer the requests below inside the delay.
    server = await startServer({ process: true, args: ['--shutdown-delay', '3s'] });
    const s = server;
    dirs.push(s.dataDir);
    const stream = `${s.url}/v1/stream/leaving`;
    const text = { 'content-type': 'text/plain' };
    expect((await fetch(stream, { method: 'PUT', headers: text })).status).toBe(201);
    expect((await fetch(`${s.url}/readyz`)).status).toBe(200);
    const exited = exitOf(s);
    const termAt = Date.now();
    s.child.kill('SIGTERM');
    let ready = await fetch(`${s.url}/readyz`);
    for (let i = 0; i < 75 && ready.status === 200; i++) {
      await sleep(20);
      ready = await fetch(`${s.url}/readyz`);
    }
    expect([ready.status, await ready.json(), ready.headers.get('retry-after')]).toEqual([503, { status: 'draining' }, '1']);
    // Still serving everything while the load balancer takes it out of rotation.
    expect((await fetch(stream, { method: 'POST', headers: text, body: 'late;' })).status).toBe(204);
    expect(await (await fetch(`${stream}?offset=-1`)).text()).toBe('late;');
    expect((await fetch(`${s.url}/healthz`)).status).toBe(200);
    const { code, atMs } = await exited;
    expect(code).toBe(0);
    expect(atMs - termAt).toBeGreaterThanOrEqual(2_900);
    expect(await connectRefused(s.port)).toBe(true);
    server = await startServer({ process: true, dataDir: s.dataDir });
    expect(await (await fetch(`${server.url}/v1/stream/leaving?offset=-1`)).text()).toBe('late;');
    expect(await server.stop()).toBe(0);
  });
});
