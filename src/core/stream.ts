/**
 * Stream lifecycle rules: visibility, expiry, the incarnation check, deletion and the
 * release of fork sources. Pure functions of state and time.
 */
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import type { StreamState } from './types.js';

export type Visibility = 'live' | 'gone' | 'missing';

/** When the stream expires, or null when it never does. */
export function expiryMs(state: StreamState): number | null {
  const { ttlSeconds, expiresAtMs } = state.config;
  const slidingMs = ttlSeconds === null ? null : state.lastAccessMs + ttlSeconds * 1000;
  if (slidingMs === null) return expiresAtMs;
  if (expiresAtMs === null) return slidingMs;
  return Math.min(slidingMs, expiresAtMs);
}

export function isExpired(state: StreamState, nowMs: number): boolean {
  const at = expiryMs(state);
  return at !== null && nowMs >= at;
}

/**
 * Listed at `nowMs` (bucket listings and their stream counts): not deleted, not past its
 * expiry. Engines render it as a query over `deleted` and `expiry_ms` (expiryMs);
 * test/storage/stream-queries.test.ts holds them to it.
 */
export function isListed(state: StreamState, nowMs: number): boolean {
  return !state.deleted && !isExpired(state, nowMs);
}

/** For the expiry sweep at `nowMs`: past its expiry and not yet deleted (the other side of isListed). */
export function isCollectable(state: StreamState, nowMs: number): boolean {
  return !state.deleted && isExpired(state, nowMs);
}

/**
 * A deleted or expired stream that forks still read from is `gone` (410) and keeps its
 * name; one nothing depends on is `missing` (404) and may be collected.
 */
export function visibility(state: StreamState | undefined, nowMs: number): Visibility {
  if (state === undefined) return 'missing';
  if (state.deleted) return 'gone';
  if (isExpired(state, nowMs)) return state.forkRefs > 0 ? 'gone' : 'missing';
  return 'live';
}

export function notFound(kind: 'stream' | 'bucket' = 'stream'): ProtocolError {
  return kind === 'stream'
    ? protocolError('STREAM_NOT_FOUND', 'stream not found')
    : protocolError('BUCKET_NOT_FOUND', 'bucket not found');
}

export function goneError(): ProtocolError {
  return protocolError('STREAM_GONE', 'stream was deleted; forks still read its history');
}

/** The 404/410 answer for a stream that is not live, or null when it is. */
export function absenceError(state: StreamState | undefined, nowMs: number): ProtocolError | null {
  const seen = visibility(state, nowMs);
  if (seen === 'missing') return notFound();
  if (seen === 'gone') return goneError();
  return null;
}

/** Stream-Incarnation: a request that names another incarnation is refused with 412. */
export function incarnationError(state: StreamState, requested: string | null): ProtocolError | null {
  if (requested === null || requested === state.incarnation) return null;
  return protocolError('INCARNATION_MISMATCH', 'Stream-Incarnation does not name the current incarnation of the stream (it was recreated, or the token is not one this stream was given)', {
    incarnation: state.incarnation,
  });
}

export type DeleteDecision =
  | { kind: 'rejected'; error: ProtocolError }
  /** Forks still read it: keep the history, answer 410 from now on. */
  | { kind: 'soft-deleted'; next: StreamState }
  | { kind: 'dropped'; dropped: StreamState };

export function decideDelete(state: StreamState | undefined, incarnation: string | null, nowMs: number): DeleteDecision {
  const absent = absenceError(state, nowMs);
  if (absent) return { kind: 'rejected', error: absent };
  const stale = incarnationError(state!, incarnation);
  if (stale) return { kind: 'rejected', error: stale };
  if (state!.forkRefs > 0) return { kind: 'soft-deleted', next: { ...state!, deleted: true } };
  return { kind: 'dropped', dropped: state! };
}

export type ReleaseDecision = { kind: 'kept'; next: StreamState } | { kind: 'dropped'; dropped: StreamState };

