/**
 * The rows a PostgreSQL batch (batch.ts) loads, each as one statement: stream rows under
 * their locks, producer records, buckets, and the producer summary of a stream with too
 * many producers to load whole. Each answers in the core's terms; the batch decides what
 * to load and when, and remembers what it got.
 */
import type { BucketState } from '../../core/bucket.js';
import { withSettings } from '../../core/bucket-settings.js';
import type { ProducerRecord, ProducerView, StreamState } from '../../core/types.js';
import { PRODUCER_COLUMNS, producerFromValues, type ProducerValues } from '../producer-columns.js';
import { rowToStream, type StreamRow } from '../stream-columns.js';
import type { Queryable } from './chunks.js';

export type ProducerSummary = NonNullable<ProducerView['others']>;

/** A producer record as loaded: null when the stream has none under that id. */
export interface LoadedProducer {
  streamId: number;
  producerId: string;
  record: ProducerRecord | null;
}

/*
 * Loads find each row through its key by construction: a lateral subquery that locks or
 * has a LIMIT is never merged into the outer query, so it runs once per name or id, in a
 * nested loop. Written as `name = ANY($1) OR id = ANY($2)`, or as joins, the planner chose
 * for a table of a few hundred streams to read every row and search the arrays for each:
 * with producer appends, 30 us of PostgreSQL's time per append in the locking load
 * alone (issue 41).
 */

/**
 * The stream rows named (`$1`) or numbered (`$2`), locked in name order ("C", as the
 * column), each with its version and the transaction's id.
 */
const LOAD_STREAMS_SQL = `SELECT s.*, pg_current_xact_id()::xid::text AS txn_id
  FROM (SELECT n.name COLLATE "C" AS name FROM unnest($1::text[]) n(name)
        UNION SELECT t.name FROM unnest($2::bigint[]) i(id) CROSS JOIN LATERAL (SELECT name FROM streams WHERE id = i.id LIMIT 1) t
        ORDER BY name) k
  CROSS JOIN LATERAL (SELECT xmin::text AS row_version, * FROM streams WHERE name = k.name FOR UPDATE) s`;

/** One row per (stream name, producer id) whose stream exists, the record's columns null when it has none. */
const LOAD_PRODUCERS_SQL = `SELECT s.id AS sid, k.pid, p.* FROM unnest($1::text[], $2::text[]) k(name, pid)
  CROSS JOIN LATERAL (SELECT id FROM streams WHERE name = k.name COLLATE "C" LIMIT 1) s
  LEFT JOIN LATERAL (SELECT * FROM producers WHERE stream_id = s.id AND producer_id = k.pid LIMIT 1) p ON true`;

const PRODUCER_SELECT = `SELECT p.stream_id, ${PRODUCER_COLUMNS.map((c) => `p.${c}`).join(', ')}`;

/**
 * Whether stream `sid` has more than $2 producers, counting at most $2 + 1 of them: a
 * stream with thousands is not counted whole at each batch with a new producer. (A count
 * correlated with each producer row read once counted a stream again for every one of
 * them: 80 ms a batch at about a thousand, docs/performance.md.)
 */
const PRODUCERS_PAST_BOUND = '(SELECT count(*) FROM (SELECT 1 FROM producers WHERE stream_id = sid LIMIT $2 + 1) n) > $2';

/** summarizeProducers (core/producer.ts) as one query; the order of compareEvictionOrder: "C" collation compares UTF-8 bytes. */
const PRODUCER_SUMMARY_SQL = `SELECT (SELECT count(*)::bigint FROM producers WHERE stream_id = $1 AND last_seen_ms > $2 AND producer_id <> $3) AS live,
    (SELECT max(epoch) FROM producers WHERE stream_id = $1 AND last_seen_ms <= $2) AS expired_max,
    l.producer_id AS lru_id, l.epoch AS lru_epoch, l.last_seen_ms AS lru_seen
  FROM (SELECT 1) one LEFT JOIN LATERAL (SELECT producer_id, epoch, last_seen_ms FROM producers
    WHERE stream_id = $1 AND last_seen_ms > $2 AND producer_id <> $3 ORDER BY last_seen_ms, producer_id LIMIT 1) l ON true`;

function producerOf(row: Record<string, unknown>): ProducerRecord {
  return producerFromValues(PRODUCER_COLUMNS.map((column) => row[column]) as ProducerValues);
}

