/**
 * The SQL the SQLite engine runs, each statement prepared once, when first run
 * (first-use.ts): one object of named statements over the schema of schema.ts. The
 * statements hold no rule; the engine (engine.ts), its Txn (txn.ts), its stream rows
 * (stream-rows.ts) and its held writes (held-writes.ts) choose when each runs.
 */
import type Database from 'better-sqlite3';
import type { StreamState } from '../../core/types.js';
import { PRODUCER_COLUMNS, type ProducerValues } from '../producer-columns.js';
import { STREAM_VALUE_COLUMNS, streamColumnValues, type StreamRow } from '../stream-columns.js';
import type { StoredChunkRow } from './chunk-rows.js';
import { preparedOnFirstUse } from './first-use.js';

/**
 * A bound LIMIT, written `LIMIT ${BOUND_LIMIT}`. SQLite (3.53 here) plans with the value
 * of a parameter that stands alone as a LIMIT, so it prepares such a statement again
 * every time that parameter is bound, that is on every run (a listing's SELECT paid
 * 30 µs of its 73 µs for it, measured with better-sqlite3). Through a cast the value
 * stays out of the plan, and the statement is prepared once.
 */
export const BOUND_LIMIT = 'CAST(? AS INTEGER)';

/** A stream state as the named parameters of `insertStream`. */
export function streamParams(s: StreamState): Record<string, unknown> {
  const params: Record<string, unknown> = { id: s.id };
  const values = streamColumnValues(s);
  STREAM_VALUE_COLUMNS.forEach((column, i) => (params[column] = values[i]));
  return params;
}

/**
 * The statements by name, with their parameters and the rows they answer. Spelled out
 * (rather than inferred from prepareStatements) so that declaration files can name them.
 */
/** A stream's row as Store.heldTotals sums it; `indexed_end` is where its last indexed append ends. */
export interface HeldRow {
  id: number;
  tail: number;
  earliest_offset: number;
  record_first: number;
  record_next: number;
  indexed_end: number | null;
}

/** A bucket's stream as Store.bucketHeldBytes sums it. */
export interface BucketHeldRow {
  id: number;
  name: string;
  tail: number;
  own_start: number;
  indexed_end: number | null;
}

export interface Statements {
  /** A row's values in STREAM_ROW_COLUMNS order, as one JSON array: see StreamRows.byName. */
  streamByName: Database.Statement<[string], string>;
  streamById: Database.Statement<[number], string>;
  insertStream: Database.Statement;
  deleteStream: Database.Statement<[number]>;
  deleteChunks: Database.Statement<[number]>;
  deleteAllProducers: Database.Statement<[number]>;
  deleteSnapshot: Database.Statement<[number]>;
  putSnapshot: Database.Statement<[number, Buffer]>;
  snapshotBody: Database.Statement<[number], { data: Buffer }>;
  trimWhole: Database.Statement<[number, number, number]>;
  chunkBefore: Database.Statement<[number, number], StoredChunkRow & { id: number }>;
  deleteChunk: Database.Statement<[number]>;
  descendantsEarliest: Database.Statement<[number], { e: number | null }>;
  bucketExpired: Database.Statement<[string, number], StreamRow>;
  expired: Database.Statement<[number, number], StreamRow>;
  ageDue: Database.Statement<[number, number], StreamRow>;
  nextId: Database.Statement<[], { value: string }>;
  setNextId: Database.Statement<[string]>;
  bucket: Database.Statement<[string], { id: string; created_at_ms: number; settings: string | null }>;
  insertBucket: Database.Statement<[string, number, string | null]>;
  deleteBucket: Database.Statement<[string]>;
  bucketUndeleted: Database.Statement<[string], { n: number }>;
  bucketLive: Database.Statement<[string, number], { n: number }>;
  bucketsAfter: Database.Statement<[string, number], { id: string; created_at_ms: number }>;
  listFrom: Database.Statement<[string, string, string, number], { name: string }>;
  insertChunk: Database.Statement<[number, number, Buffer, Buffer | null]>;
  insertBatch: Database.Statement<[number, Buffer, string | null]>;
  batchProducerChanges: Database.Statement<[], string>;
  deleteRecentUpTo: Database.Statement<[number]>;
  clearRecent: Database.Statement;
  lastChunkEnd: Database.Statement<[number], { end: number }>;
  heldPage: Database.Statement<[number, number], HeldRow>;
  bucketHeldPage: Database.Statement<[string, string, number], BucketHeldRow>;
  chunkContaining: Database.Statement<[number, number], StoredChunkRow>;
  chunkRowsFrom: Database.Statement<{ stream: number; from: number; before: number }, StoredChunkRow>;
  producer: Database.Statement<[number, string], ProducerValues>;
  producerCount: Database.Statement<[number], { n: number }>;
  producersAfter: Database.Statement<[number, string, number], ProducerValues>;
  upsertProducer: Database.Statement<[number, ...ProducerValues]>;
  deleteProducer: Database.Statement<[number, string]>;
  forgetProducers: Database.Statement<[number, number], string>;
  liveProducerCount: Database.Statement<[number, number, string], { n: number }>;
  expiredMaxEpoch: Database.Statement<[number, number], { e: number | null }>;
  leastRecentLive: Database.Statement<[number, number, string], { producer_id: string; epoch: number; last_seen_ms: number }>;
}

