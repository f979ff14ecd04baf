/** GET of a stream: catch-up and long-poll reads. SSE lives in `live/sse.ts`. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { nextCursor } from '../core/cursor.js';
import { parseRecordQuery, type RecordQuery } from '../core/records.js';
import { windowEnd } from '../core/window.js';
import { alignmentProbe, endsStream, misalignedReadError, planLiveResume, planRead, type LiveMode, type ReadRequest } from '../core/read.js';
import type { StreamState } from '../core/types.js';
import { isJsonContentType } from '../protocol/content-type.js';
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import { H } from '../protocol/headers.js';
import { countJsonMessages, ndjsonToArray } from '../protocol/json.js';
import { encodeOffset, parseOffsetToken } from '../protocol/offset.js';
import { parseCanonicalUint } from '../protocol/parse.js';
import type { Follower } from '../live/hub.js';
import { hangupOf } from '../live/latch.js';
import { serveSse, type SseOptions } from '../live/sse.js';
import { readWindow, type ReadWindow } from '../live/window.js';
import { tokenExpiryOf } from './access.js';
import type { HandlerContext } from './context.js';
import { header, parseQuery, incarnationOf } from './request.js';
import { handleRecordRead } from './record-reads.js';
import { answerHeaders, bodyWriter, send, sendError, type HeaderMap } from './response.js';
import { extensionHeaders, storedBodyHeaders } from './stream-headers.js';
import type { StreamAddress } from './router.js';
import { countServed, holdLiveUsage } from './usage.js';

export interface ReadQuery {
  request: ReadRequest;
  cursor: string | null;
  maxBytes: number;
  timeoutMs: number;
  /** A record-aware read's parameters (core/records.ts); null for an offset read. */
  records: RecordQuery | null;
}

function queryError(message: string): { ok: false; error: ProtocolError } {
  return { ok: false, error: protocolError('INVALID_QUERY', message) };
}

export function parseReadQuery(search: string, req: IncomingMessage, ctx: HandlerContext): { ok: true; query: ReadQuery } | { ok: false; error: ProtocolError } {
  const parsed = parseQuery(search);
  if (!parsed.ok) return parsed;
  const q = parsed.params;
  const rawOffset = q.get('offset');
  const offset = rawOffset === undefined ? null : parseOffsetToken(rawOffset);
  if (offset === undefined) return { ok: false, error: protocolError('INVALID_OFFSET', `"${rawOffset}" is not an offset: use -1 (the start), now (the tail) or an offset rill answered, 20 digits as in Stream-Next-Offset`) };
  const liveRaw = q.get('live');
  if (liveRaw !== undefined && liveRaw !== 'long-poll' && liveRaw !== 'sse') return queryError('live must be long-poll or sse');
  const live: LiveMode = (liveRaw as LiveMode | undefined) ?? null;
  const consistency = q.get('consistency');
  if (consistency !== undefined && consistency !== 'local' && consistency !== 'leader') return queryError('consistency must be local or leader');
  if (consistency === 'leader' && live !== null) return queryError('consistency=leader applies to catch-up reads only');
  const s = ctx.settings;
  let maxBytes = s.readChunkBytes;
  const rawMax = q.get('max_bytes');
  if (rawMax !== undefined) {
    const value = parseCanonicalUint(rawMax, Number.MAX_SAFE_INTEGER);
    if (value === undefined || value === 0) return queryError('max_bytes must be a positive integer');
    maxBytes = Math.min(value, s.maxReadBytes);
  }
  let timeoutMs = s.longPollTimeoutMs;
  const rawTimeout = q.get('timeout_ms');
  if (rawTimeout !== undefined) {
    const value = parseCanonicalUint(rawTimeout, Number.MAX_SAFE_INTEGER);
    if (value === undefined) return queryError('timeout_ms must be a non-negative integer');
    timeoutMs = Math.min(value, s.maxLongPollTimeoutMs);
  }
  const records = parseRecordQuery({
    record: q.get('record'),
    tailRecords: q.get('tail_records'),
    maxRecords: q.get('max_records'),
    recordView: q.get('record_view'),
    offset: rawOffset !== undefined,
  });
  if (!records.ok) return records;
  const request: ReadRequest = { offset, live, incarnation: incarnationOf(req) };
  return { ok: true, query: { request, cursor: q.get('cursor') ?? null, maxBytes, timeoutMs, records: records.query } };
}

/** A JSON read must start where a message starts (core decides; this reads the byte it asks for). */
async function misalignedError(ctx: HandlerContext, stream: StreamState, position: number): Promise<ProtocolError | null> {
  const probe = alignmentProbe(stream, position);
  if (probe === null) return null;
  return misalignedReadError((await ctx.store.readRange(stream, probe, 1))[0]);
}

