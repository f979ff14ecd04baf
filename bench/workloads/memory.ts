/**
 * Workload 5: many small streams. N streams of one 100-byte message each (PUT with a
 * body, 50 connections via autocannon), then the server's resident memory, then a
 * restart on the same data: the time from spawning the process to the first
 * successful read of one of those streams.
 */
import autocannon from 'autocannon';
import { BODY_BYTES, bodyOf, createStream, sleep } from '../http.js';
import { startTarget, type Running, type TargetName } from '../targets.js';

export interface ManyStreamsSpec {
  streams: number;
  connections: number;
}

/** The stream a restart reads first; created last, on its own, so it surely exists. */
export const PROBE_STREAM = 'many-probe';

export interface Created {
  created: number;
  non2xx: number;
  errors: number;
}

export async function createManyStreams(base: string, spec: ManyStreamsSpec): Promise<Created> {
  let next = 0;
  const result = await autocannon({
    url: base,
    connections: spec.connections,
    amount: spec.streams - 1,
    timeout: 30,
    requests: [
      {
        method: 'PUT',
        body: bodyOf(BODY_BYTES),
        headers: { 'content-type': 'application/octet-stream' },
        setupRequest(req) {
          req.path = `/v1/stream/many-${next++}`;
          return req;
        },
      },
    ],
  });
  await createStream(base, PROBE_STREAM, 'application/octet-stream', bodyOf(BODY_BYTES));
  return { created: result['2xx'] + 1, non2xx: result.non2xx, errors: result.errors + result.timeouts };
}

/** Resident memory after the streams exist and the process has settled. */
export async function settledRss(target: Running, settleMs: number): Promise<number> {
  await sleep(settleMs);
  return target.rssBytes();
}

/**
 * How long a restart may take. The file-backed reference recovers its streams one by one
 * and logs each it reconciles: with 100,000 streams on a loaded machine it took over 30 s.
 */
const RESTART_LIMIT_MS = 180_000;

/** Restarts on the same data; milliseconds from spawn to the first 200 read of `stream`. */
export async function restartToFirstRead(name: TargetName, dataDir: string, stream: string): Promise<{ ms: number; target: Running }> {
  const started = performance.now();
  const target = await startTarget(name, dataDir, [], RESTART_LIMIT_MS);
  for (;;) {
    const res = await fetch(`${target.url}/v1/stream/${stream}?offset=-1`);
    const body = await res.arrayBuffer();
    if (res.status === 200 && body.byteLength === BODY_BYTES) return { ms: performance.now() - started, target };
    if (performance.now() - started > RESTART_LIMIT_MS) {
      await target.stop();
      throw new Error(`${name} did not serve ${stream} within ${RESTART_LIMIT_MS / 1000} s after restart (HTTP ${res.status})`);
    }
    await sleep(5);
  }
}