const STREAM_COLUMNS = ['id', ...STREAM_VALUE_COLUMNS].join(', ');

export function prepareStatements(db: Database.Database): Statements {
  const named = STREAM_COLUMNS.split(', ').map((c) => `@${c}`).join(', ');
  return preparedOnFirstUse({
    streamByName: () => db.prepare<[string], string>(`SELECT json_array(${STREAM_COLUMNS}) FROM streams WHERE name = ?`).pluck(true),
    streamById: () => db.prepare<[number], string>(`SELECT json_array(${STREAM_COLUMNS}) FROM streams WHERE id = ?`).pluck(true),
    insertStream: () => db.prepare(`INSERT INTO streams (${STREAM_COLUMNS}) VALUES (${named})`),
    deleteStream: () => db.prepare<[number]>(`DELETE FROM streams WHERE id = ?`),
    deleteChunks: () => db.prepare<[number]>(`DELETE FROM chunks WHERE stream_id = ?`),
    deleteAllProducers: () => db.prepare<[number]>(`DELETE FROM producers WHERE stream_id = ?`),
    deleteSnapshot: () => db.prepare<[number]>(`DELETE FROM snapshots WHERE stream_id = ?`),
    putSnapshot: () => db.prepare<[number, Buffer]>(`INSERT OR REPLACE INTO snapshots (stream_id, data) VALUES (?, ?)`),
    snapshotBody: () => db.prepare<[number], { data: Buffer }>(`SELECT data FROM snapshots WHERE stream_id = ?`),
    trimWhole: () => db.prepare<[number, number, number]>(`DELETE FROM chunks WHERE stream_id = ? AND start < ? AND start + length(data) <= ?`),
    chunkBefore: () => db.prepare<[number, number], StoredChunkRow & { id: number }>(
      `SELECT id, start, data, bounds FROM chunks WHERE stream_id = ? AND start < ? ORDER BY start DESC LIMIT 1`,
    ),
    deleteChunk: () => db.prepare<[number]>(`DELETE FROM chunks WHERE id = ?`),
    // descendantsEarliest (core/snapshot.ts), as a recursive query.
    descendantsEarliest: () => db.prepare<[number], { e: number | null }>(
      `WITH RECURSIVE d(id, earliest) AS (
         SELECT id, earliest_offset FROM streams WHERE fork_source_id = ?
         UNION ALL SELECT s.id, s.earliest_offset FROM streams s JOIN d ON s.fork_source_id = d.id)
       SELECT min(earliest) AS e FROM d`,
    ),
    // isCollectable and isListed (core/stream.ts) over `deleted` and `expiry_ms` (expiryMs), here and below.
    bucketExpired: () => db.prepare<[string, number], StreamRow>(
      `SELECT * FROM streams WHERE bucket = ? AND deleted = 0 AND expiry_ms IS NOT NULL AND expiry_ms <= ?`,
    ),
    ageDue: () => db.prepare<[number, number], StreamRow>(
      `SELECT * FROM streams WHERE age_due_ms IS NOT NULL AND deleted = 0 AND age_due_ms <= ? ORDER BY age_due_ms LIMIT ${BOUND_LIMIT}`,
    ),
    expired: () => db.prepare<[number, number], StreamRow>(
      `SELECT * FROM streams WHERE expiry_ms IS NOT NULL AND deleted = 0 AND expiry_ms <= ? ORDER BY expiry_ms LIMIT ${BOUND_LIMIT}`,
    ),
    nextId: () => db.prepare<[], { value: string }>(`SELECT value FROM meta WHERE key = 'next_stream_id'`),
    setNextId: () => db.prepare<[string]>(`UPDATE meta SET value = ? WHERE key = 'next_stream_id'`),
    bucket: () => db.prepare<[string], { id: string; created_at_ms: number; settings: string | null }>(`SELECT * FROM buckets WHERE id = ?`),
    // An upsert: a settings change rewrites a bucket that exists.
    insertBucket: () => db.prepare<[string, number, string | null]>(
      `INSERT INTO buckets (id, created_at_ms, settings) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET settings = excluded.settings`,
    ),
    deleteBucket: () => db.prepare<[string]>(`DELETE FROM buckets WHERE id = ?`),
    bucketUndeleted: () => db.prepare<[string], { n: number }>(`SELECT count(*) AS n FROM streams WHERE bucket = ? AND deleted = 0`),
    bucketLive: () => db.prepare<[string, number], { n: number }>(
      `SELECT count(*) AS n FROM streams WHERE bucket = ? AND deleted = 0 AND (expiry_ms IS NULL OR expiry_ms > ?)`,
    ),
    bucketsAfter: () => db.prepare<[string, number], { id: string; created_at_ms: number }>(`SELECT id, created_at_ms FROM buckets WHERE id > ? ORDER BY id LIMIT ${BOUND_LIMIT}`),
    // Names compare as UTF-8 bytes (BINARY collation), the order listings promise.
    listFrom: () => db.prepare<[string, string, string, number], { name: string }>(
      `SELECT name FROM streams WHERE bucket = ? AND name >= ? AND name > ? AND deleted = 0 AND (expiry_ms IS NULL OR expiry_ms > ?) ORDER BY name`,
    ),
    insertChunk: () => db.prepare<[number, number, Buffer, Buffer | null]>(`INSERT INTO chunks (stream_id, start, data, bounds) VALUES (?, ?, ?, ?)`),
    insertBatch: () => db.prepare<[number, Buffer, string | null]>(`INSERT INTO recent_batches (id, appends, producers) VALUES (?, ?, ?)`),
    batchProducerChanges: () => db.prepare<[], string>(`SELECT producers FROM recent_batches WHERE producers IS NOT NULL ORDER BY id`).pluck(),
    deleteRecentUpTo: () => db.prepare<[number]>(`DELETE FROM recent_batches WHERE id <= ?`),
    clearRecent: () => db.prepare(`DELETE FROM recent_batches`),
    // length() of a blob is read from the record header: the bytes themselves are not loaded.
    lastChunkEnd: () => db.prepare<[number], { end: number }>(
      `SELECT start + length(data) AS end FROM chunks WHERE stream_id = ? ORDER BY start DESC LIMIT 1`,
    ),
    // The streams not deleted after an id, each with where its last indexed chunk ends.
    heldPage: () => db.prepare<[number, number], HeldRow>(
      `SELECT id, tail, earliest_offset, record_first, record_next, (SELECT start + length(data) FROM chunks WHERE stream_id = s.id ORDER BY start DESC LIMIT 1) AS indexed_end
         FROM streams s WHERE deleted = 0 AND id > ? ORDER BY id LIMIT ${BOUND_LIMIT}`,
    ),
    bucketHeldPage: () => db.prepare<[string, string, number], BucketHeldRow>(
      `SELECT id, name, tail, max(earliest_offset, coalesce(fork_offset, 0)) AS own_start,
              (SELECT start + length(data) FROM chunks WHERE stream_id = s.id ORDER BY start DESC LIMIT 1) AS indexed_end
         FROM streams s WHERE bucket = ? AND deleted = 0 AND name > ? ORDER BY name LIMIT ${BOUND_LIMIT}`,
    ),
    chunkContaining: () => db.prepare<[number, number], StoredChunkRow>(
      `SELECT start, data, bounds FROM chunks WHERE stream_id = ? AND start <= ? ORDER BY start DESC LIMIT 1`,
    ),
    // Rows from the one holding `from` (a row may hold appends from before it), to `before`.
    chunkRowsFrom: () => db.prepare<{ stream: number; from: number; before: number }, StoredChunkRow>(
      `SELECT start, data, bounds FROM chunks WHERE stream_id = @stream AND start < @before
         AND start >= coalesce((SELECT max(start) FROM chunks WHERE stream_id = @stream AND start <= @from), @from)
       ORDER BY start`,
    ),
    // A record's columns in producerValues' order (producer-columns.ts), read and written as lists.
    producer: () => db.prepare<[number, string], ProducerValues>(`SELECT ${PRODUCER_COLUMNS.join(', ')} FROM producers WHERE stream_id = ? AND producer_id = ?`)
      .raw(),
    producerCount: () => db.prepare<[number], { n: number }>('SELECT count(*) AS n FROM producers WHERE stream_id = ?'),
    // BINARY collation: ids in UTF-8 byte order, as the other engines list them.
    producersAfter: () =>
      db.prepare<[number, string, number], ProducerValues>(`SELECT ${PRODUCER_COLUMNS.join(', ')} FROM producers WHERE stream_id = ? AND producer_id > ? ORDER BY producer_id LIMIT ${BOUND_LIMIT}`).raw(),
    upsertProducer: () => db.prepare<[number, ...ProducerValues]>(
      `INSERT OR REPLACE INTO producers (stream_id, ${PRODUCER_COLUMNS.join(', ')}) VALUES (?, ${PRODUCER_COLUMNS.map(() => '?').join(', ')})`,
    ),
    deleteProducer: () => db.prepare<[number, string]>(`DELETE FROM producers WHERE stream_id = ? AND producer_id = ?`),
    forgetProducers: () => db.prepare<[number, number], string>(`DELETE FROM producers WHERE stream_id = ? AND last_seen_ms <= ? RETURNING producer_id`).pluck(),
    // summarizeProducers (core/producer.ts), as three queries.
    liveProducerCount: () => db.prepare<[number, number, string], { n: number }>(
      `SELECT count(*) AS n FROM producers WHERE stream_id = ? AND last_seen_ms > ? AND producer_id <> ?`,
    ),
    expiredMaxEpoch: () => db.prepare<[number, number], { e: number | null }>(
      `SELECT max(epoch) AS e FROM producers WHERE stream_id = ? AND last_seen_ms <= ?`,
    ),
    // The order of compareEvictionOrder (core/producer.ts): BINARY collation compares UTF-8 bytes.
    leastRecentLive: () => db.prepare<[number, number, string], { producer_id: string; epoch: number; last_seen_ms: number }>(
      `SELECT producer_id, epoch, last_seen_ms FROM producers WHERE stream_id = ? AND last_seen_ms > ? AND producer_id <> ? ORDER BY last_seen_ms, producer_id LIMIT 1`,
    ),
  });
}
