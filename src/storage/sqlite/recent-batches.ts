/**
 * How recent appends are stored until they are indexed: one row of `recent_batches` per
 * committed transaction, holding all of its appends packed together, instead of one row
 * per append. A batch of appends then costs one INSERT (one cell on the rowid's last
 * page) rather than one statement each, which was the largest single cost of an append
 * on the event loop. The index (`chunks`) is filled from the copies kept in memory
 * (recent.ts), a slice at a time, and after a crash from these rows.
 *
 * Packed form, per append: stream id (float64 LE), start (float64 LE; both integers
 * below 2^53), byte length (uint32 LE), then the bytes.
 */
import type Database from 'better-sqlite3';
import { chunkRows } from './chunk-rows.js';

export interface PackedAppend {
  streamId: number;
  start: number;
  data: Buffer;
}

const HEADER_BYTES = 20;

/**
 * Packs appends into one buffer, written through a DataView and TypedArray.set: V8
 * compiles both inline, where Buffer's writeDoubleLE and copy were about 1,600
 * instructions an append under callgrind.
 */
export function packAppends(appends: readonly PackedAppend[]): Buffer {
  let size = 0;
  for (const a of appends) size += HEADER_BYTES + a.data.length;
  const packed = Buffer.allocUnsafe(size);
  const view = new DataView(packed.buffer, packed.byteOffset, packed.byteLength);
  let at = 0;
  for (const a of appends) {
    view.setFloat64(at, a.streamId, true);
    view.setFloat64(at + 8, a.start, true);
    view.setUint32(at + 16, a.data.length, true);
    packed.set(a.data, at + HEADER_BYTES);
    at += HEADER_BYTES + a.data.length;
  }
  return packed;
}

/**
 * Points each append's `data` at its own bytes inside `packed`, the row packAppends made
 * of these appends. Held appends then keep one buffer per batch alive instead of each
 * request's body, which is a slice of all the socket read with it, and the bodies die
 * young. With 100,000 streams of one append each, 217 MB resident became 177.
 */
export function pointIntoPacked(appends: ReadonlyArray<{ data: Buffer }>, packed: Buffer): void {
  let at = 0;
  for (const a of appends) {
    const length = a.data.length;
    a.data = packed.subarray(at + HEADER_BYTES, at + HEADER_BYTES + length);
    at += HEADER_BYTES + length;
  }
  if (at !== packed.length) throw new Error(`invariant: the packed row has ${packed.length} bytes, its appends ${at}`);
}

/** The appends of one packed row; throws on a row that is not whole (a broken invariant). */
export function unpackAppends(packed: Buffer): PackedAppend[] {
  const appends: PackedAppend[] = [];
  let at = 0;
  while (at < packed.length) {
    if (at + HEADER_BYTES > packed.length) throw new Error(`invariant: a packed append header is cut at byte ${at}`);
    const length = packed.readUInt32LE(at + 16);
    const end = at + HEADER_BYTES + length;
    if (end > packed.length) throw new Error(`invariant: a packed append's bytes are cut at byte ${at}`);
    appends.push({ streamId: packed.readDoubleLE(at), start: packed.readDoubleLE(at + 8), data: packed.subarray(at + HEADER_BYTES, end) });
    at = end;
  }
  return appends;
}

/** Rows per INSERT statement when indexing: 4 parameters each, far below SQLite's limit. */
const ROWS_PER_STATEMENT = 64;

/** Inserts appends into `chunks`, consecutive ones of a stream sharing rows (chunk-rows.ts), many rows per statement. */
export class ChunkInserter {
  private readonly statements = new Map<number, Database.Statement>();

  constructor(private readonly db: Database.Database) {}

  insert(appends: readonly PackedAppend[]): void {
    const rows = chunkRows(appends);
    for (let from = 0; from < rows.length; from += ROWS_PER_STATEMENT) {
      const slice = rows.slice(from, from + ROWS_PER_STATEMENT);
      const params: Array<number | Buffer | null> = [];
      for (const r of slice) params.push(r.streamId, r.start, r.data, r.bounds);
      this.statement(slice.length).run(params);
    }
  }

  private statement(rows: number): Database.Statement {
    let statement = this.statements.get(rows);
    if (!statement) {
      const values = Array.from({ length: rows }, () => '(?, ?, ?, ?)').join(', ');
      statement = this.db.prepare(`INSERT INTO chunks (stream_id, start, data, bounds) VALUES ${values}`);
      this.statements.set(rows, statement);
    }
    return statement;
  }
}

/**
 * After a crash: indexes every append the rows hold, except those a seal had indexed
 * already and those of streams deleted since (stream ids are never reused), stream by
 * stream for locality. Runs inside the caller's transaction, which then empties the table.
 * Answers how many rows the table held.
 *
 * A seal indexes each stream's oldest recent appends first and rows may hold several, so
 * what it had indexed of a stream is exactly its recent appends that start before the end
 * of the stream's last indexed row. (A trim indexes and clears everything recent in its
 * own transaction, so it never leaves indexed appends behind that end.)
 */
export function recoverRecentBatches(
  db: Database.Database,
  inserter: ChunkInserter,
  /** Where the stream's indexed rows end (0 when it has none); undefined when the stream is gone. */
  indexedEnd: (streamId: number) => number | undefined,
): number {
  const rows = db.prepare<[], Buffer>('SELECT appends FROM recent_batches ORDER BY id').pluck().all();
  const known = new Map<number, number | undefined>();
  const endOf = (id: number) => {
    if (!known.has(id)) known.set(id, indexedEnd(id));
    return known.get(id);
  };
  const appends = rows.flatMap(unpackAppends).filter((a) => {
    const end = endOf(a.streamId);
    if (end === undefined || a.start + a.data.length <= end) return false;
    if (a.start < end) throw new Error(`invariant: recent append ${a.streamId}@${a.start} overlaps the indexed rows, which end at ${end}`);
    return true;
  });
  appends.sort((a, b) => a.streamId - b.streamId || a.start - b.start);
  inserter.insert(appends);
  return rows.length;
}