function wantsNdjson(req: IncomingMessage): boolean {
  const accept = header(req, 'accept') ?? '';
  return /application\/(x-)?ndjson/i.test(accept);
}

/** `view` tells representations of the same bytes apart (the record views). */
export function etagFor(stream: StreamState, from: number, next: number, view = ''): string {
  return `"${stream.incarnation}:${from}:${next}${endsStream(stream, next) ? ':c' : ''}${view}"`;
}

export function etagMatches(req: IncomingMessage, etag: string): boolean {
  const raw = header(req, 'if-none-match');
  if (raw === undefined) return false;
  return raw.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag || tag.trim() === '*');
}

/** Renders a window of a JSON or plain stream (the bytes of a plain one as stored, never joined). */
function body(req: IncomingMessage, stream: StreamState, window: ReadWindow): { contentType: string; payload: Buffer | readonly Buffer[] } {
  if (!isJsonContentType(stream.config.contentType)) return { contentType: stream.config.contentType, payload: window.parts };
  if (wantsNdjson(req)) return { contentType: 'application/x-ndjson', payload: window.parts };
  return { contentType: stream.config.contentType, payload: ndjsonToArray(window.data) };
}

export function positionHeaders(stream: StreamState, next: number): HeaderMap {
  const headers: HeaderMap = { [H.streamNextOffset]: encodeOffset(next), [H.streamIncarnation]: stream.incarnation };
  if (next >= stream.tail) headers[H.streamUpToDate] = 'true';
  if (endsStream(stream, next)) headers[H.streamClosed] = 'true';
  return headers;
}

/**
 * History below the tail never changes, so shared caches may keep it a minute. A reader
 * that names an incarnation must reach the server to learn the stream was recreated
 * (412), so its answers are revalidated every time, and cached answers vary on it.
 */
export function cacheHeaders(req: IncomingMessage, upToDate: boolean): HeaderMap {
  const vary = header(req, 'origin') === undefined ? 'Stream-Incarnation' : 'Origin, Stream-Incarnation';
  if (incarnationOf(req) !== null) return { 'cache-control': 'private, no-cache', vary };
  return { 'cache-control': upToDate ? 'no-cache' : 'public, max-age=60, stale-while-revalidate=300', vary };
}

/** The headers of an answer with the bytes `[from, next)`, and whether the reader holds them already (304). */
function dataHeaders(req: IncomingMessage, stream: StreamState, from: number, next: number, extra: HeaderMap): { headers: HeaderMap; unchanged: boolean } {
  const etag = etagFor(stream, from, next);
  // Object.assign rather than spread: see send().
  const headers = Object.assign(positionHeaders(stream, next), { etag }, cacheHeaders(req, next >= stream.tail), extra);
  return { headers, unchanged: etagMatches(req, etag) };
}

function sendData(req: IncomingMessage, res: ServerResponse, stream: StreamState, from: number, window: ReadWindow, extra: HeaderMap): void {
  const { headers, unchanged } = dataHeaders(req, stream, from, window.next, extra);
  if (unchanged) return send(res, 304, headers);
  const rendered = body(req, stream, window);
  send(res, 200, Object.assign(headers, storedBodyHeaders(rendered.contentType)), rendered.payload);
}

/**
 * sendData for a catch-up of a plain stream on an engine that hands bytes on as they load
 * (store.ts, streamChunks): the window's end is known before it loads (a plain window is
 * every byte up to `maxBytes` or the tail), so the head leaves with the first bytes. A
 * failure before them is answered as any read's; after them, the response is cut (send).
 */
async function streamData(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, stream: StreamState, from: number, maxBytes: number, extra: HeaderMap): Promise<void> {
  const next = windowEnd(stream.tail, from, maxBytes);
  countBytesRead(req, ctx, stream, next - from, 0);
  const { headers, unchanged } = dataHeaders(req, stream, from, next, extra);
  if (unchanged) return send(res, 304, headers);
  const body = bodyWriter(res, Object.assign(headers, storedBodyHeaders(stream.config.contentType)), next - from);
  await ctx.store.streamChunks!(stream, from, maxBytes, body.write);
  body.end();
}

