/**
 * Workload 3: SSE fan-out. N subscribers follow one text stream over Server-Sent
 * Events (raw sockets); one writer appends at a fixed rate, each message carrying
 * its send time. Latency is publish-to-receive, per subscriber per message.
 */
import { connect, type Socket } from 'node:net';
import { createStream, pooled, sleep } from '../http.js';
import { CONNECTING_AT_ONCE, nowMicros, percentile, publishAtRate, SEMICOLON, STAMPED_CONTENT_TYPE } from './stamped.js';

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

interface Subscriber {
  socket: Socket;
  ready: Promise<void>;
}

/** A stamp at the start of an event's data: the padding of a message holds no `t=`. */
const STAMP = Buffer.from('data:t=');
const CONTROL = Buffer.from('event: control');

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

export async function prepareSse(base: string, spec: SseSpec): Promise<void> {
  await createStream(base, spec.stream, STAMPED_CONTENT_TYPE);
}

export async function runSse(base: string, spec: SseSpec): Promise<SseResult> {
  const latenciesUs: number[] = [];
  const url = new URL(base);
  const path = `/v1/stream/${spec.stream}?offset=now&live=sse`;
  const subs: Subscriber[] = [];
  try {
    await pooled(spec.subscribers, CONNECTING_AT_ONCE, () => {
      const sub = subscribe(url, path, latenciesUs);
      subs.push(sub);
      return sub.ready;
    });
    await sleep(200);
    await publishAtRate(base, spec, spec.warmupMessages);
    await sleep(500);
    latenciesUs.length = 0;
    const sent = await publishAtRate(base, spec, Math.max(1, Math.round(spec.messagesPerS * spec.durationS)));
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
