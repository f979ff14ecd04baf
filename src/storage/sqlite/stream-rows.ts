/**
 * Stream states over the `streams` table and the stream cache (cache.ts): loading a
 * stream as it stands, and writing a changed one back column by column. The cache is
 * exact because the engine is the only writer of its database (dir-lock.ts).
 */
import type Database from 'better-sqlite3';
import type { StreamState } from '../../core/types.js';
import { RECORD_NEXT_COLUMN, rowToStream, sameBesideTails, STREAM_VALUE_COLUMNS, streamColumnValues, streamRowOfValues, TAIL_COLUMN, type StreamRow } from '../stream-columns.js';
import type { StreamCache } from './cache.js';
import type { RecentChunks } from './recent.js';
import { streamParams, type Statements } from './statements.js';

/**
 * A stream's row is written again, with its tail and record tail, whenever appends
 * carry its tail across a multiple of this many bytes: a row's record tail then lags its
 * appends by less than this, which is all a load has to count (fromRow).
 */
export const RECORD_ROW_LAG_BYTES = 64 * 1024;

export class StreamRows {
  /** UPDATE statements by the columns they write (comma-separated), each prepared once. */
  private readonly updates = new Map<string, Database.Statement>();

  constructor(
    private readonly db: Database.Database,
    private readonly sql: Statements,
    readonly cache: StreamCache,
    /** The appends not yet indexed: a stream's tail may be the end of its last one. */
    private readonly recent: RecentChunks,
    /** A loaded stream as reads see it (BatchedStore.withPendingTouch). */
    private readonly asRead: (stream: StreamState) => StreamState,
    /** Messages (records, or appends on a stream without records) in the stream's stored bytes `[from, to)`, `from` an append's start. */
    private readonly messagesBetween: (stream: StreamState, from: number, to: number) => number,
  ) {}

  byName(name: string): StreamState | undefined {
    return this.cached(this.cache.getByName(name), () => rowOf(this.sql.streamByName.get(name)));
  }

  byId(id: number): StreamState | undefined {
    return this.cached(this.cache.getById(id), () => rowOf(this.sql.streamById.get(id)));
  }

  insert(stream: StreamState): void {
    this.sql.insertStream.run(streamParams(stream));
    this.cache.set(stream);
  }

  /**
   * Writes only the columns that changed since the cached state, compared column by
   * column without building whole rows; this runs once per append inside the batch.
   *
   * A plain append changes only `tail` and `record_next`, and the
   * chunk it stores records that move, so its row is not written at all (one UPDATE
   * less per append): a row's tails may lag behind its chunks, and fromRow reads them
   * from both. A write of any other column brings the tails up to date with it, so that
   * a change that could take chunks away (a trim) never leaves the row behind; so does
   * an append that carries a stream's tail past a multiple of RECORD_ROW_LAG_BYTES.
   */
  update(next: StreamState): void {
    const previous = this.cache.getById(next.id) ?? this.byId(next.id);
    if (!previous) throw new Error(`invariant: updating stream ${next.id}, which is not stored`);
    const lagCrossed = next.recordNext !== previous.recordNext && Math.floor(next.tail / RECORD_ROW_LAG_BYTES) !== Math.floor(previous.tail / RECORD_ROW_LAG_BYTES);
    if (!lagCrossed && sameBesideTails(next, previous)) return void this.cache.set(next);
    const params: Record<string, unknown> = { id: next.id, tail: next.tail, record_next: next.recordNext };
    const values = streamColumnValues(next);
    const before = streamColumnValues(previous);
    let changed = '';
    for (let i = 0; i < values.length; i++) {
      if (i === TAIL_COLUMN || i === RECORD_NEXT_COLUMN || values[i] === before[i]) continue;
      const column = STREAM_VALUE_COLUMNS[i]!;
      params[column] = values[i];
      changed = changed === '' ? column : `${changed},${column}`;
    }
    if (changed !== '' || lagCrossed) this.updateStatement(changed === '' ? 'tail,record_next' : `${changed},tail,record_next`).run(params);
    this.cache.set(next);
  }

  /**
   * A stored row as a stream state. Its tail is the greater of the row's and the end of
   * the stream's last chunk (plain appends leave the row's behind, see update); every
   * recent append lies after every indexed one, so a recent one ends last (tailOf). Its
   * record tail is the row's plus the messages stored after the row's tail (less than
   * RECORD_ROW_LAG_BYTES of them and one append): records on a JSON stream, appends on
   * any other (core/records.ts).
   */
  fromRow(row: StreamRow): StreamState {
    const stream = rowToStream(row);
    const tail = this.tailOf(stream.id, stream.tail, () => this.sql.lastChunkEnd.get(stream.id)?.end);
    if (tail === stream.tail) return stream;
    const caught = { ...stream, tail };
    caught.recordNext = this.cache.evictedRecordNext(stream.id, tail) ?? stream.recordNext + this.messagesBetween(caught, stream.tail, tail);
    return caught;
  }

  /** The tail of a stream whose row holds `rowTail`; `indexedEnd` is where its last indexed chunk ends, looked up only when needed. */
  tailOf(id: number, rowTail: number, indexedEnd: () => number | undefined): number {
    const chunkEnd = this.recent.lastEnd(id) ?? indexedEnd();
    return chunkEnd === undefined || chunkEnd <= rowTail ? rowTail : chunkEnd;
  }

  /** A stream from the cache, or from SQLite (then cached), as reads see it. */
  private cached(fromCache: StreamState | undefined, load: () => StreamRow | undefined): StreamState | undefined {
    let stream = fromCache;
    if (stream) this.cache.hits++;
    else {
      this.cache.misses++;
      const row = load();
      if (!row) return undefined;
      stream = this.fromRow(row);
      this.cache.remember(stream);
    }
    return this.asRead(stream);
  }

  /** The prepared UPDATE of the columns listed in `changed` (comma-separated), made once. */
  private updateStatement(changed: string): Database.Statement {
    let statement = this.updates.get(changed);
    if (!statement) {
      const assignments = changed.split(',').map((c) => `${c} = @${c}`);
      statement = this.db.prepare(`UPDATE streams SET ${assignments.join(', ')} WHERE id = @id`);
      this.updates.set(changed, statement);
    }
    return statement;
  }
}

/**
 * A stream's row, read as one JSON array of its values (json_array in the statement). The
 * stream cache misses on every write spread over more streams than it holds; better-sqlite3
 * makes a row object, or a raw row's array, with a V8 API call per value, which cost such a
 * write more than the rest of its miss; one string parsed by JSON.parse costs little.
 */
function rowOf(json: string | undefined): StreamRow | undefined {
  return json === undefined ? undefined : streamRowOfValues(JSON.parse(json) as unknown[]);
}
