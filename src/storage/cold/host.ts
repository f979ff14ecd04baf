/**
 * What an engine offers the cold tier (tiered-store.ts, uploader.ts): its hot rows, a
 * transaction that records a segment and deletes the rows it holds, and its segment rows.
 *
 * An engine answers synchronously (SQLite, on the event loop) or with a promise
 * (PostgreSQL): every method may answer either way (`Answer<T>`), and the tier goes on
 * synchronously when the answer is a value, so that SQLite's reads run as before. What a
 * read needs in one step, the boundary and the hot bytes after it, is one method
 * (hotLevel, hotChunkAtLevel): SQLite answers it in one synchronous step, PostgreSQL in
 * one statement (one snapshot), so that no upload of another node can come between them
 * (docs/decisions.md, "Cold tier on object storage").
 */
import type { HotView } from '../../core/cold-tier.js';
import type { StreamState } from '../../core/types.js';
import type { StoredChunk } from '../chain.js';

/** A value, or a promise of it: SQLite answers the first, PostgreSQL the second. */
export type Answer<T> = T | Promise<T>;

/** Goes on with `next` at once when `value` is a value, after it resolves when it is a promise. */
export function andThen<T, U>(value: Answer<T>, next: (value: T) => Answer<U>): Answer<U> {
  return value instanceof Promise ? value.then(next) : next(value);
}

export interface ColdSegmentRow {
  streamId: number;
  start: number;
  end: number;
  key: string;
  sha256: string;
  bytes: number;
}

/** A stream the uploader may move bytes of. */
export interface ColdCandidate {
  stream: StreamState;
  view: HotView;
}

/** One level of a read: where the stream's cold history ends, and its own hot appends from there, taken together. */
export interface HotLevel {
  coldEnd: number;
  /** The stream's own stored appends covering `[max(from, coldEnd), end)`, cut to that range. */
  hot: StoredChunk[];
}

export interface ColdHost {
  /**
   * Undeleted streams with ids after `afterId` whose tail may pass `minTail` (shorter ones
   * have nothing to move), from a page of at most `limit` streams, each with its hot rows
   * from the first up to `segmentBytes` past it (nextSegment needs no more); `nextAfterId`
   * continues the scan, null at its end. The first page indexes what the engine holds in
   * memory first, so that it can move.
   */
  coldCandidates(afterId: number, limit: number, segmentBytes: number, minTail: number): Answer<{ candidates: ColdCandidate[]; nextAfterId: number | null }>;
  /** One stream as coldCandidates sees it; undefined when it has no hot rows or is gone. */
  coldCandidate(streamId: number, segmentBytes: number): Answer<ColdCandidate | undefined>;
  /** Where the stream's last indexed row ending at or below `ceiling` ends (its first hot row's start when none does). */
  wholeRowsEnd(streamId: number, ceiling: number): Answer<number>;
  /** The stream's indexed appends `[start, end)`, whole rows. */
  hotAppends(streamId: number, start: number, end: number): Answer<StoredChunk[]>;
  /**
   * May this node upload now? PostgreSQL: whether it holds the cluster's upload lock
   * (several nodes share one database; one uploads at a time). Absent: always.
   */
  beginUploads?(): Promise<boolean>;
  /** The uploads begun by beginUploads are over (the lock is released). */
  endUploads?(): Promise<void>;
  /**
   * In one transaction: when the stream still stores the rows `[segment.start,
   * segment.end)` hot, records the segment and deletes them; answers whether it did (or
   * whether a segment under the same key already holds them: the object is then in use).
   */
  commitSegment(segment: ColdSegmentRow): Answer<boolean>;
  /** The stream's segments overlapping `[from, before)`, in order. */
  segments(streamId: number, from: number, before: number): Answer<ColdSegmentRow[]>;
  /** Where the stream's cold history ends (0: none). */
  coldEnd(streamId: number): Answer<number>;
  /** A stream by id, deleted ones forks still read included. */
  streamById(id: number): Answer<StreamState | undefined>;
  /** The boundary and the stream's own hot appends in `[max(from, boundary), end)`, in one step. */
  hotLevel(stream: StreamState, from: number, end: number): Answer<HotLevel>;
  /**
   * The boundary and, when `position` is at or past it, the stream's own hot append that
   * starts at or contains it (null below it, or when none does), in one step.
   */
  hotChunkAtLevel(stream: StreamState, position: number): Answer<{ coldEnd: number; chunk: StoredChunk | null }>;
  /** Segments the sweep may remove (core/cold-tier.ts, segmentUnreachable), at most `limit`. */
  unreachableSegments(limit: number): Answer<ColdSegmentRow[]>;
  /** Deletes these segments' rows (their objects are gone). */
  forgetSegments(segments: readonly ColdSegmentRow[]): Answer<void>;
  /**
   * Stream bytes the segments hold (a dropped stream's until the sweep removes them).
   * Synchronous: /metrics reads it per scrape. PostgreSQL: as this node's last uploader
   * pass counted them, with its own uploads and sweeps since.
   */
  coldBytes(): number;
  /** Every segment row, by stream and position: what the tier holds, for inspection (`rill check` reads SEGMENT_LINES_SQL instead). */
  allSegments(): Answer<ColdSegmentRow[]>;
  /** Releases what the host holds of its own (PostgreSQL: the upload lock's connection). */
  close?(): Promise<void>;
}
