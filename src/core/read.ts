/**
 * Read planning: which position a read starts at, and which refusal it gets. Fetching
 * the bytes is the engine's job.
 */
import { isJsonContentType } from '../protocol/content-type.js';
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import type { OffsetParam } from '../protocol/offset.js';
import { resolveRecordStart, type RecordStart } from './records.js';
import { absenceError, incarnationError } from './stream.js';
import type { StreamState } from './types.js';
import { startsOnMessage } from './window.js';

export type LiveMode = 'long-poll' | 'sse' | null;

export interface ReadRequest {
  /** Null when the query has no offset (catch-up from the start). */
  offset: OffsetParam | null;
  live: LiveMode;
  incarnation: string | null;
}

export type ReadPlan = { ok: true; stream: StreamState; position: number; atTail: boolean } | { ok: false; error: ProtocolError };

/** Long-poll and SSE must name where they start. */
export function liveOffsetError(request: ReadRequest): ProtocolError | null {
  if (request.live !== null && request.offset === null) {
    return protocolError('INVALID_OFFSET', 'live reads need an offset parameter (-1, now, or a Stream-Next-Offset value)');
  }
  return null;
}

function trimmedError(stream: StreamState): ProtocolError {
  return protocolError('OFFSET_TRIMMED', 'the offset is before the earliest retained offset', { nextOffset: stream.earliestOffset });
}

function beyondTailError(stream: StreamState): ProtocolError {
  return protocolError('OFFSET_BEYOND_TAIL', 'the offset is beyond the stream tail', { nextOffset: stream.tail });
}

/**
 * Order: offset syntax -> exists (404/410) -> position (410 trimmed, 416 beyond tail)
 * -> incarnation (412): a read that would answer 404, 410 or 416 without
 * Stream-Incarnation still does with it.
 */
export function planRead(stream: StreamState | undefined, request: ReadRequest, nowMs: number): ReadPlan {
  const syntax = liveOffsetError(request);
  if (syntax) return { ok: false, error: syntax };
  const absent = absenceError(stream, nowMs);
  if (absent) return { ok: false, error: absent };
  const s = stream!;
  const offset = request.offset ?? { kind: 'start' };
  let position: number;
  if (offset.kind === 'now') position = s.tail;
  else if (offset.kind === 'start') {
    if (s.earliestOffset > 0) return { ok: false, error: trimmedError(s) };
    position = 0;
  } else {
    position = offset.position;
    if (position < s.earliestOffset) return { ok: false, error: trimmedError(s) };
    if (position > s.tail) return { ok: false, error: beyondTailError(s) };
  }
  const stale = incarnationError(s, request.incarnation);
  if (stale) return { ok: false, error: stale };
  return { ok: true, stream: s, position, atTail: position >= s.tail };
}

/**
 * A live reader woken by a commit, re-planned at the position it reached. Its response
 * already named an incarnation (SSE sends its headers once, with the stream's token), so
 * it is checked against that token whether or not the client sent one: seed 001, "Every
 * successful response that addresses a stream ... carries Stream-Incarnation" -- data
 * of a stream recreated at the same URL must never follow another incarnation's token.
 */
export function planLiveResume(stream: StreamState | undefined, position: number, live: 'long-poll' | 'sse', announced: string, nowMs: number): ReadPlan {
  return planRead(stream, { offset: { kind: 'at', position }, live, incarnation: announced }, nowMs);
}

/**
 * A JSON read may start only where a message starts, which the byte before it tells. The
 * position of that byte, for the caller to read, or null when the read needs no check:
 * not JSON, or at the start, the earliest retained offset or the tail.
 */
export function alignmentProbe(stream: StreamState, position: number): number | null {
  if (!isJsonContentType(stream.config.contentType) || position === 0 || position >= stream.tail) return null;
  if (position <= stream.earliestOffset) return null;
  return position - 1;
}

/** The refusal of a JSON read whose previous byte (read at alignmentProbe's position) does not end a message. */
export function misalignedReadError(previousByte: number | undefined): ProtocolError | null {
  if (startsOnMessage(previousByte)) return null;
  return protocolError('MISALIGNED_OFFSET', 'the offset is inside a JSON message');
}

/** HEAD: existence and incarnation only. */
export function planHead(stream: StreamState | undefined, incarnation: string | null, nowMs: number): ReadPlan {
  const absent = absenceError(stream, nowMs);
  if (absent) return { ok: false, error: absent };
  const stale = incarnationError(stream!, incarnation);
  if (stale) return { ok: false, error: stale };
  return { ok: true, stream: stream!, position: stream!.tail, atTail: true };
}

/** A response reaching the tail of a closed stream tells the reader the stream ended. */
export function endsStream(stream: StreamState, nextPosition: number): boolean {
  return stream.closed && nextPosition >= stream.tail;
}

export type RecordReadPlan = { ok: true; stream: StreamState; record: number } | { ok: false; error: ProtocolError };

/**
 * A record-aware read, as planRead orders an offset read: exists (404/410) -> the stream
 * numbers records (400) and the record is retained (410) and not beyond the tail (400)
 * -> incarnation (412).
 */
export function planRecordRead(stream: StreamState | undefined, start: RecordStart, incarnation: string | null, nowMs: number): RecordReadPlan {
  const absent = absenceError(stream, nowMs);
  if (absent) return { ok: false, error: absent };
  const resolved = resolveRecordStart(stream!, start);
  if (!resolved.ok) return resolved;
  const stale = incarnationError(stream!, incarnation);
  if (stale) return { ok: false, error: stale };
  return { ok: true, stream: stream!, record: resolved.record };
}
