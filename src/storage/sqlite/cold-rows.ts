/**
 * The SQLite engine's side of the cold tier (storage/cold/host.ts): its `chunks` rows as
 * the uploader sees them, and the `cold_segments` table. A segment's row and the deletion
 * of the chunk rows it holds commit in one transaction, after the object store has
 * acknowledged the object: a crash before it leaves the bytes hot, one after it finds
 * them cold, never both or neither (docs/decisions.md, "Cold tier on object storage").
 */
import type Database from 'better-sqlite3';
import { segmentUnreachable } from '../../core/cold-tier.js';
import type { StreamState } from '../../core/types.js';
import type { StoredChunk } from '../chain.js';
import type { ColdCandidate, ColdHost, ColdSegmentRow, HotLevel } from '../cold/host.js';
import { appendsOfRow, type StoredChunkRow } from './chunk-rows.js';
import { BOUND_LIMIT } from './statements.js';
import { RECORD_ROW_LAG_BYTES } from './stream-rows.js';
import { segmentOf, type SegmentColumns } from '../cold/segment-columns.js';

export interface SqliteColdEngine {
  streamById(id: number): StreamState | undefined;
  /** The stream's own stored bytes from `from` (chain.ts with no fork link followed). */
  ownChunks(stream: StreamState, from: number, maxBytes: number): StoredChunk[];
  ownChunkAt(stream: StreamState, position: number): StoredChunk | null;
  /** Indexes every append held in memory (held-writes.ts). */
  indexHeld(): void;
}

export class SqliteColdRows implements ColdHost {
  private readonly sql;
  /** Stream bytes the segments hold, summed once at open and kept as they come and go (/metrics reads it per scrape). */
  private heldColdBytes: number;

  constructor(
    private readonly db: Database.Database,
    private readonly engine: SqliteColdEngine,
  ) {
    this.sql = {
      streamsAfter: db.prepare<[number, number], { id: number; tail: number }>(`SELECT id, tail FROM streams WHERE deleted = 0 AND id > ? ORDER BY id LIMIT ${BOUND_LIMIT}`),
      streamRow: db.prepare<[number], { id: number; tail: number }>('SELECT id, tail FROM streams WHERE deleted = 0 AND id = ?'),
      firstRow: db.prepare<[number], { start: number }>('SELECT start FROM chunks WHERE stream_id = ? ORDER BY start LIMIT 1'),
      lastRow: db.prepare<[number], { start: number }>('SELECT start FROM chunks WHERE stream_id = ? ORDER BY start DESC LIMIT 1'),
      rowBelow: db.prepare<[number, number], { start: number; end: number }>(
        'SELECT start, start + length(data) AS end FROM chunks WHERE stream_id = ? AND start < ? ORDER BY start DESC LIMIT 1',
      ),
      rowSpans: db.prepare<[number, number], { start: number; end: number }>('SELECT start, start + length(data) AS end FROM chunks WHERE stream_id = ? AND start < ? ORDER BY start'),
      rowsBetween: db.prepare<[number, number, number], StoredChunkRow>('SELECT start, data, bounds FROM chunks WHERE stream_id = ? AND start >= ? AND start < ? ORDER BY start'),
      deleteRows: db.prepare<[number, number, number]>('DELETE FROM chunks WHERE stream_id = ? AND start >= ? AND start < ?'),
      insertSegment: db.prepare<[number, number, number, string, string, number]>(
        'INSERT INTO cold_segments (stream_id, start, end_offset, object_key, sha256, object_bytes) VALUES (?, ?, ?, ?, ?, ?)',
      ),
      segments: db.prepare<[number, number, number], SegmentColumns>('SELECT * FROM cold_segments WHERE stream_id = ? AND end_offset > ? AND start < ? ORDER BY start'),
      coldEnd: db.prepare<[number], { end: number | null }>('SELECT max(end_offset) AS end FROM cold_segments WHERE stream_id = ?'),
      withStreams: db.prepare<[number], SegmentColumns & { earliest_offset: number | null; fork_refs: number | null }>(
        `SELECT c.*, s.earliest_offset, s.fork_refs FROM cold_segments c LEFT JOIN streams s ON s.id = c.stream_id
           WHERE s.id IS NULL OR (s.fork_refs = 0 AND c.end_offset <= s.earliest_offset) LIMIT ${BOUND_LIMIT}`,
      ),
      forget: db.prepare<[number, number]>('DELETE FROM cold_segments WHERE stream_id = ? AND start = ?'),
      coldBytes: db.prepare<[], { bytes: number | null }>('SELECT sum(end_offset - start) AS bytes FROM cold_segments'),
      all: db.prepare<[], SegmentColumns>('SELECT * FROM cold_segments ORDER BY stream_id, start'),
    };
    this.heldColdBytes = this.sql.coldBytes.get()?.bytes ?? 0;
  }

