/**
 * `rill check`: verifies a SQLite data file's invariants without changing it, inside one
 * read transaction (so it may run beside a server, which keeps writing):
 *
 * - SQLite's own `integrity_check` (pages, indexes, free list);
 * - the schema version is one this rill knows;
 * - every stream's stored appends (indexed rows of `chunks` and recent ones in
 *   `recent_batches`) are contiguous, none overlapping or missing, and reach its tail;
 * - no appends or producer records belong to a stream that does not exist;
 * - every producer record's receipt lies within its stream's bytes;
 * - stream ids stay below the next one to be given.
 */
import Database from 'better-sqlite3';
import { producerFromValues, PRODUCER_COLUMNS, type ProducerValues } from '../producer-columns.js';
import { unpackProducerChanges } from './held-producers.js';
import { unpackAppends } from './recent-batches.js';
import { SCHEMA_VERSION } from './schema.js';

/** Problems past this many are counted, not listed. */
const MAX_LISTED = 50;

export interface CheckReport {
  /** What is wrong, one sentence each; empty when the file passed. */
  problems: string[];
  streams: number;
  appends: number;
  producers: number;
}

interface StreamRow {
  id: number;
  name: string;
  tail: number;
  fork_offset: number | null;
  fork_source_id: number | null;
}

type Span = { start: number; end: number };

class Problems {
  readonly list: string[] = [];
  private more = 0;
  add(problem: string): void {
    if (this.list.length < MAX_LISTED) this.list.push(problem);
    else this.more++;
  }
  done(): string[] {
    return this.more > 0 ? [...this.list, `... and ${this.more} more problems`] : this.list;
  }
}

/** Checks the database file; `progress(done, total)` is told as streams are checked. Never throws for a bad file: it reports it. */
export function checkDataFile(file: string, progress: (done: number, total: number) => void = () => {}): CheckReport {
  const report: CheckReport = { problems: [], streams: 0, appends: 0, producers: 0 };
  let db: Database.Database;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
  } catch (error) {
    return { ...report, problems: [`cannot open ${file}: ${(error as Error).message}`] };
  }
  const problems = new Problems();
  try {
    db.exec('BEGIN');
    checkFile(db, problems, report, progress);
  } catch (error) {
    problems.add(`the database is damaged: ${(error as Error).message}`);
  } finally {
    db.close();
  }
  return { ...report, problems: problems.done() };
}

function checkFile(db: Database.Database, problems: Problems, report: CheckReport, progress: (done: number, total: number) => void): void {
  const version = db.pragma('user_version', { simple: true }) as number;
  if (version !== SCHEMA_VERSION) problems.add(`schema version ${version}, this rill writes ${SCHEMA_VERSION}${version === 0 ? ' (not a rill data file)' : ''}`);
  for (const row of db.pragma('integrity_check(100)') as Array<{ integrity_check: string }>) {
    if (row.integrity_check !== 'ok') problems.add(`integrity_check: ${row.integrity_check}`);
  }
  if (version !== SCHEMA_VERSION) return;
  const streams = db.prepare<[], StreamRow>('SELECT id, name, tail, fork_offset, fork_source_id FROM streams ORDER BY id').all();
  report.streams = streams.length;
  const byId = new Map(streams.map((s) => [s.id, s]));
  const recent = recentAppends(db);
  const ends = new Map<number, number>();
  const spansOf = db.prepare<[number], { start: number; len: number; bounds: Buffer | null }>('SELECT start, length(data) AS len, bounds FROM chunks WHERE stream_id = ? ORDER BY start');
  streams.forEach((stream, i) => {
    ends.set(stream.id, checkStream(stream, spansOf.all(stream.id), recent.get(stream.id) ?? [], problems, report));
    if (i % 256 === 0) progress(i, streams.length);
  });
  progress(streams.length, streams.length);
  for (const { stream_id } of db.prepare<[], { stream_id: number }>('SELECT DISTINCT stream_id FROM chunks WHERE stream_id NOT IN (SELECT id FROM streams)').all()) {
    problems.add(`chunks belong to stream id ${stream_id}, which does not exist`);
  }
  checkProducers(db, byId, ends, problems, report);
  const next = Number(db.prepare<[], { value: string }>("SELECT value FROM meta WHERE key = 'next_stream_id'").get()?.value);
  const highest = streams.at(-1)?.id ?? 0;
  if (!(next > highest)) problems.add(`the next stream id (${next}) is not above the highest in use (${highest}): ids would be reused`);
}