export async function handleRead(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, address: StreamAddress, search: string): Promise<void> {
  const parsed = parseReadQuery(search, req, ctx);
  const found = await ctx.store.getStream(address.key);
  // Every answer about an existing stream names the extensions active for it, refusals included.
  const extensions = extensionHeaders(address, found ?? null);
  if (!parsed.ok) return sendError(res, parsed.error, extensions);
  const { query } = parsed;
  if (query.records) return handleRecordRead(req, res, ctx, { address, stream: found, query, records: query.records, extensions });
  const nowMs = ctx.now();
  const plan = planRead(found, query.request, nowMs);
  if (!plan.ok) return sendError(res, plan.error, extensions);
  const misaligned = await misalignedError(ctx, plan.stream, plan.position);
  if (misaligned) return sendError(res, misaligned, extensions);
  // The same instant that judged the stream live renews it, so an expired stream is never revived.
  ctx.store.touch(plan.stream, nowMs);
  if (query.request.live === 'sse') return startSse(req, res, ctx, { address, stream: plan.stream, position: plan.position, query, extensions, records: null });
  if (query.request.live === 'long-poll') return longPoll(req, res, ctx, { address, first: plan.stream, position: plan.position, query }, offsetAnswers(req, res, extensions));
  if (query.request.offset?.kind === 'now') return sendTail(res, plan.stream, extensions);
  if (ctx.store.streamChunks && req.method === 'GET' && !isJsonContentType(plan.stream.config.contentType)) {
    return streamData(req, res, ctx, plan.stream, plan.position, query.maxBytes, extensions);
  }
  const window = await readWindow(ctx.store, plan.stream, plan.position, query.maxBytes, false);
  countRead(req, ctx, plan.stream, window);
  sendData(req, res, plan.stream, plan.position, window, extensions);
}

/** What a live SSE read starts from. */
export interface SseStart {
  address: StreamAddress;
  stream: StreamState;
  position: number;
  query: ReadQuery;
  extensions: HeaderMap;
  /** A record-aware reader's first record and view; null for an offset reader. */
  records: SseOptions['records'];
}

export function startSse(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, start: SseStart): Promise<void> | void {
  if (!ctx.hub.acquire()) return sendError(res, liveRefusal(ctx), start.extensions);
  ctx.live.track('sse', res);
  holdLiveUsage(req, res, ctx, start.address.bucket);
  return serveSse(res, {
    store: ctx.store,
    hub: ctx.hub,
    key: start.address.key,
    stream: start.stream,
    position: start.position,
    clientCursor: start.query.cursor,
    maxBytes: start.query.maxBytes,
    lifetimeMs: ctx.settings.sseLifetimeMs,
    heartbeatMs: ctx.settings.sseHeartbeatMs,
    maxBufferedBytes: ctx.settings.sseMaxBufferedBytes,
    now: ctx.now,
    tokenExpiresAtMs: tokenExpiryOf(req),
    baseHeaders: Object.assign({}, answerHeaders(res), start.extensions),
    records: start.records,
    served: (bytes) => countServed(req, ctx, start.address.bucket, bytes),
  });
}

/** How a long-poll answers: with data read from `position`, or with nothing at the tail. */
export interface LongPollAnswers {
  data(stream: StreamState, position: number, window: ReadWindow, cursor: string): void;
  none(stream: StreamState, cursor: string): void;
}

function offsetAnswers(req: IncomingMessage, res: ServerResponse, extensions: HeaderMap): LongPollAnswers {
  return {
    data: (stream, position, window, cursor) => sendData(req, res, stream, position, window, Object.assign({ [H.streamCursor]: cursor }, extensions)),
    none: (stream, cursor) => sendNoData(res, stream, cursor, extensions),
  };
}

/** Adds a read's bytes to the reader's usage, and its bytes and messages on a JSON stream (one per line) to the metrics. */
export function countRead(req: IncomingMessage, ctx: HandlerContext, stream: StreamState, window: ReadWindow): void {
  countBytesRead(req, ctx, stream, window.length, isJsonContentType(stream.config.contentType) ? countJsonMessages(window.data) : 0);
}

/** countRead by its figures: a streamed read counts its bytes before they load. */
function countBytesRead(req: IncomingMessage, ctx: HandlerContext, stream: StreamState, bytes: number, messages: number): void {
  countServed(req, ctx, stream.bucket, bytes);
  ctx.metrics?.readServed(bytes, messages);
}

/** `offset=now` without live: no data, the tail position. */
function sendTail(res: ServerResponse, stream: StreamState, extensions: HeaderMap): void {
  const json = isJsonContentType(stream.config.contentType);
  const headers = Object.assign(positionHeaders(stream, stream.tail), storedBodyHeaders(stream.config.contentType), { 'cache-control': 'no-store' }, extensions);
  send(res, 200, headers, json ? '[]' : '');
}

export function sendNoData(res: ServerResponse, stream: StreamState, cursor: string, extra: HeaderMap): void {
  const headers = positionHeaders(stream, stream.tail);
  headers['cache-control'] = 'no-store';
  if (!stream.closed) headers[H.streamCursor] = cursor;
  send(res, 204, Object.assign(headers, extra));
}

