/**
 * Operator routes: `GET /` lists buckets, `/readyz` says whether the store can serve,
 * `/metrics` is Prometheus' scrape, `/stats` and `{stream}/stats` are what `rill stats`
 * prints, `{stream}/producers` lists a stream's producer records, `/usage` is the usage record (usage.ts). Bucket ids are at least 4 characters, so `/` and the reserved names
 * (router.ts) never shadow a bucket.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { absenceError } from '../core/stream.js';
import { messagesHeld } from '../core/records.js';
import { protocolError } from '../protocol/errors.js';
import { encodeOffset } from '../protocol/offset.js';
import { parsePageLimit } from '../protocol/parse.js';
import type { RillMetrics } from '../ops/metrics.js';
import type { StorageObserver, Store, StreamColdRange } from '../storage/store.js';
import { MAX_LIST_LIMIT } from './buckets.js';
import type { HandlerContext } from './context.js';
import { parseQuery } from './request.js';
import { send, sendError, sendJson } from './response.js';
import type { AdminRoute, StreamAddress } from './router.js';
import { extensionHeaders } from './stream-headers.js';
import { handleUsage } from './usage.js';

const DEFAULT_BUCKET_LIMIT = 100;
/** Producer records per page of `{stream}/producers`: a stream may hold many (--producer-max-per-stream). */
const DEFAULT_PRODUCER_LIMIT = 100;
const MAX_PRODUCER_LIMIT = 1000;

/** Why the server is not ready, or null when it is. */
export interface ReadinessSources {
  /** False until the server listens. */
  started(): boolean;
  /** When the server began to listen; null before. */
  startedAtMs(): number | null;
  draining(): boolean;
  /** Requests are being refused because the storage fails, or it failed for good. */
  storageFailing(): boolean;
}

export async function handleAdmin(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, name: AdminRoute, search: string): Promise<void> {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    return sendError(res, protocolError('METHOD_NOT_ALLOWED', `${req.method} is not allowed here`), { allow: 'GET, HEAD, OPTIONS' });
  }
  switch (name) {
    case 'buckets':
      return listBuckets(res, ctx, search);
    case 'readyz': {
      const status = await readinessOf(ctx.store, ctx.readiness);
      return sendJson(res, status === 'ready' ? 200 : 503, { status }, status === 'ready' ? {} : { 'retry-after': '1' });
    }
    case 'metrics':
      if (ctx.metrics === null || ctx.settings.metricsPort !== null) return sendError(res, protocolError('NOT_FOUND', 'no such route'));
      return sendMetrics(res, ctx.metrics);
    case 'stats': {
      // Messages are summed from the stream states, never read from their bodies: a count
      // that reads what it counts let a few stats calls hold appends for seconds.
      const [totals, held] = await Promise.all([ctx.store.totals(), ctx.store.heldTotals()]);
      const startedAtMs = ctx.readiness.startedAtMs();
      return sendJson(res, 200, {
        ...totals,
        bytes: held.bytes,
        messages: held.messages,
        liveReaders: { sse: ctx.live.held.sse, longPoll: ctx.live.held.long_poll },
        store: ctx.settings.store,
        ...(ctx.store.coldStats ? { cold: ctx.store.coldStats() } : {}),
        startedAt: startedAtMs === null ? null : new Date(startedAtMs).toISOString(),
      });
    }
    case 'usage':
      return handleUsage(res, ctx, search);
  }
}

/**
 * Whether the storage takes writes: failing from a batch that could not commit until one
 * commits, and for good once the store has failed fatally (the process then restarts).
 */
export class StorageHealth implements StorageObserver {
  private lastBatchFailed = false;
  private fatal = false;

  constructor(store: Store) {
    store.observe(this);
    store.onFatal(() => (this.fatal = true));
  }

  get failing(): boolean {
    return this.fatal || this.lastBatchFailed;
  }

  batchCommitted(): void {
    this.lastBatchFailed = false;
  }

  batchRefused(): void {
    this.lastBatchFailed = true;
  }
}

async function listBuckets(res: ServerResponse, ctx: HandlerContext, search: string): Promise<void> {
  const parsed = parseQuery(search);
  if (!parsed.ok) return sendError(res, parsed.error);
  const page = parsePageLimit(parsed.params.get('limit'), DEFAULT_BUCKET_LIMIT, MAX_LIST_LIMIT);
  if (!page.ok) return sendError(res, page.error);
  const limit = page.value;
  const listing = await ctx.store.listBuckets(parsed.params.get('after') ?? null, limit);
  const buckets = listing.buckets.map((b) => ({ id: b.id, streamCount: b.streamCount, createdAt: new Date(b.createdAtMs).toISOString() }));
  sendJson(res, 200, { buckets, next: listing.nextAfter });
}

