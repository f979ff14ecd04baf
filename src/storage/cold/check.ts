/**
 * `rill check --cold-store`: the cold tier's part of a check. In the data file (or the
 * PostgreSQL database), each stream's segments must follow one another and end where its
 * hot bytes begin (an overlap would be bytes held twice); in the object store, each
 * segment's object must be there, whole (its SHA-256) and the range its row names. Reads only.
 */
import Database from 'better-sqlite3';
import type { ObjectStore } from './object-store.js';
import { decodeSegment, SegmentInvalid } from './segment.js';

/** A segment's row with what the check needs of its stream; the same query on either engine (SEGMENT_LINES_SQL). */
export interface SegmentLine {
  stream_id: number;
  name: string | null;
  incarnation: string | null;
  earliest_offset: number | null;
  start: number;
  end_offset: number;
  object_key: string;
  sha256: string;
  hot_start: number | null;
}

export interface ColdCheckReport {
  segments: number;
  problems: string[];
}

export const SEGMENT_LINES_SQL = `SELECT c.stream_id, s.name, s.incarnation, s.earliest_offset, c.start, c.end_offset, c.object_key, c.sha256,
    (SELECT min(start) FROM chunks WHERE stream_id = c.stream_id) AS hot_start
  FROM cold_segments c LEFT JOIN streams s ON s.id = c.stream_id ORDER BY c.stream_id, c.start`;

/** The segment rows of a SQLite data file. */
export function sqliteSegmentLines(file: string): SegmentLine[] {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return db.prepare<[], SegmentLine>(SEGMENT_LINES_SQL).all();
  } finally {
    db.close();
  }
}

/** The segments' rows: contiguous, and not overlapping the hot bytes. */
function checkRows(lines: SegmentLine[], problems: string[]): void {
  lines.forEach((line, i) => {
    const label = `stream ${line.name ?? '(dropped)'} (id ${line.stream_id})`;
    const next = lines[i + 1];
    if (next !== undefined && next.stream_id === line.stream_id && next.start !== line.end_offset) {
      // Below the earliest offset a gap is retention's, and harmless.
      if (next.start < line.end_offset || next.start > (line.earliest_offset ?? 0)) problems.push(`${label}: cold segments at ${line.start}-${line.end_offset} and ${next.start}-${next.end_offset} do not meet`);
    }
    const last = next === undefined || next.stream_id !== line.stream_id;
    if (last && line.hot_start !== null && line.hot_start < line.end_offset) {
      problems.push(`${label}: its hot bytes begin at ${line.hot_start}, inside its cold segment ${line.start}-${line.end_offset} (bytes held twice)`);
    }
  });
}

async function checkObject(line: SegmentLine, objects: ObjectStore): Promise<string | null> {
  const label = `stream ${line.name} (id ${line.stream_id}): cold object ${line.object_key} (bytes ${line.start} to ${line.end_offset})`;
  let body: Buffer | null;
  try {
    body = await objects.get(line.object_key);
  } catch (error) {
    return `${label}: cannot be read: ${(error as Error).message}`;
  }
  if (body === null) return `${label}: is missing`;
  try {
    decodeSegment(body, { sha256: line.sha256, stream: line.stream_id, incarnation: line.incarnation!, start: line.start, end: line.end_offset });
    return null;
  } catch (error) {
    if (error instanceof SegmentInvalid) return `${label}: is corrupt: ${error.message}`;
    throw error;
  }
}

/** Checks the cold segments `lines` name against `objects`; `progress(done, total)` as objects are read. */
export async function checkColdTier(lines: SegmentLine[], objects: ObjectStore, progress: (done: number, total: number) => void = () => {}): Promise<ColdCheckReport> {
  const problems: string[] = [];
  checkRows(lines, problems);
  // Segments of dropped streams await the sweep: no read reaches them, so their objects are not checked.
  const live = lines.filter((line) => line.name !== null);
  for (let i = 0; i < live.length; i++) {
    const problem = await checkObject(live[i]!, objects);
    if (problem !== null) problems.push(problem);
    progress(i + 1, live.length);
  }
  return { segments: lines.length, problems };
}
