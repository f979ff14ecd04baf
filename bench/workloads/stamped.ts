/**
 * What the live workloads share: messages that carry their send time, a writer that
 * appends them at a fixed rate, and percentiles of the latencies readers record.
 */
import { append, sleep } from '../http.js';

export const STAMPED_CONTENT_TYPE = 'text/plain';

/** Microseconds of this process's monotonic clock: writer and readers share the process. */
export function nowMicros(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/** Send time in microseconds, padded to 100 bytes. */
export function stampedBody(seq: number): string {
  return `t=${nowMicros()};n=${seq};`.padEnd(100, '.');
}

/** Where a message's send time starts in a received body; it ends at the next `;`. */
export const STAMP = Buffer.from('t=');
export const SEMICOLON = 0x3b;

/**
 * Readers that connect at once. A thousand at once overflowed the server's listen
 * backlog (511 in Node; the kernel's TcpExtListenOverflows grew by about a hundred per
 * round), and in one run a reader of the floor was reset (ECONNRESET) while they
 * connected, which ended the workload. These workloads measure a fan-out, not a storm
 * of connections.
 */
export const CONNECTING_AT_ONCE = 100;

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export interface Publishing {
  stream: string;
  messagesPerS: number;
  /** Streams written in turn (`${stream}-${k}`); absent: `stream` alone. */
  streams?: number;
}

/** The name of stream `k` of a spread (`streams` > 1), or the one stream. */
export function streamOf(spec: Publishing, k: number): string {
  return spec.streams === undefined ? spec.stream : `${spec.stream}-${k % spec.streams}`;
}

/**
 * Appends `messages` stamped messages at the given rate; answers how many were sent.
 * `appendLatenciesUs`, when given, gets each append's time from its send to its answer.
 */
export async function publishAtRate(base: string, spec: Publishing, messages: number, appendLatenciesUs?: number[]): Promise<number> {
  const intervalMs = 1000 / spec.messagesPerS;
  let sent = 0;
  const start = performance.now();
  // A server slower than the rate gets fewer messages, never an unbounded run.
  const limitMs = Math.max(1000, (messages / spec.messagesPerS) * 3000);
  for (let n = 0; n < messages && performance.now() - start < limitMs; n++) {
    const due = start + n * intervalMs;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    const sentUs = nowMicros();
    await append(base, streamOf(spec, n), STAMPED_CONTENT_TYPE, stampedBody(n));
    appendLatenciesUs?.push(nowMicros() - sentUs);
    sent++;
  }
  return sent;
}
