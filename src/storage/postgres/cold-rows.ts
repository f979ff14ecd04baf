/**
 * The PostgreSQL engine's side of the cold tier (storage/cold/host.ts): its `chunks` rows
 * as the uploader sees them, and the `cold_segments` table, shared by every node of the
 * database (docs/decisions.md, "Cold tier on object storage").
 *
 * - Every node counts the upload lag and reads both tiers; in a pass, only the node that
 *   holds the upload lock uploads and sweeps. The lock is a session-level advisory lock on
 *   a connection of the uploader's own: PostgreSQL releases it when that connection ends,
 *   so a node killed mid-upload holds it no longer than its connection lives. The segment's
 *   transaction runs on that same connection, so it commits only while the lock is held.
 * - The transaction locks the stream's row (as a batch does), checks that the rows of the
 *   range are still exactly there (a trim or a drop may have come first), inserts the
 *   segment's row and deletes the chunk rows: a batch reading the stream's history under
 *   its row lock sees either tier, never both or neither.
 * - A read takes the boundary and the hot rows after it in one statement, one snapshot: an
 *   upload committing on another node cannot come between them (hotLevel).
 */
import pg from 'pg';
import { segmentUnreachable } from '../../core/cold-tier.js';
import type { StreamState } from '../../core/types.js';
import type { StoredChunk } from '../chain.js';
import type { ColdCandidate, ColdHost, ColdSegmentRow, HotLevel } from '../cold/host.js';
import { rowToStream, type StreamRow } from '../stream-columns.js';
import type { Queryable } from './chunks.js';
import { segmentOf, type SegmentColumns } from '../cold/segment-columns.js';

/** The cluster's upload lock: one advisory lock key of rill's own (schema.ts has another). */
export const COLD_UPLOAD_LOCK = 0x72696c63;

/** A stream row with its first and last hot rows and where the rows a segment may take end. */
type CandidateRow = StreamRow & { first_start: number; last_start: number; row_ends: string[] | null };

const CANDIDATE_COLUMNS = `s.*, f.start AS first_start, l.start AS last_start,
  (SELECT array_agg(c.start + length(c.data) ORDER BY c.start) FROM chunks c WHERE c.stream_id = s.id AND c.start < f.start + $2) AS row_ends`;
const CANDIDATE_JOINS = `CROSS JOIN LATERAL (SELECT start FROM chunks WHERE stream_id = s.id ORDER BY start LIMIT 1) f
  CROSS JOIN LATERAL (SELECT start FROM chunks WHERE stream_id = s.id ORDER BY start DESC LIMIT 1) l`;

/** The boundary, then the hot rows from the one holding max($2, boundary) and before $3, in one statement. */
const LEVEL_SQL = `WITH b AS (SELECT coalesce(max(end_offset), 0)::bigint AS cold_end FROM cold_segments WHERE stream_id = $1)
  SELECT b.cold_end, c.start, c.data FROM b LEFT JOIN LATERAL (
    SELECT start, data FROM chunks WHERE stream_id = $1 AND start < $3::bigint
      AND start >= coalesce((SELECT max(start) FROM chunks WHERE stream_id = $1 AND start <= greatest($2::bigint, b.cold_end)), greatest($2::bigint, b.cold_end))
    ORDER BY start) c ON greatest($2::bigint, b.cold_end) < $3::bigint ORDER BY c.start`;

/** A stream's segments overlapping [$2, $3), in order (the batch's cold history reads it too, batch.ts). */
export const SEGMENTS_SQL = 'SELECT * FROM cold_segments WHERE stream_id = $1 AND end_offset > $2 AND start < $3 ORDER BY start';

/** The boundary, and the hot row holding $2 when $2 is at or past it. */
const CHUNK_AT_SQL = `WITH b AS (SELECT coalesce(max(end_offset), 0)::bigint AS cold_end FROM cold_segments WHERE stream_id = $1)
  SELECT b.cold_end, c.start, c.data FROM b LEFT JOIN LATERAL (
    SELECT start, data FROM chunks WHERE stream_id = $1 AND start <= $2::bigint ORDER BY start DESC LIMIT 1) c ON $2::bigint >= b.cold_end`;

export interface PgColdOptions {
  /** The node's pool, its statements prepared. */
  db: Queryable;
  /** A read of committed rows; the database unreachable answers 503 (engine.ts). */
  read<T>(work: () => Promise<T>): Promise<T>;
  /** A connection of the uploader's own, for the lock and the segments' transactions. */
  connect(): pg.Client;
}

export class PgColdRows implements ColdHost {
  /** Stream bytes the segments hold, as the last pass counted them, with this node's changes since. */
  private heldColdBytes = 0;
  private lockClient: pg.Client | null = null;
  private locked = false;

  constructor(private readonly options: PgColdOptions) {}

  private query<R extends object>(text: string, values?: unknown[]): Promise<R[]> {
    return this.options.read(async () => (await this.options.db.query<R>(text, values)).rows);
  }

