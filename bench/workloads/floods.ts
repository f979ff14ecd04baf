/**
 * The limits workload: what a JSON flood and a stalled SSE reader cost rill, the figures
 * test/reliability/limits.test.ts once bounded. Each measurement has a fresh rill process
 * of its own (SQLite), and the floods are sent by curl, so that this process's HEADs are
 * held up by the server alone.
 *
 *  - A refused flood: `[0,0,...]` past --max-append-messages (16.7 million elements, 32 MiB):
 *    the slowest HEAD while it is framed and refused, beside the idle server's slowest HEAD
 *    over a second, and the peak memory it adds.
 *  - An accepted flood: an array of a million messages past a raised --max-append-messages:
 *    the peak memory it adds.
 *  - Framing in slices: a 32 MB body of 100,000 whitespace-padded elements (stored as 200 KB):
 *    the slowest HEAD while it is framed, beside the slowest while its 200 KB are appended as
 *    binary, again and again, for as long.
 *  - A stalled SSE reader (--sse-max-buffered 64 KiB): the resident memory the server gains
 *    while 128 MiB are written past it to a reader that keeps up.
 */
import { connect, type Socket } from 'node:net';
import { createStream, sleep } from '../http.js';
import type { Running } from '../targets.js';
import { idleSlowestHeadMs, liveReaders, peakGrowthBytes, postWithCurl, slowestHeadMs, until } from './probes.js';

export interface FloodSpec {
  /** Elements of the refused flood (more than the default --max-append-messages, 100,000). */
  refusedElements: number;
  /** Elements of the accepted flood (--max-append-messages raised to it). */
  acceptedElements: number;
  /** Elements of the padded body, 320 bytes each (at most 100,000, the default limit). */
  paddedElements: number;
  /** How long the idle server's HEADs are watched. */
  idleMs: number;
  /** MiB written past the stalled SSE reader. */
  stalledMiB: number;
}

/** Starts a fresh rill with these flags; stopped by the caller. */
export type StartRill = (args: string[]) => Promise<Running>;

const JSON_TYPE = 'application/json';
const BINARY = 'application/octet-stream';

/** `[0,0,...,0]`, filled in place: a 32 MiB string would cost this process more than the request. */
export function zeros(elements: number): Buffer {
  const body = Buffer.allocUnsafe(2 * elements + 1);
  body[0] = 0x5b;
  body.fill('0,', 1, 2 * elements);
  body[2 * elements] = 0x5d;
  return body;
}

/** `[0 ... ,0 ...]`: elements of 320 bytes, whitespace that framing reads and drops. */
function paddedZeros(elements: number): Buffer {
  const body = Buffer.allocUnsafe(320 * elements + 1);
  body[0] = 0x5b;
  body.fill(`0${' '.repeat(318)},`, 1);
  body[320 * elements] = 0x5d;
  return body;
}

async function withRill<T>(start: StartRill, args: string[], measure: (t: Running) => Promise<T>): Promise<T> {
  const t = await start(args);
  try {
    return await measure(t);
  } finally {
    await t.stop();
  }
}

export interface RefusedFlood {
  idleHeadMs: number;
  headMs: number;
  peakGrowthBytes: number;
}

export function refusedFlood(start: StartRill, spec: FloodSpec): Promise<RefusedFlood> {
  return withRill(start, [], async (t) => {
    await createStream(t.url, 'flood', JSON_TYPE);
    const url = `${t.url}/v1/stream/flood`;
    const body = zeros(spec.refusedElements);
    const idleHeadMs = await idleSlowestHeadMs(url, spec.idleMs);
    let headMs = NaN;
    const peak = await peakGrowthBytes(t.pid, async () => {
      const post = postWithCurl(url, body, JSON_TYPE);
      headMs = await slowestHeadMs(url, post);
      const status = await post;
      if (status !== 413) throw new Error(`a flood of ${spec.refusedElements} elements was answered ${status}, not 413`);
    });
    return { idleHeadMs, headMs, peakGrowthBytes: peak };
  });
}

/** The peak memory an accepted flood of `acceptedElements` adds. */
export function acceptedFlood(start: StartRill, spec: FloodSpec): Promise<number> {
  return withRill(start, ['--max-append-messages', String(spec.acceptedElements)], async (t) => {
    await createStream(t.url, 'flood', JSON_TYPE);
    const body = zeros(spec.acceptedElements);
    return peakGrowthBytes(t.pid, async () => {
      const status = await postWithCurl(`${t.url}/v1/stream/flood`, body, JSON_TYPE);
      if (status !== 204) throw new Error(`a flood of ${spec.acceptedElements} elements was answered ${status}, not 204`);
    });
  });
}