/**
 * A fork of `source` was dropped. The source is collected when nothing reads it any
 * more and it is itself deleted or expired.
 */
export function decideRelease(source: StreamState, nowMs: number): ReleaseDecision {
  if (source.forkRefs <= 0) throw new Error(`invariant: stream ${source.id} released with no fork references`);
  const next = { ...source, forkRefs: source.forkRefs - 1 };
  if (next.forkRefs === 0 && (next.deleted || isExpired(next, nowMs))) return { kind: 'dropped', dropped: next };
  return { kind: 'kept', next };
}

export type ExpireDecision = { kind: 'none' } | { kind: 'soft-deleted'; next: StreamState } | { kind: 'dropped'; dropped: StreamState };

/** What the expiry sweep does with a stream. */
export function decideExpire(state: StreamState, nowMs: number): ExpireDecision {
  if (state.deleted || !isExpired(state, nowMs)) return { kind: 'none' };
  if (state.forkRefs > 0) return { kind: 'soft-deleted', next: { ...state, deleted: true } };
  return { kind: 'dropped', dropped: state };
}

/**
 * A copy of a state for the write path to change before handing it on. Written out field
 * by field, not spread: V8 copies an object holding double fields (the millisecond times)
 * through its slow generic path, and under callgrind that spread was the largest single
 * builtin cost of an append (4,800 of its 120,000 instructions on the event loop). A field
 * added to StreamState and missing here fails to compile.
 */
/**
 * Where the bytes a stream holds itself begin: its earliest offset, or for a fork its fork
 * point (what lies before it is the source's). A bucket's retained bytes (--bucket-max-bytes)
 * are each undeleted stream's tail less this.
 */
export function ownStart(state: StreamState): number {
  return Math.max(state.earliestOffset, state.fork?.offset ?? 0);
}

export function copyState(s: StreamState): StreamState {
  const copy: StreamState = {
    id: s.id,
    name: s.name,
    bucket: s.bucket,
    incarnation: s.incarnation,
    config: s.config,
    createdAtMs: s.createdAtMs,
    lastAccessMs: s.lastAccessMs,
    tail: s.tail,
    closed: s.closed,
    lastStreamSeq: s.lastStreamSeq,
    epochFloor: s.epochFloor,
    fork: s.fork,
    earliestOffset: s.earliestOffset,
    deleted: s.deleted,
    forkRefs: s.forkRefs,
    attrs: s.attrs,
    snapshot: s.snapshot,
    recordFirst: s.recordFirst,
    recordNext: s.recordNext,
  };
  // Absent rather than undefined, so that states compare equal across engines.
  if (s.timeMarks !== undefined) copy.timeMarks = s.timeMarks;
  if (s.ageDueMs !== undefined) copy.ageDueMs = s.ageDueMs;
  return copy;
}

/** The last access a read or write at `nowMs` leaves: it renews a sliding TTL. */
export function accessAfter(state: StreamState, nowMs: number): number {
  return state.config.ttlSeconds === null || nowMs <= state.lastAccessMs ? state.lastAccessMs : nowMs;
}

/**
 * True when a batch that ran at `ranAtMs` renewed this stream's sliding TTL (a create, an
 * append or a close: each stamps the time its batch ran). Its writer hears of it only once
 * the batch is durable, which on a busy disk can be hundreds of milliseconds later, so the
 * store renews such a stream once more when it answers: a stream with a TTL of N seconds
 * then lives at least N seconds after its writer's acknowledgement, not N less the flush.
 */
export function renewedInBatch(after: StreamState, ranAtMs: number): boolean {
  return after.config.ttlSeconds !== null && after.lastAccessMs === ranAtMs;
}

/** Reads and writes renew a sliding TTL; HEAD does not. */
export function touched(state: StreamState, nowMs: number): StreamState {
  const lastAccessMs = accessAfter(state, nowMs);
  if (lastAccessMs === state.lastAccessMs) return state;
  const next = copyState(state);
  next.lastAccessMs = lastAccessMs;
  return next;
}