  async coldCandidates(afterId: number, limit: number, segmentBytes: number, minTail: number): Promise<{ candidates: ColdCandidate[]; nextAfterId: number | null }> {
    if (afterId === 0) {
      const [row] = await this.query<{ bytes: number }>('SELECT coalesce(sum(end_offset - start), 0)::bigint AS bytes FROM cold_segments');
      this.heldColdBytes = row!.bytes;
    }
    const page = await this.query<{ id: number; tail: number }>('SELECT id, tail FROM streams WHERE deleted = 0 AND id > $1 ORDER BY id LIMIT $2', [afterId, limit]);
    const ids = page.filter((row) => row.tail > minTail).map((row) => row.id);
    const rows =
      ids.length === 0
        ? []
        : await this.query<CandidateRow>(`SELECT ${CANDIDATE_COLUMNS} FROM streams s ${CANDIDATE_JOINS} WHERE s.id = ANY($1::bigint[]) ORDER BY s.id`, [ids, segmentBytes]);
    return { candidates: rows.map(candidateOf), nextAfterId: page.length < limit ? null : page[page.length - 1]!.id };
  }

  async coldCandidate(streamId: number, segmentBytes: number): Promise<ColdCandidate | undefined> {
    const [row] = await this.query<CandidateRow>(`SELECT ${CANDIDATE_COLUMNS} FROM streams s ${CANDIDATE_JOINS} WHERE s.id = $1 AND s.deleted = 0`, [streamId, segmentBytes]);
    return row === undefined ? undefined : candidateOf(row);
  }

  async wholeRowsEnd(streamId: number, ceiling: number): Promise<number> {
    const [below] = await this.query<{ start: number; end: number }>(
      'SELECT start, start + length(data) AS end FROM chunks WHERE stream_id = $1 AND start < $2 ORDER BY start DESC LIMIT 1',
      [streamId, ceiling],
    );
    if (below !== undefined) return below.end <= ceiling ? below.end : below.start;
    const [first] = await this.query<{ start: number }>('SELECT start FROM chunks WHERE stream_id = $1 ORDER BY start LIMIT 1', [streamId]);
    return first?.start ?? 0;
  }

  hotAppends(streamId: number, start: number, end: number): Promise<StoredChunk[]> {
    return this.query<StoredChunk>('SELECT start, data FROM chunks WHERE stream_id = $1 AND start >= $2 AND start < $3 ORDER BY start', [streamId, start, end]);
  }