/** 'ready', or why not: 'starting', 'draining', 'storage-failing'. A read of the store checks that it answers. */
async function readinessOf(store: Store, sources: ReadinessSources): Promise<string> {
  if (!sources.started()) return 'starting';
  if (sources.draining()) return 'draining';
  if (sources.storageFailing()) return 'storage-failing';
  try {
    await store.listBuckets(null, 1);
    return 'ready';
  } catch {
    return 'storage-failing';
  }
}

async function sendMetrics(res: ServerResponse, metrics: RillMetrics): Promise<void> {
  send(res, 200, { 'content-type': metrics.contentType, 'cache-control': 'no-store' }, await metrics.render());
}

/**
 * `GET {stream}/stats`: bytes held, messages, producer records, live readers waiting, and
 * with a cold tier the range of the stream's history in object storage (the rest is hot).
 * Messages (lines of a JSON stream, appends of any other) come from the stream state
 * (core/records.ts, messagesHeld): stats reads no stream body, however large.
 */
export async function handleStreamStats(res: ServerResponse, ctx: HandlerContext, address: StreamAddress): Promise<void> {
  const stream = await ctx.store.getStream(address.key);
  const absent = absenceError(stream, ctx.now());
  if (absent) return sendError(res, absent);
  const s = stream!;
  const bytes = s.tail - s.earliestOffset;
  const body = {
    // Offsets in the form every other answer gives them (20-digit strings).
    tail: encodeOffset(s.tail),
    earliestOffset: encodeOffset(s.earliestOffset),
    bytes,
    messages: messagesHeld(s),
    producers: await ctx.store.countProducers(s),
    liveReaders: ctx.hub.waitingOn(address.key),
    closed: s.closed,
    ...(ctx.store.coldRange ? { cold: coldRangeBody(await ctx.store.coldRange(s)) } : {}),
  };
  sendJson(res, 200, body, extensionHeaders(address, s));
}

/** The stream's cold range as stats answers it: offsets as strings, and the stream bytes it spans. */
function coldRangeBody(range: StreamColdRange): { start: string; end: string; segments: number; bytes: number; objectBytes: number } {
  return { start: encodeOffset(range.start), end: encodeOffset(range.end), segments: range.segments, bytes: range.end - range.start, objectBytes: range.objectBytes };
}

/**
 * `GET {stream}/producers`: the stream's producer records in id order (UTF-8 bytes), each
 * with its epoch, last sequence number and last write time, paged by `limit` and `after`
 * (the last id of the page before, given as `next`). Read permission, as stats.
 */
export async function handleStreamProducers(res: ServerResponse, ctx: HandlerContext, address: StreamAddress, search: string): Promise<void> {
  const parsed = parseQuery(search);
  if (!parsed.ok) return sendError(res, parsed.error);
  const page = parsePageLimit(parsed.params.get('limit'), DEFAULT_PRODUCER_LIMIT, MAX_PRODUCER_LIMIT);
  if (!page.ok) return sendError(res, page.error);
  const limit = page.value;
  // An empty `after` starts at the first record, as the other listings take it (no producer id is empty).
  const after = parsed.params.get('after') || null;
  const stream = await ctx.store.getStream(address.key);
  const absent = absenceError(stream, ctx.now());
  if (absent) return sendError(res, absent);
  const listing = await ctx.store.listProducers(stream!, after, limit);
  const producers = listing.producers.map((p) => ({ id: p.id, epoch: p.epoch, lastSeq: p.lastSeq, lastWriteAt: new Date(p.lastSeenMs).toISOString() }));
  sendJson(res, 200, { producers, next: listing.nextAfter }, extensionHeaders(address, stream!));
}

/** `/metrics` on its own address (`--metrics-port`), so that the main one need not expose it. */
export function metricsServer(metrics: RillMetrics): Server {
  return createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) return sendError(res, protocolError('NOT_FOUND', 'only GET /metrics is served here'));
    sendMetrics(res, metrics).catch(() => sendError(res, protocolError('INTERNAL', 'the metrics could not be collected')));
  });
}