/** Where a long-poll waits: on the stream at `address`, from `position` of its state `first`. */
export interface LongPollAt {
  address: StreamAddress;
  first: StreamState;
  position: number;
  query: ReadQuery;
}

export async function longPoll(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, at: LongPollAt, answers: LongPollAnswers): Promise<void> {
  const { address, first, position, query } = at;
  const cursor = nextCursor(ctx.now(), query.cursor, Math.random());
  const deadline = ctx.now() + query.timeoutMs;
  let stream = first;
  let holding = false;
  const hangup = hangupOf(res);
  const tokenExpiresAtMs = tokenExpiryOf(req) ?? Infinity;
  const follower = longPollFollower(ctx, at);
  let handed: LongPollChange | null = null;
  try {
    for (;;) {
      // The token was valid when the wait began; once it expires the reader learns so (401), not more data.
      if (ctx.now() >= tokenExpiresAtMs) return sendError(res, protocolError('TOKEN_EXPIRED', 'the token expired during the long-poll; retry with a fresh one'));
      if (position < stream.tail) {
        const window = handed?.window ?? (await readWindow(ctx.store, stream, position, query.maxBytes, false));
        countRead(req, ctx, stream, window);
        return answers.data(stream, position, window, cursor);
      }
      const remaining = deadline - ctx.now();
      if (stream.closed || remaining <= 0 || ctx.hub.isDraining) return answers.none(stream, cursor);
      if (!holding) {
        if (!ctx.hub.acquire()) return sendError(res, liveRefusal(ctx));
        ctx.live.track('long_poll', res);
        holdLiveUsage(req, res, ctx, address.bucket);
        holding = true;
      }
      const woke = await ctx.hub.wait(address.key, Math.min(remaining, tokenExpiresAtMs - ctx.now()), hangup, follower);
      if (woke === 'aborted' && hangup.fired) return;
      handed = follower.handed();
      if (handed !== null) {
        stream = handed.stream;
        continue;
      }
      // The wait began on one incarnation: if the stream was recreated meanwhile, its
      // bytes at this position belong to another stream, so the reader is told (412).
      const plan = planLiveResume(await ctx.store.getStream(address.key), position, 'long-poll', first.incarnation, ctx.now());
      if (!plan.ok) return sendError(res, plan.error);
      stream = plan.stream;
    }
  } finally {
    if (holding) ctx.hub.release();
  }
}

/** What a commit brought long-polls waiting at one position: the stream to answer from, and its window when it has new bytes. */
interface LongPollChange {
  stream: StreamState;
  window: ReadWindow | null;
}

/** A commit that brought the waiting long-polls nothing: another node's seen twice, the periodic check of live/remote.ts. */
const NOTHING_NEW = 'nothing new';

/**
 * How a long-poll waiting at the tail takes a commit (live/hub.ts, Follower): the hub
 * reads the stream once for all its followers, and once per position and window size the
 * window they answer with. A commit that brought nothing new leaves them waiting; one that
 * brought bytes or a closure ends the wait with what they answer (`taken`); anything else
 * (the stream gone, recreated or expired) ends it with nothing taken, and the reader looks
 * at the stream itself. Each long-poll reading the stream on every wake cost, on
 * PostgreSQL, a query per reader per wake (issue 41).
 */
function longPollFollower(ctx: HandlerContext, at: LongPollAt): Follower<LongPollChange | typeof NOTHING_NEW | null> & { handed(): LongPollChange | null } {
  const { first, position, query } = at;
  let taken: LongPollChange | null = null;
  return {
    /** What the last wait took, once. */
    handed: () => {
      const change = taken;
      taken = null;
      return change;
    },
    key: () => `${first.incarnation}:${position}:${query.maxBytes}`,
    prepare: async (found) => {
      const plan = planLiveResume(found, position, 'long-poll', first.incarnation, ctx.now());
      if (!plan.ok) return null;
      if (plan.stream.tail > position) return { stream: plan.stream, window: await readWindow(ctx.store, plan.stream, position, query.maxBytes, false) };
      return plan.stream.closed ? { stream: plan.stream, window: null } : NOTHING_NEW;
    },
    take: (change) => {
      if (change === NOTHING_NEW) return true;
      taken = change;
      return false;
    },
  };
}

/** Why a live reader gets no slot: the server is shutting down, or it holds too many. */
export function liveRefusal(ctx: HandlerContext): ProtocolError {
  if (ctx.hub.isDraining) return protocolError('UNAVAILABLE', 'the server is shutting down; retry later', { retryAfterSeconds: 1 });
  return protocolError('TOO_MANY_CONNECTIONS', 'the server holds too many live readers; retry later', { retryAfterSeconds: 1 });
}
