/**
 * Workload 3: SSE fan-out. N subscribers follow one text stream over Server-Sent
 * Events (raw sockets), or, spread, `streams` streams with N / streams subscribers each
 * (subscriber i on stream i mod streams); one writer appends at a fixed rate, to the
 * streams in turn, each message carrying its send time. Latency is publish-to-receive, per subscriber per message. On a server
 * of several nodes the subscribers are spread over them, round-robin, and the writer
 * writes to the first: delivery on the writer's node and on the others is reported apart.
 */
import { connect, type Socket } from 'node:net';
import { createStream, pooled, sleep } from '../http.js';
import { CONNECTING_AT_ONCE, nowMicros, percentile, publishAtRate, SEMICOLON, STAMP, STAMPED_CONTENT_TYPE, streamOf } from './stamped.js';

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
  /** Spread over this many streams (`${stream}-${k}`); absent: one stream. */
  streams?: number;
  /**
   * Every subscriber on a node other than the writer's (the shape issue 41 measured on
   * PostgreSQL: one node writing, another holding all the readers); absent: spread over all.
   */
  awayFromWriter?: boolean;
}

export interface SseLatencies {
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  delivered: number;
  expected: number;
}

export interface SseResult extends SseLatencies {
  /**
   * The writer's appends, from send to answer: a server that hands a commit to its readers
   * before it answers the writer moves latency from one to the other, so both are shown.
   */
  writerP50Ms: number;
  /** The subscribers on the node the writer writes to. */
  writersNode: SseLatencies;
  /** The subscribers on the other nodes; null with one node. */
  otherNodes: SseLatencies | null;
}

interface Subscriber {
  socket: Socket;
  ready: Promise<void>;
}

/**
 * A message's stamp opens an event's data (`data:t=`) or follows the padding of the message
 * before it in the same event (`.t=`): a server that has fallen behind (rill's nodes on
 * PostgreSQL, catching up from the database) sends several messages in one event, and
 * each has its latency. Not a `t=` elsewhere (`charset=` in the headers).
 */
const STAMP_AFTER = new Set([':'.charCodeAt(0), '.'.charCodeAt(0)]);
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
      if (from === 0 || !STAMP_AFTER.has(data[from - 1]!)) {
        from += STAMP.length;
        continue;
      }
      const end = data.indexOf(SEMICOLON, from + STAMP.length);
      if (end < 0) {
        carry = Buffer.from(data.subarray(from - 1));
        return;
      }
      const sentUs = Number(data.toString('latin1', from + STAMP.length, end));
      if (Number.isFinite(sentUs)) latenciesUs.push(at - sentUs);
      from = end;
    }
    // Keep a tail as long as a stamp, in case one (or the byte before it) ends this read.
    if (data.length > 0) carry = Buffer.from(data.subarray(Math.max(0, data.length - STAMP.length)));
  });
  socket.on('error', (e) => fail(e));
  return { socket, ready };
}

export async function prepareSse(base: string, spec: SseSpec): Promise<void> {
  for (let k = 0; k < (spec.streams ?? 1); k++) await createStream(base, streamOf(spec, k), STAMPED_CONTENT_TYPE);
}

function latencies(us: number[], sent: number, subscribers: number): SseLatencies {
  const sorted = [...us].sort((a, b) => a - b);
  return {
    p50Ms: percentile(sorted, 50) / 1000,
    p99Ms: percentile(sorted, 99) / 1000,
    maxMs: (sorted[sorted.length - 1] ?? NaN) / 1000,
    delivered: sorted.length,
    expected: sent * subscribers,
  };
}

/** `bases`: the server's URL, or its nodes' (the writer writes to the first). */
export async function runSse(bases: string | string[], spec: SseSpec): Promise<SseResult> {
  const nodes = (typeof bases === 'string' ? [bases] : bases).map((b) => new URL(b));
  const writer = nodes[0]!.origin;
  if (spec.awayFromWriter && nodes.length < 2) throw new Error('subscribers away from the writer need two nodes');
  // Subscriber i's node: i mod nodes, or one of the others when away from the writer.
  const nodeOf = (i: number) => (spec.awayFromWriter ? 1 + (i % (nodes.length - 1)) : i % nodes.length);
  // Per node: subscriber i is on node i mod nodes.
  const latenciesUs: number[][] = nodes.map(() => []);
  const pathOf = (i: number) => `/v1/stream/${streamOf(spec, i)}?offset=now&live=sse`;
  const subs: Subscriber[] = [];
  try {
    await pooled(spec.subscribers, CONNECTING_AT_ONCE, (i) => {
      const sub = subscribe(nodes[nodeOf(i)]!, pathOf(i), latenciesUs[nodeOf(i)]!);
      subs.push(sub);
      return sub.ready;
    });
    await sleep(200);
    await publishAtRate(writer, spec, spec.warmupMessages);
    await sleep(500);
    for (const l of latenciesUs) l.length = 0;
    const appendsUs: number[] = [];
    const sent = await publishAtRate(writer, spec, Math.max(1, Math.round(spec.messagesPerS * spec.durationS)), appendsUs);
    await sleep(500);
    const on = (node: number) => Array.from({ length: spec.subscribers }, (_, i) => nodeOf(i)).filter((n) => n === node).length;
    const others = latenciesUs.slice(1).flat();
    const otherSubscribers = spec.subscribers - on(0);
    // Spread, each message reaches the subscribers of its one stream.
    const reached = (subscribers: number) => subscribers / (spec.streams ?? 1);
    return {
      ...latencies(latenciesUs.flat(), sent, reached(spec.subscribers)),
      writersNode: latencies(latenciesUs[0]!, sent, reached(on(0))),
      otherNodes: nodes.length > 1 ? latencies(others, sent, reached(otherSubscribers)) : null,
      writerP50Ms: latencies(appendsUs, sent, 1).p50Ms,
    };
  } finally {
    for (const s of subs) s.socket.destroy();
  }
}
