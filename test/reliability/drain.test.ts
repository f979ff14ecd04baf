/**
 * SIGTERM drains the real server process: it stops accepting connections, finishes the
 * writes in flight, ends live readers (long-poll answers, SSE ends), exits 0, and loses
 * nothing it acknowledged. A client that stops reading cannot hold the shutdown.
 *
 * What happens is judged by its order (the readers are ended while a write is still in
 * flight; the process exits after it is answered), never by how long it took: the drain's
 * times are `npm run bench` figures (the `drain` workload, docs/performance.md).
 */
import { once } from 'node:events';
import { Agent, get, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { writeInFlight } from '../../bench/workloads/probes.js';
import { removeDir, startServer, type ServerProcess } from '../helpers/server.js';
import { until, untilLiveReaders } from '../helpers/waits.js';
import { openSocket, readIncoming } from './net.js';

let server: ServerProcess | undefined;
const dirs: string[] = [];

afterEach(async () => {
  if (server && server.child.exitCode === null && server.child.signalCode === null) await server.kill();
  server = undefined;
  for (const dir of dirs.splice(0)) removeDir(dir);
});

/** Far past any drain here: a process still running then was held by something the drain should have ended. */
const EXIT_LIMIT_MS = 20_000;

function exitOf(s: ServerProcess): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`rill did not exit within ${EXIT_LIMIT_MS} ms of SIGTERM`)), EXIT_LIMIT_MS);
    s.child.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
  });
}


/** A connection sending `head` whose answer has begun to arrive, and which then reads no more. */
async function stalledReader(port: number, head: string): Promise<Socket> {
  const socket = await openSocket(port);
  socket.write(head);
  await once(socket, 'readable');
  return socket;
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
    // Live waits longer than the test: only the drain can end them.
    server = await startServer({ process: true, args: ['--long-poll-timeout', '10m', '--max-long-poll-timeout', '10m', '--sse-lifetime', '10m'] });
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
    // A write in flight on a keep-alive connection: its head is read, its body is not all sent.
    const upload = await writeInFlight(stream, { 'content-type': 'text/plain', 'content-length': '9' }, 'in-', keepAlive);
    await untilLiveReaders(s.url, 'long_poll', 1);

    const exited = exitOf(s);
    s.child.kill('SIGTERM');
    // The drain ends both readers at once, while the write is still in flight and the process up.
    expect((await longPoll).status).toBe(204);
    expect(await sseText).toContain('event: control');
    expect(await connectRefused(s.port)).toBe(true);
    expect(s.child.exitCode).toBeNull();

    upload.req.end('flight');
    const answer = await upload.response;
    expect(answer.statusCode).toBe(204);
    // Told to close: a keep-alive client cannot hold the process up with its connection.
    expect(answer.headers.connection).toBe('close');
    expect(await exited).toBe(0);
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
    // Readers that stop reading once their answers begin, far behind: a catch-up read and an SSE tail.
    const stalled = [];
    for (const query of ['offset=-1&max_bytes=8388608', 'offset=-1&live=sse']) {
      stalled.push(await stalledReader(s.port, `GET /v1/stream/big?${query} HTTP/1.1\r\nHost: localhost\r\n\r\n`));
    }
    // A writer that stops sending half way through its body.
    const upload = await writeInFlight(stream, { ...binary, 'content-length': '100' }, 'half');
    const exited = exitOf(s);
    s.child.kill('SIGTERM');
    // Without the drain timeout none of them would ever let go: the exit is the timeout's doing.
    expect(await exited).toBe(0);
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
    s.child.kill('SIGTERM');
    // The signal is handled when it is handled: /readyz says so.
    let ready!: Response;
    await until(async () => (ready = await fetch(`${s.url}/readyz`)).status !== 200, '/readyz answering 503');
    expect([ready.status, await ready.json(), ready.headers.get('retry-after')]).toEqual([503, { status: 'draining' }, '1']);
    // Still serving everything while the load balancer takes it out of rotation.
    expect((await fetch(stream, { method: 'POST', headers: text, body: 'late;' })).status).toBe(204);
    expect(await (await fetch(`${stream}?offset=-1`)).text()).toBe('late;');
    expect((await fetch(`${s.url}/healthz`)).status).toBe(200);
    expect(s.child.exitCode).toBeNull();
    expect(await exited).toBe(0);
    expect(await connectRefused(s.port)).toBe(true);
    server = await startServer({ process: true, dataDir: s.dataDir });
    expect(await (await fetch(`${server.url}/v1/stream/leaving?offset=-1`)).text()).toBe('late;');
    expect(await server.stop()).toBe(0);
  });
});
