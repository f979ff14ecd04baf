/**
 * Operator routes: `GET /` lists buckets, `/readyz` says whether the store can serve,
 * `/metrics` is Prometheus' scrape, `/stats` and `{stream}/stats` are what `rill stats`
 * prints. Bucket ids are at least 4 characters, so `/` and the reserved names
 * (router.ts) never shadow a bucket.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { absenceError } from '../core/stream.js';
import type { StreamState } from '../core/types.js';
import { isJsonContentType } from '../protocol/content-type.js';
import { protocolError } from '../protocol/errors.js';
import { countJsonMessages } from '../protocol/json.js';
import { parseCanonicalUint } from '../protocol/parse.js';
import type { RillMetrics } from '../ops/metrics.js';
import type { StorageObserver, Store } from '../storage/store.js';
import { MAX_LIST_LIMIT } from './buckets.js';
import type { HandlerContext } from './context.js';
import { parseQuery } from './request.js';
import { send, sendError, sendJson } from './response.js';
import type { AdminRoute, StreamAddress } from './router.js';
import { extensionHeaders } from './stream-headers.js';

const DEFAULT_BUCKET_LIMIT = 100;
/**
 * `/stats` and `{stream}/stats` count messages by reading what is held; past this many
 * bytes they do not (messages: null). Nor does `/stats` past MAX_COUNTED_STREAMS streams.
 */
export const MAX_COUNTED_BYTES = 256 * 1024 * 1024;
export const MAX_COUNTED_STREAMS = 10_000;
const KEY_PAGE = 1000;
const COUNT_PAGE_BYTES = 4 * 1024 * 1024;

/** Why the server is not ready, or null when it is. */
export interface ReadinessSources {
  /** False until the server listens. */
  started(): boolean;
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
      const [totals, bytes] = await Promise.all([ctx.store.totals(), ctx.store.heldBytes()]);
      const countable = bytes <= MAX_COUNTED_BYTES && totals.streams <= MAX_COUNTED_STREAMS;
      const messages = countable ? await countAllMessages(ctx.store) : null;
      return sendJson(res, 200, { ...totals, bytes, messages, liveReaders: { sse: ctx.live.held.sse, longPoll: ctx.live.held.long_poll } });
    }
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
  const rawLimit = parsed.params.get('limit');
  const limit = rawLimit === undefined ? DEFAULT_BUCKET_LIMIT : parseCanonicalUint(rawLimit, MAX_LIST_LIMIT);
  if (limit === undefined || limit < 1) return sendError(res, protocolError('INVALID_QUERY', `limit must be an integer from 1 to ${MAX_LIST_LIMIT}`));
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

/** `GET {stream}/stats`: bytes held, messages, producer records, live readers waiting. */
export async function handleStreamStats(res: ServerResponse, ctx: HandlerContext, address: StreamAddress): Promise<void> {
  const stream = await ctx.store.getStream(address.key);
  const absent = absenceError(stream, ctx.now());
  if (absent) return sendError(res, absent);
  const s = stream!;
  const bytes = s.tail - s.earliestOffset;
  const body = {
    tail: s.tail,
    earliestOffset: s.earliestOffset,
    bytes,
    messages: bytes > MAX_COUNTED_BYTES ? null : await countMessages(ctx.store, s),
    producers: await ctx.store.countProducers(s),
    liveReaders: ctx.hub.waitingOn(address.key),
    closed: s.closed,
  };
  sendJson(res, 200, body, extensionHeaders(address, s));
}

/** Messages from the earliest offset to the tail: lines of a JSON stream, appends of any other. */
async function countMessages(store: Store, stream: StreamState): Promise<number> {
  const json = isJsonContentType(stream.config.contentType);
  let messages = 0;
  for (let from = stream.earliestOffset; from < stream.tail; ) {
    const chunks = await store.readChunks(stream, from, COUNT_PAGE_BYTES);
    if (chunks.length === 0) break;
    for (const chunk of chunks) {
      if (json) messages += countJsonMessages(chunk.data);
      else if (chunk.start >= from) messages++;
    }
    const last = chunks[chunks.length - 1]!;
    from = Math.max(from + 1, last.start + last.data.length);
  }
  return messages;
}

/** Messages of every stream `totals` counts; a stream deleted meanwhile counts none. */
async function countAllMessages(store: Store): Promise<number> {
  let messages = 0;
  for (let after: string | null = null; ; ) {
    const keys = await store.streamKeys(after, KEY_PAGE);
    for (const key of keys) {
      const stream = await store.getStream(key);
      if (stream && !stream.deleted) messages += await countMessages(store, stream);
    }
    if (keys.length < KEY_PAGE) return messages;
    after = keys[keys.length - 1]!;
  }
}

/** `/metrics` on its own address (`--metrics-port`), so that the main one need not expose it. */
export function metricsServer(metrics: RillMetrics): Server {
  return createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) return sendError(res, protocolError('NOT_FOUND', 'only GET /metrics is served here'));
    sendMetrics(res, metrics).catch(() => sendError(res, protocolError('INTERNAL', 'the metrics could not be collected')));
  });
}
