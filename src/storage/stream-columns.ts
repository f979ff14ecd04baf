/**
 * The stored form of a stream state, shared by the SQL engines: one row of `streams`, its
 * columns in one fixed order. Booleans are stored as 0 and 1 in both engines.
 */
import { expiryMs } from '../core/stream.js';
import { retentionFromStored, retentionToStored, type RetentionPolicy } from '../core/retention-policy.js';
import type { StreamConfig, StreamState, TimeMark } from '../core/types.js';

export interface StreamRow {
  id: number;
  name: string;
  bucket: string | null;
  incarnation: string;
  content_type: string;
  ttl_s: number | null;
  expires_at_ms: number | null;
  created_at_ms: number;
  last_access_ms: number;
  tail: number;
  closed: number;
  last_stream_seq: string | null;
  epoch_floor: number | null;
  fork_source_id: number | null;
  fork_offset: number | null;
  fork_sub_offset: number | null;
  earliest_offset: number;
  deleted: number;
  fork_refs: number;
  attrs: string | null;
  snapshot_offset: number | null;
  snapshot_content_type: string | null;
  snapshot_digest: string | null;
  /** Null only in rows stored before record coordinates, until the engine fills them in at open (backfillRecords). */
  record_first: number | null;
  record_next: number | null;
  /** The stream's own retention policy as JSON (core/retention-policy.ts); null: none. */
  retention_policy: string | null;
  /** An age limit's time marks as JSON [[offset, record, atMs], ...]; null: none. */
  time_marks: string | null;
  age_due_ms: number | null;
}

export function rowToStream(row: StreamRow): StreamState {
  const state: StreamState = {
    id: row.id,
    name: row.name,
    bucket: row.bucket,
    incarnation: row.incarnation,
    config: configOf(row),
    createdAtMs: row.created_at_ms,
    lastAccessMs: row.last_access_ms,
    tail: row.tail,
    closed: row.closed === 1,
    lastStreamSeq: row.last_stream_seq,
    epochFloor: row.epoch_floor,
    fork:
      row.fork_source_id === null
        ? null
        : { sourceId: row.fork_source_id, offset: row.fork_offset!, subOffset: row.fork_sub_offset ?? 0 },
    earliestOffset: row.earliest_offset,
    deleted: row.deleted === 1,
    forkRefs: row.fork_refs,
    attrs: row.attrs,
    snapshot:
      row.snapshot_offset === null
        ? null
        : { offset: row.snapshot_offset, contentType: row.snapshot_content_type!, digest: row.snapshot_digest! },
    recordFirst: recordColumn(row, row.record_first),
    recordNext: recordColumn(row, row.record_next),
  };
  // Absent rather than undefined, so that states compare equal across engines.
  const marks = timeMarksFromStored(row.time_marks ?? null);
  if (marks !== undefined && row.age_due_ms !== null && row.age_due_ms !== undefined) {
    state.timeMarks = marks;
    state.ageDueMs = Number(row.age_due_ms);
  }
  return state;
}

function timeMarksFromStored(stored: string | null): TimeMark[] | undefined {
  if (stored === null) return undefined;
  const triples = JSON.parse(stored) as Array<[number, number, number]>;
  return triples.map(([offset, record, atMs]) => ({ offset, record, atMs }));
}

function timeMarksToStored(marks: TimeMark[] | undefined): string | null {
  return marks === undefined ? null : JSON.stringify(marks.map((m) => [m.offset, m.record, m.atMs]));
}

function configOf(row: StreamRow): StreamConfig {
  const config: StreamConfig = { contentType: row.content_type, ttlSeconds: row.ttl_s, expiresAtMs: row.expires_at_ms };
  // Absent rather than undefined, so that states compare equal across engines.
  const retention = retentionFromStored(row.retention_policy ?? null);
  if (retention !== undefined) config.retention = retention;
  return config;
}

function recordColumn(row: StreamRow, value: number | null): number {
  if (value === null) throw new Error(`invariant: stream ${row.id} was loaded before its record coordinates were filled in`);
  return value;
}

/** Each stored column of a stream (except `id`), in the order streamColumnValues gives them. */
export const STREAM_VALUE_COLUMNS = [
  'name',
  'bucket',
  'incarnation',
  'content_type',
  'ttl_s',
  'expires_at_ms',
  'created_at_ms',
  'last_access_ms',
  'expiry_ms',
  'tail',
  'closed',
  'last_stream_seq',
  'epoch_floor',
  'fork_source_id',
  'fork_offset',
  'fork_sub_offset',
  'earliest_offset',
  'deleted',
  'fork_refs',
  'attrs',
  'snapshot_offset',
  'snapshot_content_type',
  'snapshot_digest',
  'record_first',
  'record_next',
  'retention_policy',
  'time_marks',
  'age_due_ms',
] as const;

/** Every column of a stream's row, `id` first: the order of its values in a raw row. */
export const STREAM_ROW_COLUMNS = ['id', ...STREAM_VALUE_COLUMNS] as const;

/**
 * A stream's row read as its values in STREAM_ROW_COLUMNS order (a raw row), as the named
 * row. Read as an object, the row cost better-sqlite3 a property set per column, each
 * column's name made a string again, and the object turned into a dictionary on the way:
 * about 60 of the 77 thousand instructions that a stream-cache miss added to an append
 * under callgrind. An object literal of one fixed shape costs little.
 * test/storage/stream-columns.test.ts holds the indexes to STREAM_ROW_COLUMNS.
 */
