/**
 * What an engine offers the cold tier (tiered-store.ts, uploader.ts): its hot rows, a
 * transaction that records a segment and deletes the rows it holds, and its segment rows.
 * Every call is synchronous, so that a read takes the boundary and the hot bytes after it
 * in one step, which no upload can come between.
 */
import type { HotView } from '../../core/cold-tier.js';
import type { StreamState } from '../../core/types.js';
import type { StoredChunk } from '../chain.js';

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

export interface ColdHost {
  /**
   * Undeleted streams with ids after `afterId` whose tail may pass `minTail` (shorter ones
   * have nothing to move), from a page of at most `limit` streams, each with its hot rows
   * from the first up to `segmentBytes` past it (nextSegment needs no more); `nextAfterId`
   * continues the scan, null at its end. The first page indexes what the engine holds in
   * memory first, so that it can move.
   */
  coldCandidates(afterId: number, limit: number, segmentBytes: number, minTail: number): { candidates: ColdCandidate[]; nextAfterId: number | null };
  /** One stream as coldCandidates sees it; undefined when it has no hot rows or is gone. */
  coldCandidate(streamId: number, segmentBytes: number): ColdCandidate | undefined;
  /** Where the stream's last indexed row ending at or below `ceiling` ends (its first hot row's start when none does). */
  wholeRowsEnd(streamId: number, ceiling: number): number;
  /** The stream's indexed appends `[start, end)`, whole rows. */
  hotAppends(streamId: number, start: number, end: number): StoredChunk[];
  /**
   * In one transaction: when the stream still stores the rows `[segment.start,
   * segment.end)` hot, records the segment and deletes them; answers whether it did.
   */
  commitSegment(segment: ColdSegmentRow): boolean;
  /** The stream's segments overlapping `[from, before)`, in order. */
  segments(streamId: number, from: number, before: number): ColdSegmentRow[];
  /** Where the stream's cold history ends (0: none). */
  coldEnd(streamId: number): number;
  /** A stream by id, deleted ones forks still read included. */
  streamById(id: number): StreamState | undefined;
  /** The stream's own append (not a fork source's) that starts at or contains `position`, as the engine reads it now. */
  hotChunkAt(stream: StreamState, position: number): StoredChunk | null;
  /** The stream's own stored bytes (not a fork source's) from `from`, as the engine reads them now. */
  hotChunksNow(stream: StreamState, from: number, maxBytes: number): StoredChunk[];
  /** Segments the sweep may remove (core/cold-tier.ts, segmentUnreachable), at most `limit`. */
  unreachableSegments(limit: number): ColdSegmentRow[];
  /** Deletes these segments' rows (their objects are gone). */
  forgetSegments(segments: readonly ColdSegmentRow[]): void;
  /** Stream bytes the segments hold (a dropped stream's until the sweep removes them). */
  coldBytes(): number;
  /** Every segment row, for `rill check`. */
  allSegments(): ColdSegmentRow[];
}
