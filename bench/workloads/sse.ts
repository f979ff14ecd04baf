/**
 * Workload 3: SSE fan-out. N subscribers follow one text stream over Server-Sent
 * Events (raw sockets); one writer appends at a fixed rate, each message carrying
 * its send time. Latency is publish-to-receive, per subscriber per message.
 */
import { connect, type Socket } from 'node:net';
import { append, createStream, sleep } from '../http.js';

export interface SseSpec {
  subscribers: number;
  messagesPerS: number;
  durationS: number;
  /**
   * Sent at the same rate before the measured messages, not counted: the first messages
   * meet code the server has not optimised yet and were the slowest of a run for every
   * server (46-50 ms where the steady state stays under 25), so they alone made the p99.
   */
  warmupMessages: number;
  stream: string;
}

export interface SseResult {
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  delivered: number;
  expected: number;
}

const CONTENT_TYPE = 'text/plain';

/** Send time in microseconds of this process's monotonic clock, padded to 100 bytes. */
function stampedBody(seq: number): string {
  const micros = Number(process.hrtime.bigint() / 1000n);
  return `t=${micros};n=${seq};`.padEnd(100, '.');
}

function nowMicros(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

interface Subscriber {
  socket: Socket;
  ready: Promise<void>;
}

const STAMP = Buffer.from('data:t=');
const CONTROL = Buffer.from('event: control');
const SEMICOLON = 0x3b;

/**
 * Opens one SSE reader on a raw socket and records the latency of every stamped message
 * it receives. A thousand readers share this process with the writer, so each received
 * chunk costs only a byte search: with a full HTTP client per reader the measuring
 * process, not the server, would set the tail of the latency.
 */
function subscribe(base: URL, path: string, latenciesUs: number[]): Subscriber {
  let markReady: () => void = () => {};
  let fail: (e: Error) => void = () => {};
  const ready = new Promise<void>((res, rej) => {
    markReady = res;
    fail = rej;
  });
  const socket = connect({ host: base.hostname, port: Number(base.port) });
  socket.setNoDelay(true);
  socket.write(`GET ${path} HTTP/1.1\r\nHost: ${base.host}\r\nAccept: text/event-stream\r\n\r\n`);
  let started = false;
  let isReady = false;
  // The unscanned end of the previous chunk: a stamp may be split across two reads.
  let carry: Buffer | null = null;
  socket.on('data', (chunk: Buffer) => {
    const at = nowMicros();
    const data = carry ? Buffer.concat([carry, chunk]) : chunk;
    carry = null;
    if (!started) {
      started = true;
      if (!data.subarray(0, 12).toString('latin1').endsWith(' 200')) return fail(new Error(`SSE subscribe: ${data.subarray(0, 40).toString('latin1')}`));
    }
    if (!isReady && data.includes(CONTROL)) {
      isReady = true;
      markReady();
    }
    for (let from = data.indexOf(STAMP); from >= 0; from = data.indexOf(STAMP, from)) {
      const end = data.indexOf(SEMICOLON, from + STAMP.length);
      if (end < 0) {
        carry = Buffer.from(data.subarray(from));
        return;
      }
      latenciesUs.push(at - Number(data.toString('latin1', from + STAMP.length, end)));
      from = end;
    }
    // Keep a tail shorter than a stamp, in case one begins at the very end of this read.
    if (data.length > 0) carry = Buffer.from(data.subarray(Math.max(0, data.length - STAMP.length + 1)));
  });
  socket.on('error', (e) => fail(e));
  return { socket, ready };
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export async function prepareSse(base: string, spec: SseSpec): Promise<void> {
  await createStream(base, spec.stream, CONTENT_TYPE);
}

/** Appends `messages` stamped messages at the spec's rate; answers how many were sent. */
async function publishAtRate(base: string, spec: SseSpec, messages: number, intervalMs: number): Promise<number> {
  let sent = 0;
  const start = performance.now();
  // A server slower than the rate gets fewer messages, never an unbounded run.
  const limitMs = Math.max(1000, (messages / spec.messagesPerS) * 3000);
  for (let n = 0; n < messages && performance.now() - start < limitMs; n++) {
    const due = start + n * intervalMs;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    await append(base, spec.stream, CONTENT_TYPE, stampedBody(n));
    sent++;
  }
  return sent;
}

export async function runSse(base: string, spec: SseSpec): Promise<SseResult> {
  const latenciesUs: number[] = [];
  const path = `/v1/stream/${spec.stream}?offset=now&live=sse`;
  const subs: Subscriber[] = [];
  for (let i = 0; i < spec.subscribers; i++) subs.push(subscribe(new URL(base), path, latenciesUs));
  try {
    await Promise.all(subs.map((s) => s.ready));
    await sleep(200);
    const intervalMs = 1000 / spec.messagesPerS;
    await publishAtRate(base, spec, spec.warmupMessages, intervalMs);
    await sleep(500);
    latenciesUs.length = 0;
    const sent = await publishAtRate(base, spec, Math.max(1, Math.round(spec.messagesPerS * spec.durationS)), intervalMs);
    await sleep(500);
    const sorted = latenciesUs.sort((a, b) => a - b);
    return {
      p50Ms: percentile(sorted, 50) / 1000,
      p99Ms: percentile(sorted, 99) / 1000,
      maxMs: (sorted[sorted.length - 1] ?? NaN) / 1000,
      delivered: sorted.length,
      expected: sent * spec.subscribers,
    };
  } finally {
    for (const s of subs) s.socket.destroy();
  }
}
