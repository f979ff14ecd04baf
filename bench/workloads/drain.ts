/**
 * The drain workload: how long rill's SIGTERM drain takes, the figures
 * test/reliability/drain.test.ts once bounded, each on a fresh rill process (SQLite).
 *
 *  - Live readers ended: from SIGTERM until a long-poll and an SSE reader, both set to wait
 *    ten minutes, have their answers ended (test bound: 4 s).
 *  - Exit once work is done: from the answer to a write that was in flight at SIGTERM to the
 *    process's exit, with an idle keep-alive connection open (test bound: 3.5 s; an idle
 *    keep-alive connection alone would hold it for the 5 s keep-alive timeout).
 *  - Exit past stalled clients: from SIGTERM to exit with --drain-timeout 1s while a catch-up
 *    reader and an SSE reader never read and a writer never finishes (test bound: 0.9-6 s).
 *  - Exit after --shutdown-delay 1s, idle (test: at least 2.9 s of a 3 s delay).
 */
import { connect, type Socket } from 'node:net';
import { append, createStream } from '../http.js';
import type { Running } from '../targets.js';
import type { StartRill } from './floods.js';
import { liveReaders, until, writeInFlight } from './probes.js';

export interface DrainFigures {
  liveEndedMs: number;
  exitAfterWorkMs: number;
  stalledExitMs: number;
  delayedExitMs: number;
}

const TEXT = 'text/plain';

/** A raw connection to the server that sends `head` and resolves once the answer begins. */
async function connection(t: Running, head: string): Promise<Socket> {
  const { hostname, port } = new URL(t.url);
  const socket = connect({ host: hostname, port: Number(port) });
  socket.on('error', () => {});
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  socket.write(head.replace('HOST', hostname));
  await new Promise((resolve) => socket.once('readable', resolve));
  return socket;
}

/** Live readers ended by the drain, then the exit after the last write in flight is answered. */
async function liveAndExit(start: StartRill): Promise<Pick<DrainFigures, 'liveEndedMs' | 'exitAfterWorkMs'>> {
  const t = await start(['--long-poll-timeout', '10m', '--max-long-poll-timeout', '10m', '--sse-lifetime', '10m']);
  await createStream(t.url, 'drain', TEXT);
  const url = `${t.url}/v1/stream/drain`;
  const longPoll = fetch(`${url}?offset=now&live=long-poll`).then((r) => r.arrayBuffer());
  const sse = fetch(`${url}?offset=now&live=sse`).then((r) => r.arrayBuffer());
  // An idle keep-alive connection: one HEAD answered, then nothing.
  const idle = await connection(t, 'HEAD /healthz HTTP/1.1\r\nHost: HOST\r\n\r\n');
  const upload = await writeInFlight(url, { 'content-type': TEXT, 'content-length': '9' }, 'in-');
  await until(async () => (await liveReaders(t.url, 'long_poll')) === 1 && (await liveReaders(t.url, 'sse')) === 1, 'a long-poll and an SSE reader held');
  const termAt = performance.now();
  const stopped = t.stop(60_000);
  await Promise.all([longPoll, sse]);
  const liveEndedMs = performance.now() - termAt;
  upload.req.end('flight');
  const answer = await upload.response;
  answer.resume();
  const answeredAt = performance.now();
  await stopped;
  idle.destroy();
  if (answer.statusCode !== 204) throw new Error(`the write in flight was answered ${answer.statusCode}`);
  return { liveEndedMs, exitAfterWorkMs: performance.now() - answeredAt };
}

/** SIGTERM to exit with --drain-timeout 1s while readers and a writer stall. */
async function pastStalledClients(start: StartRill): Promise<number> {
  const t = await start(['--drain-timeout', '1s', '--sse-lifetime', '10m', '--sse-heartbeat', '10m']);
  await createStream(t.url, 'big', 'application/octet-stream');
  const chunk = Buffer.alloc(2 * 1024 * 1024, 7);
  for (let i = 0; i < 8; i++) await append(t.url, 'big', 'application/octet-stream', chunk);
  const stalled = [];
  for (const query of ['offset=-1&max_bytes=8388608', 'offset=-1&live=sse']) stalled.push(await connection(t, `GET /v1/stream/big?${query} HTTP/1.1\r\nHost: HOST\r\n\r\n`));
  const upload = await writeInFlight(`${t.url}/v1/stream/big`, { 'content-type': 'application/octet-stream', 'content-length': '100' }, 'half');
  const termAt = performance.now();
  await t.stop(60_000);
  const ms = performance.now() - termAt;
  for (const socket of stalled) socket.destroy();
  upload.req.destroy();
  return ms;
}

/** SIGTERM to exit of an idle server with --shutdown-delay 1s. */
async function afterShutdownDelay(start: StartRill): Promise<number> {
  const t = await start(['--shutdown-delay', '1s']);
  const termAt = performance.now();
  await t.stop(60_000);
  return performance.now() - termAt;
}

export async function runDrain(start: StartRill): Promise<DrainFigures> {
  const live = await liveAndExit(start);
  return { ...live, stalledExitMs: await pastStalledClients(start), delayedExitMs: await afterShutdownDelay(start) };
}