export function streamRowOfValues(v: readonly unknown[]): StreamRow {
  return {
    id: v[0],
    name: v[1],
    bucket: v[2],
    incarnation: v[3],
    content_type: v[4],
    ttl_s: v[5],
    expires_at_ms: v[6],
    created_at_ms: v[7],
    last_access_ms: v[8],
    tail: v[10],
    closed: v[11],
    last_stream_seq: v[12],
    epoch_floor: v[13],
    fork_source_id: v[14],
    fork_offset: v[15],
    fork_sub_offset: v[16],
    earliest_offset: v[17],
    deleted: v[18],
    fork_refs: v[19],
    attrs: v[20],
    snapshot_offset: v[21],
    snapshot_content_type: v[22],
    snapshot_digest: v[23],
    record_first: v[24],
    record_next: v[25],
    retention_policy: v[26],
    time_marks: v[27],
    age_due_ms: v[28],
  } as StreamRow;
}

/** One value per entry of a tuple: mapped over a type parameter, so that a tuple stays one. */
type ValuesOf<T extends readonly unknown[]> = { -readonly [K in keyof T]: unknown };
/** One value per column of STREAM_VALUE_COLUMNS: a list of another length fails to compile. */
export type StreamColumnValues = ValuesOf<typeof STREAM_VALUE_COLUMNS>;

export const TAIL_COLUMN = STREAM_VALUE_COLUMNS.indexOf('tail');
export const RECORD_NEXT_COLUMN = STREAM_VALUE_COLUMNS.indexOf('record_next');

/**
 * Whether two states store the same value in every column but `tail` and `record_next`:
 * what an append changes, and all that a plain one does. Field by field, without the two
 * lists of streamColumnValues (which the SQLite engine's updateStream then builds only
 * when this answers false): those lists were about 1,600 instructions of every append
 * under callgrind. test/storage/stream-columns.test.ts holds it to streamColumnValues, column
 * by column.
 */
export function sameBesideTails(a: StreamState, b: StreamState): boolean {
  return a.lastAccessMs === b.lastAccessMs && sameBesideAppend(a, b);
}

/**
 * Whether two states store the same value in every column an append leaves alone: all
 * but `tail`, `record_next`, `last_access_ms` and `expiry_ms` (which follows from the last
 * access and the config). PostgreSQL writes a stream that differs in these only with a
 * narrow update. test/storage/stream-columns.test.ts holds it to streamColumnValues.
 */
export function sameBesideAppend(a: StreamState, b: StreamState): boolean {
  if (
    a.name !== b.name ||
    a.bucket !== b.bucket ||
    a.incarnation !== b.incarnation ||
    a.createdAtMs !== b.createdAtMs ||
    a.closed !== b.closed ||
    a.lastStreamSeq !== b.lastStreamSeq ||
    a.epochFloor !== b.epochFloor ||
    a.earliestOffset !== b.earliestOffset ||
    a.deleted !== b.deleted ||
    a.forkRefs !== b.forkRefs ||
    a.attrs !== b.attrs ||
    a.recordFirst !== b.recordFirst ||
    a.ageDueMs !== b.ageDueMs ||
    !sameTimeMarks(a.timeMarks, b.timeMarks)
  ) {
    return false;
  }
  const c = a.config;
  const d = b.config;
  if (c !== d && (c.contentType !== d.contentType || c.ttlSeconds !== d.ttlSeconds || c.expiresAtMs !== d.expiresAtMs || !sameRetention(c.retention, d.retention))) return false;
  const f = a.fork;
  const g = b.fork;
  if (f !== g && (f === null || g === null || f.sourceId !== g.sourceId || f.offset !== g.offset || f.subOffset !== g.subOffset)) return false;
  const s = a.snapshot;
  const t = b.snapshot;
  return s === t || (s !== null && t !== null && s.offset === t.offset && s.contentType === t.contentType && s.digest === t.digest);
}

function sameRetention(x: RetentionPolicy | undefined, y: RetentionPolicy | undefined): boolean {
  return x === y || (x !== undefined && y !== undefined && x.maxBytes === y.maxBytes && x.maxMessages === y.maxMessages && x.maxAgeMs === y.maxAgeMs);
}

function sameTimeMarks(x: TimeMark[] | undefined, y: TimeMark[] | undefined): boolean {
  if (x === y) return true;
  if (x === undefined || y === undefined || x.length !== y.length) return false;
  return x.every((m, i) => m.offset === y[i]!.offset && m.record === y[i]!.record && m.atMs === y[i]!.atMs);
}

/**
 * A state's stored values, in STREAM_VALUE_COLUMNS' order. One function reading fields
 * directly, not a closure per column: updateStream runs it twice per append, and the 46
 * closure calls it replaced were 4,000 instructions of an append under callgrind.
 */
export function streamColumnValues(s: StreamState): StreamColumnValues {
  return [
    s.name,
    s.bucket,
    s.incarnation,
    s.config.contentType,
    s.config.ttlSeconds,
    s.config.expiresAtMs,
    s.createdAtMs,
    s.lastAccessMs,
    expiryMs(s),
    s.tail,
    s.closed ? 1 : 0,
    s.lastStreamSeq,
    s.epochFloor,
    s.fork?.sourceId ?? null,
    s.fork?.offset ?? null,
    s.fork?.subOffset ?? null,
    s.earliestOffset,
    s.deleted ? 1 : 0,
    s.forkRefs,
    s.attrs,
    s.snapshot?.offset ?? null,
    s.snapshot?.contentType ?? null,
    s.snapshot?.digest ?? null,
    s.recordFirst,
    s.recordNext,
    retentionToStored(s.config.retention),
    timeMarksToStored(s.timeMarks),
    s.ageDueMs ?? null,
  ];
}