  /** Takes the upload lock when no other node holds it; a connection that failed is replaced at the next pass. */
  async beginUploads(): Promise<boolean> {
    if (this.lockClient === null) {
      const client = this.options.connect();
      client.on('error', () => {
        // The connection died: PostgreSQL released the lock with it.
        if (this.lockClient === client) this.lockClient = null;
        this.locked = false;
      });
      await client.connect().catch(async (error: unknown) => {
        await client.end().catch(() => undefined);
        throw error;
      });
      this.lockClient = client;
    }
    try {
      const { rows } = await this.lockClient.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1) AS locked', [COLD_UPLOAD_LOCK]);
      this.locked = rows[0]!.locked;
    } catch (error) {
      await this.dropLockClient();
      throw error;
    }
    return this.locked;
  }

  /** Ends the lock's connection (PostgreSQL releases the lock with it); the next pass opens another. */
  private async dropLockClient(): Promise<void> {
    const client = this.lockClient;
    this.lockClient = null;
    this.locked = false;
    await client?.end().catch(() => undefined);
  }

  async endUploads(): Promise<void> {
    if (!this.locked || this.lockClient === null) return;
    this.locked = false;
    await this.lockClient.query('SELECT pg_advisory_unlock($1)', [COLD_UPLOAD_LOCK]).catch(() => undefined);
  }

  async commitSegment(segment: ColdSegmentRow): Promise<boolean> {
    const client = this.lockClient;
    // The lock's connection ended (the lock went with it): another node may be uploading, the rows stay hot.
    if (client === null || !this.locked) throw new Error(`the upload lock's connection to PostgreSQL ended before segment ${segment.key} was recorded; its bytes stay hot`);
    await client.query('BEGIN');
    try {
      const committed = await this.commitIn(client, segment);
      await client.query(committed ? 'COMMIT' : 'ROLLBACK');
      if (committed) this.heldColdBytes += segment.end - segment.start;
      return committed;
    } catch (error) {
      // Whatever went wrong, the transaction did not commit (a COMMIT that failed to answer is
      // seen again at the next pass: its rows are gone or still hot); a new connection is
      // taken, and with it the lock again, at the next pass.
      await this.dropLockClient();
      throw error;
    }
  }

  private async commitIn(client: pg.Client, segment: ColdSegmentRow): Promise<boolean> {
    // The stream's row lock: a batch writing or reading the stream's history waits, or is waited for.
    const stream = await client.query('SELECT id FROM streams WHERE id = $1 AND deleted = 0 FOR UPDATE', [segment.streamId]);
    if (stream.rows.length === 0) return false;
    const same = await client.query<{ object_key: string }>('SELECT object_key FROM cold_segments WHERE stream_id = $1 AND start = $2', [segment.streamId, segment.start]);
    // Already committed under this key (by this node's earlier attempt whose answer was lost): the object is in use.
    if (same.rows.length > 0) return same.rows[0]!.object_key === segment.key;
    // The rows must still be exactly the range: a trim or a drop since the upload began changes them.
    const { rows: spans } = await client.query<{ start: number; end: number }>(
      'SELECT start, start + length(data) AS end FROM chunks WHERE stream_id = $1 AND start < $2 ORDER BY start',
      [segment.streamId, segment.end],
    );
    if (spans.length === 0 || spans[0]!.start !== segment.start || spans.at(-1)!.end !== segment.end) return false;
    for (let i = 1; i < spans.length; i++) if (spans[i]!.start !== spans[i - 1]!.end) return false;
    await client.query('INSERT INTO cold_segments (stream_id, start, end_offset, object_key, sha256, object_bytes) VALUES ($1, $2, $3, $4, $5, $6)', [
      segment.streamId,
      segment.start,
      segment.end,
      segment.key,
      segment.sha256,
      segment.bytes,
    ]);
    await client.query('DELETE FROM chunks WHERE stream_id = $1 AND start >= $2 AND start < $3', [segment.streamId, segment.start, segment.end]);
    return true;
  }

  async segments(streamId: number, from: number, before: number): Promise<ColdSegmentRow[]> {
    const rows = await this.query<SegmentColumns>(SEGMENTS_SQL, [streamId, from, before]);
    return rows.map(segmentOf);
  }

  async coldEnd(streamId: number): Promise<number> {
    const [row] = await this.query<{ end: number }>('SELECT coalesce(max(end_offset), 0)::bigint AS end FROM cold_segments WHERE stream_id = $1', [streamId]);
    return row!.end;
  }

  async streamById(id: number): Promise<StreamState | undefined> {
    const [row] = await this.query<StreamRow>('SELECT * FROM streams WHERE id = $1', [id]);
    return row === undefined ? undefined : rowToStream(row);
  }

  async hotLevel(stream: StreamState, from: number, end: number): Promise<HotLevel> {
    const rows = await this.query<{ cold_end: number; start: number | null; data: Buffer | null }>(LEVEL_SQL, [stream.id, from, end]);
    const coldEnd = rows[0]!.cold_end;
    const hotFrom = Math.max(from, coldEnd);
    const hot: StoredChunk[] = [];
    for (const row of rows) {
      if (row.start === null || row.data === null) continue;
      const rowEnd = row.start + row.data.length;
      if (rowEnd <= hotFrom) continue;
      const start = Math.max(row.start, hotFrom);
      hot.push({ start, data: row.data.subarray(start - row.start, Math.min(row.data.length, end - row.start)) });
    }
    return { coldEnd, hot };
  }

  async hotChunkAtLevel(stream: StreamState, position: number): Promise<{ coldEnd: number; chunk: StoredChunk | null }> {
    const [row] = await this.query<{ cold_end: number; start: number | null; data: Buffer | null }>(CHUNK_AT_SQL, [stream.id, position]);
    const chunk = row!.start === null || row!.data === null ? null : { start: row!.start, data: row!.data };
    return { coldEnd: row!.cold_end, chunk };
  }

  async unreachableSegments(limit: number): Promise<ColdSegmentRow[]> {
    const rows = await this.query<SegmentColumns & { earliest_offset: number | null; fork_refs: number | null }>(
      `SELECT c.*, s.earliest_offset, s.fork_refs FROM cold_segments c LEFT JOIN streams s ON s.id = c.stream_id
         WHERE s.id IS NULL OR (s.fork_refs = 0 AND c.end_offset <= s.earliest_offset) LIMIT $1`,
      [limit],
    );
    return rows.filter((row) => segmentUnreachable({ start: row.start, end: row.end_offset }, row.earliest_offset, row.fork_refs ?? 0)).map(segmentOf);
  }

  async forgetSegments(segments: readonly ColdSegmentRow[]): Promise<void> {
    if (segments.length === 0) return;
    await this.query('DELETE FROM cold_segments c USING unnest($1::bigint[], $2::bigint[]) f(sid, start) WHERE c.stream_id = f.sid AND c.start = f.start', [
      segments.map((s) => s.streamId),
      segments.map((s) => s.start),
    ]);
    for (const s of segments) this.heldColdBytes -= s.end - s.start;
  }

  coldBytes(): number {
    return this.heldColdBytes;
  }

  async allSegments(): Promise<ColdSegmentRow[]> {
    return (await this.query<SegmentColumns>('SELECT * FROM cold_segments ORDER BY stream_id, start')).map(segmentOf);
  }

  close(): Promise<void> {
    return this.dropLockClient();
  }
}

function candidateOf(row: CandidateRow): ColdCandidate {
  const stream = rowToStream(row);
  // The last row stays hot, as on SQLite: the next append's reads and anchors find it there.
  return {
    stream,
    view: { tail: stream.tail, hotStart: row.first_start, movableEnd: Math.min(row.last_start, stream.tail), rowEnds: (row.row_ends ?? []).map(Number) },
  };
}