/**
 * The streams named or numbered, locked in name order, each with the version of its row;
 * and the transaction's id when a row was found (locking one gives the transaction its id).
 */
export async function loadStreamRows(db: Queryable, names: string[], ids: number[]): Promise<{ rows: Array<{ stream: StreamState; version: string }>; transactionId: string | null }> {
  // pg_current_xact_id() is evaluated only for rows found: a batch that finds none is not given an id (nor a commit to flush) by it.
  const { rows } = await db.query<StreamRow & { row_version: string; txn_id: string }>(LOAD_STREAMS_SQL, [names, ids]);
  return { rows: rows.map((row) => ({ stream: rowToStream(row), version: row.row_version })), transactionId: rows[0]?.txn_id ?? null };
}

/** Stream rows a statement of the caller's selects (and locks). */
export async function selectStreams(db: Queryable, sql: string, values: unknown[]): Promise<StreamState[]> {
  const { rows } = await db.query<StreamRow>(sql, values);
  return rows.map(rowToStream);
}

/** The records of (stream name, producer id) pairs, for each pair whose stream exists. */
export async function loadProducers(db: Queryable, keys: Array<[string, string]>): Promise<LoadedProducer[]> {
  const { rows } = await db.query<Record<string, unknown>>(LOAD_PRODUCERS_SQL, [keys.map((k) => k[0]), keys.map((k) => k[1])]);
  return rows.map((row) => ({ streamId: row.sid as number, producerId: row.pid as string, record: row.producer_id === null ? null : producerOf(row) }));
}

export async function loadProducer(db: Queryable, streamId: number, producerId: string): Promise<ProducerRecord | null> {
  const { rows } = await db.query<Record<string, unknown>>(`${PRODUCER_SELECT} FROM producers p WHERE p.stream_id = $1 AND p.producer_id = $2`, [streamId, producerId]);
  return rows[0] ? producerOf(rows[0]) : null;
}

/**
 * Every producer record of the streams that have at most `bound` of them, and the streams
 * that have more (`crowded`), whose records are not loaded. Two statements, sent together.
 */
export async function loadProducersWithin(db: Queryable, streamIds: number[], bound: number): Promise<{ records: LoadedProducer[]; crowded: Set<number> }> {
  const [crowded, { rows }] = await Promise.all([
    db.query<{ stream_id: number }>(`SELECT sid AS stream_id FROM unnest($1::bigint[]) sid WHERE ${PRODUCERS_PAST_BOUND}`, [streamIds, bound]),
    db.query<Record<string, unknown>>(
      `${PRODUCER_SELECT} FROM producers p WHERE p.stream_id IN (SELECT sid FROM unnest($1::bigint[]) sid WHERE NOT ${PRODUCERS_PAST_BOUND})`,
      [streamIds, bound],
    ),
  ]);
  return {
    records: rows.map((row) => ({ streamId: row.stream_id as number, producerId: row.producer_id as string, record: producerOf(row) })),
    crowded: new Set(crowded.rows.map((r) => r.stream_id)),
  };
}

/** The summary of a stream's producers but `excludeId`, as summarizeProducers gives it from records. */
export async function loadProducerSummary(db: Queryable, streamId: number, cutoffMs: number, excludeId: string): Promise<ProducerSummary> {
  const { rows } = await db.query<{ live: number; expired_max: number | null; lru_id: string | null; lru_epoch: number | null; lru_seen: number | null }>(PRODUCER_SUMMARY_SQL, [
    streamId,
    cutoffMs,
    excludeId,
  ]);
  const r = rows[0]!;
  return {
    liveCount: r.live,
    expiredMaxEpoch: r.expired_max,
    leastRecentLive: r.lru_id === null ? null : { id: r.lru_id, epoch: r.lru_epoch!, lastSeenMs: r.lru_seen! },
  };
}

/** The buckets by id, locked: a bucket's deletion and a stream's creation in it never pass each other. */
export async function loadBuckets(db: Queryable, ids: string[]): Promise<BucketState[]> {
  const { rows } = await db.query<{ id: string; created_at_ms: number; settings: unknown }>('SELECT * FROM buckets WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE', [ids]);
  return rows.map((row) => withSettings({ id: row.id, createdAtMs: row.created_at_ms }, row.settings));
}
