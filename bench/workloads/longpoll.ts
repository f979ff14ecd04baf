/**
 * Long-poll fan-out: N readers follow one text stream by long-poll, each on its own
 * keep-alive raw socket, asking again from the offset its last answer gave. One writer
 * appends at a fixed rate, each message carrying its send time. Latency is
 * publish-to-receive, per reader per message. Unlike SSE, every delivery is a whole
 * request and response, so the server's CPU time per delivery is measured too.
 */
import { connect, type Socket } from 'node:net';
import { createStream, pooled, sleep } from '../http.js';
import { CONNECTING_AT_ONCE, nowMicros, percentile, publishAtRate, SEMICOLON, STAMP, STAMPED_CONTENT_TYPE } from './stamped.js';

export interface LongPollSpec {
  readers: number;
  messagesPerS: number;
  durationS: number;
  /** Sent at the same rate before the measured messages, not counted (see SseSpec). */
  warmupMessages: number;
  stream: string;
}

export interface LongPollResult {
  p50Ms: number;
  p99Ms: number;
  delivered: number;
  expected: number;
  /** Answers other than 200 and 204. */
  failures: number;
  /** The server's CPU time over the measured messages, per message delivered to a reader. */
  cpuUsPerDelivery: number;
}

const HEAD_END = Buffer.from('\r\n\r\n');
const CRLF = Buffer.from('\r\n');

/** One parsed response: status, the offset to ask from next, and the body. */
interface Answer {
  status: number;
  nextOffset: string | null;
  body: Buffer;
}

function headerValue(head: string, name: string): string | null {
  const at = head.indexOf(`\r\n${name}:`);
  if (at < 0) return null;
  const end = head.indexOf('\r\n', at + 2);
  return head.slice(at + name.length + 3, end < 0 ? undefined : end).trim();
}

/** A chunked body's end and bytes, or null while it is incomplete. */
function chunkedBody(data: Buffer, from: number): { end: number; body: Buffer } | null {
  const parts: Buffer[] = [];
  for (let at = from; ; ) {
    const lineEnd = data.indexOf(CRLF, at);
    if (lineEnd < 0) return null;
    const size = parseInt(data.toString('latin1', at, lineEnd), 16);
    if (data.length < lineEnd + 2 + size + 2) return null;
    parts.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
    if (size === 0) return { end: at, body: Buffer.concat(parts) };
  }
}

/** The first whole response in `data` and where it ends, or null while it is incomplete. */
function parseAnswer(data: Buffer): { answer: Answer; end: number } | null {
  const headEnd = data.indexOf(HEAD_END);
  if (headEnd < 0) return null;
  // Header names are case-insensitive; the reference capitalises them, rill does not.
  const head = data.toString('latin1', 0, headEnd).toLowerCase();
  const status = Number(head.slice(9, 12));
  const nextOffset = headerValue(head, 'stream-next-offset');
  if (headerValue(head, 'transfer-encoding') === 'chunked') {
    const chunked = chunkedBody(data, headEnd + 4);
    return chunked && { answer: { status, nextOffset, body: chunked.body }, end: chunked.end };
  }
  const end = headEnd + 4 + Number(headerValue(head, 'content-length') ?? 0);
  if (data.length < end) return null;
  return { answer: { status, nextOffset, body: data.subarray(headEnd + 4, end) }, end };
}

function recordStamps(body: Buffer, atUs: number, latenciesUs: number[]): void {
  for (let from = body.indexOf(STAMP); from >= 0; from = body.indexOf(STAMP, from)) {
    const end = body.indexOf(SEMICOLON, from + STAMP.length);
    if (end < 0) return;
    latenciesUs.push(atUs - Number(body.toString('latin1', from + STAMP.length, end)));
    from = end;
  }
}

interface Tally {
  latenciesUs: number[];
  failures: number;
  /** Readers whose first request has been sent. */
  asked: number;
}

/** One reader: asks, records the stamps of each answer, asks again from the next offset. */
function follow(base: URL, path: string, firstOffset: string, tally: Tally): Socket {
  let offset = firstOffset;
  let pending: Buffer | null = null;
  const socket = connect({ host: base.hostname, port: Number(base.port) });
  socket.setNoDelay(true);
  const ask = () => socket.write(`GET ${path}?offset=${encodeURIComponent(offset)}&live=long-poll HTTP/1.1\r\nHost: ${base.host}\r\n\r\n`);
  socket.once('connect', () => {
    ask();
    tally.asked++;
  });
  socket.on('data', (chunk: Buffer) => {
    const at = nowMicros();
    let data = pending ? Buffer.concat([pending, chunk]) : chunk;
    pending = null;
    for (let parsed = parseAnswer(data); parsed; parsed = parseAnswer(data)) {
      const { status, nextOffset, body } = parsed.answer;
      if (status !== 200 && status !== 204) tally.failures++;
      if (nextOffset !== null) offset = nextOffset;
      recordStamps(body, at, tally.latenciesUs);
      data = data.subarray(parsed.end);
      ask();
    }
    if (data.length > 0) pending = Buffer.from(data);
  });
  socket.on('error', () => tally.failures++);
  return socket;
}

export async function prepareLongPoll(base: string, spec: LongPollSpec): Promise<void> {
  await createStream(base, spec.stream, STAMPED_CONTENT_TYPE);
}

/** The readers start at the tail (`offset=now`) and follow it from the offsets they are given. */
export async function runLongPoll(base: string, spec: LongPollSpec, serverCpuSeconds: () => number): Promise<LongPollResult> {
  const tally: Tally = { latenciesUs: [], failures: 0, asked: 0 };
  const url = new URL(base);
  const sockets: Socket[] = [];
  try {
    // A failed connection is counted by the reader's error handler, not thrown here.
    await pooled(spec.readers, CONNECTING_AT_ONCE, () => {
      const socket = follow(url, `/v1/stream/${spec.stream}`, 'now', tally);
      sockets.push(socket);
      return new Promise<void>((resolve) => socket.once('connect', resolve).once('error', () => resolve()));
    });
    for (const started = Date.now(); tally.asked < spec.readers; await sleep(20)) {
      if (Date.now() - started > 10_000) throw new Error(`long-poll: ${tally.asked} of ${spec.readers} readers connected`);
    }
    // Every reader's request has reached the server and waits.
    await sleep(500);
    await publishAtRate(base, spec, spec.warmupMessages);
    await sleep(500);
    tally.latenciesUs.length = 0;
    const cpuBefore = serverCpuSeconds();
    const sent = await publishAtRate(base, spec, Math.max(1, Math.round(spec.messagesPerS * spec.durationS)));
    await sleep(500);
    const cpuUsPerDelivery = ((serverCpuSeconds() - cpuBefore) * 1e6) / Math.max(1, tally.latenciesUs.length);
    const sorted = tally.latenciesUs.sort((a, b) => a - b);
    return { p50Ms: percentile(sorted, 50) / 1000, p99Ms: percentile(sorted, 99) / 1000, delivered: sorted.length, expected: sent * spec.readers, failures: tally.failures, cpuUsPerDelivery };
  } finally {
    for (const socket of sockets) socket.destroy();
  }
}