/** Appends `body` as binary again and again until `forMs` have passed. */
async function appendFor(url: string, body: Buffer, forMs: number): Promise<void> {
  const startedAt = performance.now();
  do {
    const res = await fetch(url, { method: 'POST', headers: { 'content-type': BINARY }, body: new Uint8Array(body) });
    await res.arrayBuffer();
    if (res.status !== 204) throw new Error(`binary append: HTTP ${res.status}`);
  } while (performance.now() - startedAt < forMs);
}

export interface Framing {
  /** The slowest HEAD while the padded body was framed. */
  framingHeadMs: number;
  /** The slowest HEAD while its stored bytes were appended as binary for as long. */
  storingHeadMs: number;
}

export function framingInSlices(start: StartRill, spec: FloodSpec): Promise<Framing> {
  return withRill(start, [], async (t) => {
    await createStream(t.url, 'padded', JSON_TYPE);
    await createStream(t.url, 'binary', BINARY);
    const url = `${t.url}/v1/stream/padded`;
    const body = paddedZeros(spec.paddedElements);
    await idleSlowestHeadMs(url, 0); // warms the HEAD path
    const postedAt = performance.now();
    const post = postWithCurl(url, body, JSON_TYPE);
    const framingHeadMs = await slowestHeadMs(url, post);
    const status = await post;
    if (status !== 204) throw new Error(`the padded body was answered ${status}, not 204`);
    const postMs = performance.now() - postedAt;
    const storingHeadMs = await slowestHeadMs(url, appendFor(`${t.url}/v1/stream/binary`, Buffer.from('0\n'.repeat(spec.paddedElements)), postMs));
    return { framingHeadMs, storingHeadMs };
  });
}

/** An SSE reader on a raw socket; `stall` takes the answer's first bytes and then reads no more. */
async function sseReader(t: Running, path: string, stall: boolean): Promise<{ socket: Socket; bytes: () => number }> {
  const { hostname, port } = new URL(t.url);
  const socket = connect({ host: hostname, port: Number(port) });
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  socket.write(`GET ${path}?offset=-1&live=sse HTTP/1.1\r\nHost: ${hostname}\r\n\r\n`);
  let bytes = 0;
  if (stall) await new Promise((resolve) => socket.once('readable', resolve));
  else socket.on('data', (chunk: Buffer) => (bytes += chunk.length));
  return { socket, bytes: () => bytes };
}

/** The resident memory the server gains while `stalledMiB` are written past a stalled SSE reader. */
export function stalledReader(start: StartRill, spec: FloodSpec): Promise<number> {
  return withRill(start, ['--sse-max-buffered', String(64 * 1024), '--sse-heartbeat', '1s', '--sse-lifetime', '10m'], async (t) => {
    await createStream(t.url, 'firehose', BINARY);
    const stalled = await sseReader(t, '/v1/stream/firehose', true);
    const keeping = await sseReader(t, '/v1/stream/firehose', false);
    try {
      await until(async () => (await liveReaders(t.url, 'sse')) === 2, '2 SSE readers held');
      await sleep(300); // the server settles after accepting them
      const before = t.rssBytes();
      const chunk = new Uint8Array(1024 * 1024).fill(0x61);
      for (let i = 0; i < spec.stalledMiB; i++) {
        const res = await fetch(`${t.url}/v1/stream/firehose`, { method: 'POST', headers: { 'content-type': BINARY }, body: chunk });
        await res.arrayBuffer();
        if (res.status !== 204) throw new Error(`firehose append: HTTP ${res.status}`);
      }
      // Base64 makes 4 bytes of 3; the reader that keeps up has them all, the stalled one was cut.
      await until(async () => keeping.bytes() >= (spec.stalledMiB * 1024 * 1024 * 4) / 3, 'the reader that keeps up has everything');
      await until(async () => (await liveReaders(t.url, 'sse')) === 1, 'the stalled reader cut');
      return t.rssBytes() - before;
    } finally {
      stalled.socket.destroy();
      keeping.socket.destroy();
    }
  });
}