/** Recent appends by stream, from every `recent_batches` row. */
function recentAppends(db: Database.Database): Map<number, Span[]> {
  const byStream = new Map<number, Span[]>();
  for (const packed of db.prepare<[], Buffer>('SELECT appends FROM recent_batches ORDER BY id').pluck().all()) {
    for (const a of unpackAppends(packed)) {
      let list = byStream.get(a.streamId);
      if (!list) byStream.set(a.streamId, (list = []));
      list.push({ start: a.start, end: a.start + a.data.length });
    }
  }
  return byStream;
}

/** Checks one stream's appends; answers where its stored bytes end. */
function checkStream(stream: StreamRow, rows: Array<{ start: number; len: number; bounds: Buffer | null }>, recent: Span[], problems: Problems, report: CheckReport): number {
  const label = `stream ${stream.name} (id ${stream.id})`;
  const spans: Span[] = [];
  for (const row of rows) {
    if (row.bounds !== null) {
      let sum = 0;
      for (let at = 0; at + 4 <= row.bounds.length; at += 4) sum += row.bounds.readUInt32LE(at);
      if (sum !== row.len || row.bounds.length % 4 !== 0) problems.add(`${label}: the row at ${row.start} holds ${row.len} bytes but its bounds say ${sum}`);
      report.appends += row.bounds.length / 4;
    } else report.appends++;
    spans.push({ start: row.start, end: row.start + row.len });
  }
  // A seal may have indexed some recent appends already: those ending within the indexed rows.
  const indexedEnd = spans.at(-1)?.end ?? -1;
  for (const span of recent.sort((a, b) => a.start - b.start)) {
    if (span.end <= indexedEnd) continue;
    spans.push(span);
    report.appends++;
  }
  for (let i = 1; i < spans.length; i++) {
    const gap = spans[i]!.start - spans[i - 1]!.end;
    if (gap > 0) problems.add(`${label}: bytes ${spans[i - 1]!.end} to ${spans[i]!.start} are missing`);
    if (gap < 0) problems.add(`${label}: appends overlap at ${spans[i]!.start}`);
  }
  const base = stream.fork_source_id === null ? 0 : (stream.fork_offset ?? 0);
  const first = spans[0];
  if (first && first.start < base) problems.add(`${label}: an append starts at ${first.start}, before the stream's own bytes begin (${base})`);
  const end = spans.at(-1)?.end ?? stream.tail;
  // The row's tail may lag its appends (they are read too), never lead them.
  if (spans.length > 0 && end < stream.tail) problems.add(`${label}: its tail is ${stream.tail} but its stored bytes end at ${end}`);
  return Math.max(end, stream.tail);
}

/** Producer records, in the table and held in batch rows: of a stream that exists, their receipts within its bytes. */
function checkProducers(db: Database.Database, byId: Map<number, StreamRow>, ends: Map<number, number>, problems: Problems, report: CheckReport): void {
  const rows = db.prepare<[], unknown[]>(`SELECT stream_id, ${PRODUCER_COLUMNS.join(', ')} FROM producers`).raw().all();
  const records = rows.map((r) => ({ streamId: r[0] as number, record: producerFromValues(r.slice(1) as ProducerValues) }));
  // Held changes of a stream deleted since are dropped at recovery, as its rows were at its deletion.
  for (const packed of db.prepare<[], string>('SELECT producers FROM recent_batches WHERE producers IS NOT NULL ORDER BY id').pluck().all()) {
    for (const { streamId, change } of unpackProducerChanges(packed)) if (change !== null && byId.has(streamId)) records.push({ streamId, record: change });
  }
  report.producers = rows.length;
  for (const { streamId, record } of records) {
    const label = `producer ${record.id} of stream id ${streamId}`;
    if (!byId.has(streamId)) {
      problems.add(`${label}: the stream does not exist`);
      continue;
    }
    const end = ends.get(streamId)!;
    const { start, next } = record.receipt;
    if (!(start <= next && next <= end)) problems.add(`${label}: its receipt ${start}-${next} is outside the stream's bytes (0-${end})`);
    if (record.epoch < 0 || record.lastSeq < -1) problems.add(`${label}: epoch ${record.epoch} and seq ${record.lastSeq} are not valid`);
  }
}