  coldCandidates(afterId: number, limit: number, segmentBytes: number, minTail: number): { candidates: ColdCandidate[]; nextAfterId: number | null } {
    if (afterId === 0) this.engine.indexHeld();
    const rows = this.sql.streamsAfter.all(afterId, limit);
    const candidates: ColdCandidate[] = [];
    for (const row of rows) {
      // A row's tail lags its appends by less than RECORD_ROW_LAG_BYTES (stream-rows.ts).
      if (row.tail + RECORD_ROW_LAG_BYTES <= minTail) continue;
      const candidate = this.candidateOf(row, segmentBytes);
      if (candidate !== undefined) candidates.push(candidate);
    }
    return { candidates, nextAfterId: rows.length < limit ? null : rows[rows.length - 1]!.id };
  }

  coldCandidate(streamId: number, segmentBytes: number): ColdCandidate | undefined {
    const row = this.sql.streamRow.get(streamId);
    return row === undefined ? undefined : this.candidateOf(row, segmentBytes);
  }

  private candidateOf(row: { id: number; tail: number }, segmentBytes: number): ColdCandidate | undefined {
    const first = this.sql.firstRow.get(row.id);
    const stream = this.engine.streamById(row.id);
    if (first === undefined || stream === undefined) return undefined;
    const last = this.sql.lastRow.get(row.id)!;
    // Rows starting before this bound are all nextSegment can take.
    const spans = this.sql.rowSpans.all(row.id, first.start + segmentBytes);
    return { stream, view: { tail: stream.tail, hotStart: first.start, movableEnd: Math.min(last.start, row.tail), rowEnds: spans.map((s) => s.end) } };
  }

  wholeRowsEnd(streamId: number, ceiling: number): number {
    const row = this.sql.rowBelow.get(streamId, ceiling);
    if (row !== undefined) return row.end <= ceiling ? row.end : row.start;
    return this.sql.firstRow.get(streamId)?.start ?? 0;
  }

  hotAppends(streamId: number, start: number, end: number): StoredChunk[] {
    return this.sql.rowsBetween.all(streamId, start, end).flatMap(appendsOfRow);
  }

  commitSegment(segment: ColdSegmentRow): boolean {
    const committed = this.db.transaction(() => {
      if (this.engine.streamById(segment.streamId) === undefined) return false;
      // The rows must still be exactly the range: a trim or a drop since the upload began changes them.
      const spans = this.sql.rowSpans.all(segment.streamId, segment.end);
      if (spans.length === 0 || spans[0]!.start !== segment.start || spans.at(-1)!.end !== segment.end) return false;
      for (let i = 1; i < spans.length; i++) if (spans[i]!.start !== spans[i - 1]!.end) return false;
      this.sql.insertSegment.run(segment.streamId, segment.start, segment.end, segment.key, segment.sha256, segment.bytes);
      this.sql.deleteRows.run(segment.streamId, segment.start, segment.end);
      return true;
    })();
    if (committed) this.heldColdBytes += segment.end - segment.start;
    return committed;
  }

  segments(streamId: number, from: number, before: number): ColdSegmentRow[] {
    return this.sql.segments.all(streamId, from, before).map(segmentOf);
  }

  coldEnd(streamId: number): number {
    return this.sql.coldEnd.get(streamId)?.end ?? 0;
  }

  streamById(id: number): StreamState | undefined {
    return this.engine.streamById(id);
  }

  hotLevel(stream: StreamState, from: number, end: number): HotLevel {
    const coldEnd = this.coldEnd(stream.id);
    const hotFrom = Math.max(from, coldEnd);
    return { coldEnd, hot: hotFrom < end ? this.engine.ownChunks(stream, hotFrom, end - hotFrom) : [] };
  }

  hotChunkAtLevel(stream: StreamState, position: number): { coldEnd: number; chunk: StoredChunk | null } {
    const coldEnd = this.coldEnd(stream.id);
    return { coldEnd, chunk: position >= coldEnd ? this.engine.ownChunkAt(stream, position) : null };
  }

  unreachableSegments(limit: number): ColdSegmentRow[] {
    return this.sql.withStreams
      .all(limit)
      .filter((row) => segmentUnreachable({ start: row.start, end: row.end_offset }, row.earliest_offset, row.fork_refs ?? 0))
      .map(segmentOf);
  }

  forgetSegments(segments: readonly ColdSegmentRow[]): void {
    this.db.transaction(() => {
      for (const s of segments) this.sql.forget.run(s.streamId, s.start);
    })();
    for (const s of segments) this.heldColdBytes -= s.end - s.start;
  }

  coldBytes(): number {
    return this.heldColdBytes;
  }

  allSegments(): ColdSegmentRow[] {
    return this.sql.all.all().map(segmentOf);
  }
}
