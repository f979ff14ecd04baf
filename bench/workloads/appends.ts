/**
 * Workloads 1 and 2: 100-byte appends from 50 keep-alive connections (autocannon),
 * spread round-robin over N streams; with producers, each connection is one producer
 * that owns its own streams and sends Producer-Id/Epoch/Seq in order on each of them;
 * with newcomers, every append comes from a producer its stream has not seen (seq 0).
 * At a fixed rate, the same appends are paced over the connections instead.
 * A server of several nodes gets its connections spread over their URLs, round-robin.
 */
import autocannon from 'autocannon';
import { BODY_BYTES, bodyOf, createStream, pooled } from '../http.js';

export interface AppendSpec {
  streams: number;
  connections: number;
  durationS: number;
  producers: boolean;
  /** Each append from a new producer, round-robin over the streams: the streams gather producers past what a node loads whole. */
  newcomers?: boolean;
  /** Distinguishes the stream names of one run from another's on the same server. */
  prefix: string;
  /** Requests per second over all connections; unset, each connection sends as fast as it is answered. */
  ratePerS?: number;
  /** Sent with every request (a bearer token). */
  headers?: Record<string, string>;
}

export interface AppendResult {
  appendsPerS: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  non2xx: number;
  errors: number;
}

const CONTENT_TYPE = 'application/octet-stream';

/**
 * From this many streams on they are made by autocannon's connections rather than `fetch`
 * from this process, 32 at a time: 100,000 took rill 106 s that way on a loaded machine,
 * where the many-streams workload's autocannon made as many in about 30.
 */
const BULK_CREATE_STREAMS = 50_000;

export async function prepareStreams(base: string, spec: AppendSpec): Promise<void> {
  if (spec.streams < BULK_CREATE_STREAMS) {
    await pooled(spec.streams, 32, (i) => createStream(base, `${spec.prefix}-${i}`, CONTENT_TYPE, undefined, spec.headers));
    return;
  }
  let next = 0;
  const made = await autocannon({
    url: base,
    connections: spec.connections,
    amount: spec.streams,
    timeout: 30,
    requests: [
      {
        method: 'PUT',
        headers: { 'content-type': CONTENT_TYPE, ...spec.headers },
        setupRequest(req) {
          req.path = `/v1/stream/${spec.prefix}-${next++}`;
          return req;
        },
      },
    ],
  });
  // Every stream must exist: an append to a missing one would be a 404, not an append.
  if (made['2xx'] !== spec.streams) throw new Error(`made ${made['2xx']} of ${spec.streams} streams (${made.non2xx} non-2xx, ${made.errors + made.timeouts} errors)`);
}

/**
 * Per-connection state lives in an object of the request template: autocannon deep-clones
 * its options for each connection and resets `context` every loop, so this is the one
 * place that persists per connection.
 */
interface ConnectionState {
  id?: number;
  turn?: number;
  seqs?: number[];
}

/** Counts runs, so that each run's producers are new ones (see requestFor). */
let runs = 0;

function requestFor(spec: AppendSpec): autocannon.Request {
  const body = bodyOf(BODY_BYTES);
  // Producers of their own each run, starting at seq 0: had every run's producers started
  // again at 0 under the last run's names, each append after the first run on a server
  // would be a duplicate, answered without a write (as the bytes-written figure showed).
  const run = runs++;
  let nextConnection = 0;
  let nextStream = 0;
  const request = {
    method: 'POST' as const,
    body,
    headers: { 'content-type': CONTENT_TYPE, ...spec.headers },
    state: {} as ConnectionState,
    setupRequest(req: autocannon.Request & { state: ConnectionState }) {
      if (!spec.producers) {
        req.path = `/v1/stream/${spec.prefix}-${nextStream++ % spec.streams}`;
        return req;
      }
      if (spec.newcomers) {
        const n = nextStream++;
        req.path = `/v1/stream/${spec.prefix}-${n % spec.streams}`;
        req.headers = { ...req.headers, 'producer-id': `bench-${run}-new-${n}`, 'producer-epoch': '0', 'producer-seq': '0' };
        return req;
      }
      const state = req.state;
      state.id ??= nextConnection++;
      state.turn ??= 0;
      state.seqs ??= [];
      // Connection c owns streams c, c + connections, c + 2*connections, ...
      const owned = Math.max(1, Math.ceil((spec.streams - state.id) / spec.connections));
      const slot = state.turn++ % owned;
      const stream = state.id + slot * spec.connections;
      const seq = state.seqs[slot] ?? 0;
      state.seqs[slot] = seq + 1;
      req.path = `/v1/stream/${spec.prefix}-${stream % spec.streams}`;
      req.headers = { ...req.headers, 'producer-id': `bench-${run}-${state.id}`, 'producer-epoch': '0', 'producer-seq': String(seq) };
      return req;
    },
  };
  return request as unknown as autocannon.Request;
}

/** `base`: the server's URL, or its nodes' (connection i goes to node i mod nodes). */
export async function runAppends(base: string | string[], spec: AppendSpec): Promise<AppendResult> {
  const result = await autocannon({
    // autocannon takes an array of URLs too (its types say a string): lib/run.js initialiseClients.
    url: base as string,
    connections: spec.connections,
    duration: spec.durationS,
    pipelining: 1,
    timeout: 10,
    ...(spec.ratePerS === undefined ? {} : { overallRate: spec.ratePerS }),
    requests: [requestFor(spec)],
  });
  return {
    appendsPerS: result['2xx'] / (result.duration || spec.durationS),
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    requests: result.requests.total,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
  };
}
