/**
 * Rows of the `chunks` index. When recent appends are indexed, consecutive appends of one
 * stream share a row (up to MAX_ROW_BYTES and MAX_ROW_APPENDS): one index entry and one
 * cell instead of one per append, which was most of the cost of indexing small appends
 * spread over many streams. The row's `bounds` column keeps where each append ends, so
 * the engine still hands out whole appends: forks, snapshots, retention and reads work
 * on append boundaries exactly as when every append had its own row.
 *
 * `bounds` is NULL for a row of one append, else the byte length of each of its appends
 * in order (uint32 LE each), summing to the length of `data`.
 */
import type { StoredChunk } from '../chain.js';
import type { PackedAppend } from './recent-batches.js';

/** Appends larger than this keep a row of their own; smaller ones fill a row up to it. */
export const MAX_ROW_BYTES = 64 * 1024;
/** Appends in one row, so that finding one inside a row stays a short scan. */
export const MAX_ROW_APPENDS = 512;

/** Stored columns of a chunk row, as read back. */
export interface StoredChunkRow {
  start: number;
  data: Buffer;
  bounds: Buffer | null;
}

export interface ChunkRow extends StoredChunkRow {
  streamId: number;
}

function packLengths(lengths: readonly number[]): Buffer {
  const packed = Buffer.allocUnsafe(lengths.length * 4);
  lengths.forEach((length, i) => packed.writeUInt32LE(length, i * 4));
  return packed;
}

/**
 * Groups appends into rows: each run of appends of one stream, each starting where the
 * one before it ends, fills rows in order. `appends` come stream after stream, oldest
 * first, as recent.ts hands them out.
 */
export function chunkRows(appends: readonly PackedAppend[]): ChunkRow[] {
  const rows: ChunkRow[] = [];
  let run: PackedAppend[] = [];
  let runBytes = 0;
  const close = () => {
    if (run.length === 0) return;
    const head = run[0]!;
    rows.push(
      run.length === 1
        ? { streamId: head.streamId, start: head.start, data: head.data, bounds: null }
        : { streamId: head.streamId, start: head.start, data: Buffer.concat(run.map((a) => a.data), runBytes), bounds: packLengths(run.map((a) => a.data.length)) },
    );
    run = [];
    runBytes = 0;
  };
  for (const append of appends) {
    const last = run[run.length - 1];
    const joins =
      last !== undefined &&
      append.streamId === last.streamId &&
      append.start === last.start + last.data.length &&
      runBytes + append.data.length <= MAX_ROW_BYTES &&
      run.length < MAX_ROW_APPENDS;
    if (!joins) close();
    run.push(append);
    runBytes += append.data.length;
  }
  close();
  return rows;
}

/** The appends a stored row holds, in order. */
export function appendsOfRow(row: StoredChunkRow): StoredChunk[] {
  if (row.bounds === null) return [{ start: row.start, data: row.data }];
  const appends: StoredChunk[] = [];
  let at = 0;
  for (let i = 0; i < row.bounds.length; i += 4) {
    const length = row.bounds.readUInt32LE(i);
    appends.push({ start: row.start + at, data: row.data.subarray(at, at + length) });
    at += length;
  }
  if (at !== row.data.length) throw new Error(`invariant: the bounds of the chunk row at ${row.start} cover ${at} of its ${row.data.length} bytes`);
  return appends;
}

/** The row's append with the greatest start at or before `position` (its first if none). */
export function appendAt(row: StoredChunkRow, position: number): StoredChunk {
  if (row.bounds === null) return { start: row.start, data: row.data };
  const appends = appendsOfRow(row);
  let found = appends[0]!;
  for (const append of appends) {
    if (append.start > position) break;
    found = append;
  }
  return found;
}

/**
 * What stays of a row when the bytes before `position` (inside it) are trimmed: whole
 * appends before it go, and the append it cuts keeps only its part from `position` on.
 */
export function rowFrom(row: StoredChunkRow, position: number): StoredChunkRow {
  const cut = position - row.start;
  if (cut <= 0 || cut >= row.data.length) throw new Error(`invariant: trimming the chunk row at ${row.start} at ${position}, outside it`);
  const kept = appendsOfRow(row).filter((a) => a.start + a.data.length > position);
  const lengths = kept.map((a) => a.start + a.data.length - Math.max(a.start, position));
  return { start: position, data: row.data.subarray(cut), bounds: lengths.length === 1 ? null : packLengths(lengths) };
}
