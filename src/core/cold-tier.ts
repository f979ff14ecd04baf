/**
 * The cold tier's rules (docs/decisions.md, "Cold tier on object storage"): which of a
 * stream's bytes are sealed and may move to object storage, what the next upload holds,
 * what an object is named, where the boundary between the tiers stands, and when writes
 * are refused because uploads are behind. Pure: the time is passed in.
 */
import { protocolError, type ProtocolError } from '../protocol/errors.js';

export interface HotWindow {
  /** A stream's last this many bytes stay hot. */
  bytes: number;
  /** Bytes younger than this stay hot; 0: age keeps nothing hot. */
  ageMs: number;
}

/** The stream's tail as seen at a moment: every byte before `offset` was written at or before `atMs`. */
export interface TailMark {
  offset: number;
  atMs: number;
}

/** What the engine tells of a stream's hot bytes. */
export interface HotView {
  tail: number;
  /**
   * The highest offset the engine lets move: the start of its last indexed row and its
   * row's stored tail, whichever is lower (the engine reads a lagging tail from there).
   */
  movableEnd: number;
  /** Where each indexed hot row ends, ascending, from the first hot row on. */
  rowEnds: readonly number[];
  /** Where the first hot row starts. */
  hotStart: number;
}

/**
 * The offset below which the stream's bytes are sealed: out of its last `window.bytes`
 * and older than `window.ageMs` at `nowMs`. With an age, only bytes a mark shows were
 * there `ageMs` ago qualify (the greatest such mark's offset); with no such mark, none.
 */
export function sealLimit(tail: number, window: HotWindow, marks: readonly TailMark[], nowMs: number): number {
  const byBytes = Math.max(0, tail - window.bytes);
  if (window.ageMs <= 0) return byBytes;
  let byAge = 0;
  for (const mark of marks) if (mark.atMs <= nowMs - window.ageMs && mark.offset > byAge) byAge = mark.offset;
  return Math.min(byBytes, byAge);
}

/**
 * The marks worth keeping after recording `tail` at `nowMs`: one per distinct tail, and
 * of those older than the age window only the newest (it alone decides sealLimit).
 */
export function nextMarks(marks: readonly TailMark[], tail: number, nowMs: number, window: HotWindow): TailMark[] {
  const kept = marks.filter((m) => m.offset <= tail);
  if (kept.at(-1)?.offset !== tail) kept.push({ offset: tail, atMs: nowMs });
  const old = kept.filter((m) => m.atMs <= nowMs - window.ageMs);
  const young = kept.filter((m) => m.atMs > nowMs - window.ageMs);
  return old.length === 0 ? young : [old.at(-1)!, ...young];
}

/**
 * The range of the next upload, or null when none is due: whole rows from the first hot
 * one, ending at or below the seal limit and the engine's movable end, up to
 * `segmentBytes` (a single larger row alone). A range shorter than `segmentBytes` waits
 * for more, so the object store is not filled with small objects.
 */
export function nextSegment(view: HotView, limit: number, segmentBytes: number): { start: number; end: number } | null {
  const ceiling = sealCeiling(view, limit);
  let end = view.hotStart;
  let full = false;
  for (const rowEnd of view.rowEnds) {
    if (rowEnd > ceiling) break;
    // A row that would take the segment past its size starts the next one.
    if (end > view.hotStart && rowEnd - view.hotStart > segmentBytes) {
      full = true;
      break;
    }
    end = rowEnd;
    if (end - view.hotStart >= segmentBytes) {
      full = true;
      break;
    }
  }
  return full ? { start: view.hotStart, end } : null;
}

/** The highest offset a segment may end at now: the seal limit or the engine's movable end, the lower. */
export function sealCeiling(view: Pick<HotView, 'movableEnd'>, limit: number): number {
  return Math.min(limit, view.movableEnd);
}

/**
 * Sealed bytes still hot that the uploader can move: from the first hot row to the end of
 * the last whole row at or below the ceiling (`wholeRowsEnd`). A row the ceiling cuts
 * waits for the stream to grow, and is not counted, so that an idle stream's lag falls to
 * under a segment once uploads succeed.
 */
export function uploadLag(view: Pick<HotView, 'hotStart'>, wholeRowsEnd: number): number {
  return Math.max(0, wholeRowsEnd - view.hotStart);
}

export interface SegmentRef {
  start: number;
  end: number;
}

/** Where the cold tier ends: the end of the stream's last segment, or 0 when it has none. */
export function coldEnd(segments: readonly SegmentRef[]): number {
  return segments.reduce((end, s) => Math.max(end, s.end), 0);
}

/**
 * The part of a stream's history its segments hold from `earliestOffset` on: the range
 * (clipped to it), how many segments and their objects' size. With no segment there, an
 * empty range at `earliestOffset`.
 */
export function coldRangeOf(segments: readonly (SegmentRef & { bytes: number })[], earliestOffset: number): { start: number; end: number; segments: number; objectBytes: number } {
  const held = segments.filter((s) => s.end > earliestOffset);
  if (held.length === 0) return { start: earliestOffset, end: earliestOffset, segments: 0, objectBytes: 0 };
  const start = Math.max(earliestOffset, held.reduce((min, s) => Math.min(min, s.start), Infinity));
  return { start, end: coldEnd(held), segments: held.length, objectBytes: held.reduce((sum, s) => sum + s.bytes, 0) };
}

/** Offsets in keys are zero-padded so that a listing comes in stream order. */
const OFFSET_DIGITS = 16;

/**
 * An object's key: one stream incarnation and one range name one content only, so an
 * upload repeated after a crash writes the same bytes to the same key, and two servers on
 * one bucket never write each other's keys.
 */
export function segmentKey(prefix: string, streamId: number, incarnation: string, start: number, end: number): string {
  const pad = (n: number) => String(n).padStart(OFFSET_DIGITS, '0');
  return `${prefix === '' ? '' : `${prefix}/`}${streamId}.${incarnation}/${pad(start)}-${pad(end)}.rseg`;
}

/**
 * Whether the sweep may remove a segment: its stream is no longer stored (`earliestOffset`
 * null), or it lies wholly below the stream's earliest offset (reads there are answered
 * 410 before any fetch) and no fork reads the stream's history (a fork may read its
 * source below the source's own earliest offset).
 */
export function segmentUnreachable(segment: SegmentRef, earliestOffset: number | null, forkRefs: number): boolean {
  return earliestOffset === null || (forkRefs === 0 && segment.end <= earliestOffset);
}

/** Writes that add data are refused once the upload lag passes `maxBacklogBytes`. */
export function coldBacklogRefusal(lagBytes: number, maxBacklogBytes: number): ProtocolError | null {
  if (maxBacklogBytes <= 0 || lagBytes <= maxBacklogBytes) return null;
  return protocolError(
    'COLD_STORE_BACKLOG',
    `the cold store is behind: ${lagBytes} bytes of sealed history await upload (limit ${maxBacklogBytes}); the write was not applied (deletes and retention still work)`,
    { retryAfterSeconds: 10 },
  );
}

/** The upload retry's wait after `failures` failures in a row: doubling from `baseMs`, at most `maxMs`. */
export function uploadBackoffMs(failures: number, baseMs: number, maxMs: number): number {
  if (failures <= 0) return 0;
  return Math.min(maxMs, baseMs * 2 ** Math.min(failures - 1, 30));
}
