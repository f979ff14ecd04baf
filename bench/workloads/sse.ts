/**
 * Workload 3: SSE fan-out. N subscribers follow one text stream over Server-Sent
 * Events (node:http client); one writer appends at a fixed rate, each message carrying
 * its send time. Latency is publish-to-receive, per subscriber per message.
 */
import { Agent, request, type ClientRequest } from 'node:http';
import { append, createStream, sleep } from '../http.js';

export interface SseSpec {
  subscribers: number;
  messagesPerS: number;
  durationS: number;
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
  req: ClientRequest;
  ready: Promise<void>;
}

/** Opens one SSE reader; records the latency of every stamped message it receives. */
function subscribe(url: string, agent: Agent, latenciesUs: number[]): Subscriber {
  let markReady: () => void = () => {};
  let fail: (e: Error) => void = () => {};
  const ready = new Promise<void>((res, rej) => {
    markReady = res;
    fail = rej;
  });
  const req = request(url, { agent, headers: { accept: 'text/event-stream' } }, (res) => {
    if (res.statusCode !== 200) return fail(new Error(`SSE subscribe: HTTP ${res.statusCode}`));
    res.setEncoding('utf8');
    let pending = '';
    res.on('data', (text: string) => {
      const at = nowMicros();
      pending += text;
      let cut: number;
      while ((cut = pending.indexOf('\n\n')) >= 0) {
        const event = pending.slice(0, cut);
        pending = pending.slice(cut + 2);
        if (event.startsWith('event: control')) markReady();
        const stamp = event.indexOf('data:t=');
        if (event.startsWith('event: data') && stamp >= 0) {
          const sent = Number(event.slice(stamp + 7, event.indexOf(';', stamp)));
          latenciesUs.push(at - sent);
        }
      }
    });
    res.on('error', () => {});
  });
  req.on('error', (e) => fail(e));
  req.end();
  return { req, ready };
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export async function prepareSse(base: string, spec: SseSpec): Promise<void> {
  await createStream(base, spec.stream, CONTENT_TYPE);
}

export async function runSse(base: string, spec: SseSpec): Promise<SseResult> {
  const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
  const latenciesUs: number[] = [];
  const url = `${base}/v1/stream/${spec.stream}?offset=now&live=sse`;
  const subs: Subscriber[] = [];
  for (let i = 0; i < spec.subscribers; i++) subs.push(subscribe(url, agent, latenciesUs));
  try {
    await Promise.all(subs.map((s) => s.ready));
    await sleep(200);
    const messages = Math.max(1, Math.round(spec.messagesPerS * spec.durationS));
    const intervalMs = 1000 / spec.messagesPerS;
    let sent = 0;
    const start = performance.now();
    // A server slower than the rate gets fewer messages, never an unbounded run.
    for (let n = 0; n < messages && performance.now() - start < spec.durationS * 3000; n++) {
      const due = start + n * intervalMs;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      await append(base, spec.stream, CONTENT_TYPE, stampedBody(n));
      sent++;
    }
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
    for (const s of subs) s.req.destroy();
    agent.destroy();
  }
}
