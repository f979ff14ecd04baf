/**
 * The PostgreSQL schema, versioned like SQLite's. Nodes starting together migrate one at
 * a time (an advisory lock held by the migrating transaction); a database written by a
 * newer rill is refused rather than misread.
 *
 * Columns match the SQLite engine's (stream-columns.ts, producer-columns.ts), booleans as
 * 0/1. Names and producer ids use the "C" collation: listings and eviction order compare
 * UTF-8 bytes, as SQLite's BINARY collation does.
 */
import pg, { type PoolClient } from 'pg';
import { chunksFromChain } from '../chain.js';
import { legacyRecords, withoutRecords, WITHOUT_RECORDS_SQL } from '../records-backfill.js';
import { rowToStream, type StreamRow } from '../stream-columns.js';
import { ReadSource, withLoads } from './chunks.js';

export const SCHEMA_VERSION = 7;

/** Any constant of our own: only rill's migrations take this advisory lock. */
const MIGRATION_LOCK = 0x72696c6c;
/** How long an open waits for the lock that storeChunksUncompressed's ALTER takes. */
const STORAGE_LOCK_TIMEOUT = '1s';
/** PostgreSQL's code for a lock not obtained within lock_timeout. */
const LOCK_NOT_AVAILABLE = '55P03';

const MIGRATIONS: Record<number, string> = {
  1: `
    CREATE SEQUENCE rill_stream_ids;
    CREATE TABLE buckets (id TEXT COLLATE "C" PRIMARY KEY, created_at_ms BIGINT NOT NULL);
    CREATE TABLE streams (
      id BIGINT PRIMARY KEY,
      name TEXT COLLATE "C" NOT NULL UNIQUE,
      bucket TEXT COLLATE "C",
      incarnation TEXT NOT NULL,
      content_type TEXT NOT NULL,
      ttl_s BIGINT,
      expires_at_ms BIGINT,
      created_at_ms BIGINT NOT NULL,
      last_access_ms BIGINT NOT NULL,
      expiry_ms BIGINT,
      tail BIGINT NOT NULL,
      closed SMALLINT NOT NULL,
      last_stream_seq TEXT,
      epoch_floor BIGINT,
      fork_source_id BIGINT,
      fork_offset BIGINT,
      fork_sub_offset BIGINT,
      earliest_offset BIGINT NOT NULL,
      deleted SMALLINT NOT NULL,
      fork_refs INTEGER NOT NULL,
      attrs TEXT,
      snapshot_offset BIGINT,
      snapshot_content_type TEXT,
      snapshot_digest TEXT
    );
    CREATE INDEX streams_expiry ON streams (expiry_ms) WHERE expiry_ms IS NOT NULL AND deleted = 0;
    CREATE INDEX streams_bucket ON streams (bucket, name) WHERE bucket IS NOT NULL;
    CREATE INDEX streams_fork_source ON streams (fork_source_id) WHERE fork_source_id IS NOT NULL;
    CREATE TABLE chunks (
      stream_id BIGINT NOT NULL,
      start BIGINT NOT NULL,
      data BYTEA NOT NULL,
      PRIMARY KEY (stream_id, start)
    );
    CREATE TABLE producers (
      stream_id BIGINT NOT NULL,
      producer_id TEXT COLLATE "C" NOT NULL,
      epoch BIGINT NOT NULL,
      last_seq BIGINT NOT NULL,
      receipt_start BIGINT NOT NULL,
      receipt_next BIGINT NOT NULL,
      receipt_closed SMALLINT NOT NULL,
      digest TEXT,
      claim_closed_epoch BIGINT,
      claim_closed_seq BIGINT,
      claim_digest TEXT,
      last_seen_ms BIGINT NOT NULL,
      PRIMARY KEY (stream_id, producer_id)
    );
    CREATE INDEX producers_seen ON producers (stream_id, last_seen_ms);
    CREATE TABLE snapshots (stream_id BIGINT PRIMARY KEY, data BYTEA NOT NULL);
  `,
  // Subscriptions, as in SQLite's schema 8 (subscription-columns.ts).
  2: `
    CREATE TABLE subscriptions (
      key TEXT COLLATE "C" PRIMARY KEY,
      scope TEXT COLLATE "C" NOT NULL,
      record TEXT NOT NULL,
      awake SMALLINT NOT NULL,
      due_ms BIGINT,
      has_pattern SMALLINT NOT NULL
    );
    CREATE INDEX subscriptions_due ON subscriptions (due_ms) WHERE due_ms IS NOT NULL;
    CREATE INDEX subscriptions_pattern ON subscriptions (scope) WHERE has_pattern = 1;
    CREATE TABLE subscription_links (
      sub_key TEXT COLLATE "C" NOT NULL,
      stream TEXT COLLATE "C" NOT NULL,
      path TEXT COLLATE "C" NOT NULL,
      explicit SMALLINT NOT NULL,
      glob SMALLINT NOT NULL,
      acked BIGINT NOT NULL,
      PRIMARY KEY (sub_key, stream)
    );
    CREATE INDEX subscription_links_stream ON subscription_links (stream, sub_key);
    CREATE INDEX subscription_links_path ON subscription_links (sub_key, path);
  `,
  // JSON record coordinates, as in SQLite's schema 9; rows stored before get their
  // ordinals in the same transaction (backfillRecords).
  3: `
    ALTER TABLE streams ADD COLUMN record_first BIGINT;
    ALTER TABLE streams ADD COLUMN record_next BIGINT;
    ALTER TABLE producers ADD COLUMN receipt_record_start BIGINT;
    ALTER TABLE producers ADD COLUMN receipt_record_next BIGINT;
  `,
  // Streams without records number their appends, as in SQLite's schema 10; their rows
  // held 0 and 0 and are numbered in the same transaction (backfillRecords).
  4: `
    UPDATE streams SET record_first = NULL, record_next = NULL WHERE ${WITHOUT_RECORDS_SQL};
  `,
  // Bucket settings an admin sets (core/bucket-settings.ts), as in SQLite's schema 11; NULL: none.
  5: `
    ALTER TABLE buckets ADD COLUMN settings JSONB;
  `,
  // A stream's own retention policy and an age limit's time marks, as in SQLite's schema 12; NULL: none.
  6: `
    ALTER TABLE streams ADD COLUMN retention_policy TEXT;
    ALTER TABLE streams ADD COLUMN time_marks TEXT;
    ALTER TABLE streams ADD COLUMN age_due_ms BIGINT;
    CREATE INDEX streams_age_due ON streams (age_due_ms) WHERE age_due_ms IS NOT NULL AND deleted = 0;
  `,
  // The cold tier's segments (storage/cold/, postgres/cold-rows.ts), as in SQLite's schema 13:
  // one row per object, naming the stream's bytes [start, end_offset) it holds.
  7: `
    CREATE TABLE cold_segments (
      stream_id BIGINT NOT NULL,
      start BIGINT NOT NULL,
      end_offset BIGINT NOT NULL,
      object_key TEXT NOT NULL,
      sha256 TEXT NOT NULL,
      object_bytes BIGINT NOT NULL,
      PRIMARY KEY (stream_id, start)
    );
  `,
};

export async function migrate(client: PoolClient): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await client.query('CREATE TABLE IF NOT EXISTS rill_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)');
    const found = await client.query<{ value: string }>(`SELECT value FROM rill_meta WHERE key = 'schema_version'`);
    const current = found.rows.length === 0 ? 0 : Number(found.rows[0]!.value);
    if (current > SCHEMA_VERSION) {
      throw new Error(`the database was written by a newer rill (schema ${current}; this one knows ${SCHEMA_VERSION})`);
    }
    for (let version = current + 1; version <= SCHEMA_VERSION; version++) await client.query(MIGRATIONS[version]!);
    if (current < 4) await backfillRecords(client);
    await storeChunksUncompressed(client);
    await client.query(
      `INSERT INTO rill_meta (key, value) VALUES ('schema_version', $1) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`,
      [String(SCHEMA_VERSION)],
    );
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
}

/**
 * Chunk bytes are stored out of line and uncompressed (`STORAGE EXTERNAL`), as SQLite
 * stores them: PostgreSQL decompresses a slice of a compressed value from its start, so a
 * reader going through a large append in windows decompressed it again for each window
 * (docs/decisions.md, "Large appends kept for reads", has the figures). Not a schema
 * version: any rill reads either form, and this applies to values written from now on.
 */
async function storeChunksUncompressed(client: PoolClient): Promise<void> {
  const { rows } = await client.query<{ storage: string }>(
    `SELECT attstorage AS storage FROM pg_attribute WHERE attrelid = 'chunks'::regclass AND attname = 'data'`,
  );
  if (rows[0]?.storage === 'e') return;
  // The ALTER takes the table's strongest lock: waiting behind a long read of chunks (a
  // catch-up's COPY), it would queue every node's reads and writes of chunks behind it.
  // It gives up after STORAGE_LOCK_TIMEOUT instead, and a later open tries again.
  await client.query('SAVEPOINT chunk_storage');
  try {
    await client.query(`SET LOCAL lock_timeout = '${STORAGE_LOCK_TIMEOUT}'`);
    await client.query('ALTER TABLE chunks ALTER COLUMN data SET STORAGE EXTERNAL');
    await client.query('SET LOCAL lock_timeout TO DEFAULT');
    await client.query('RELEASE SAVEPOINT chunk_storage');
  } catch (error) {
    if (!(error instanceof pg.DatabaseError && error.code === LOCK_NOT_AVAILABLE)) throw error;
    await client.query('ROLLBACK TO SAVEPOINT chunk_storage');
  }
}

/**
 * Gives streams stored before record coordinates their ordinals (records-backfill.ts),
 * sources before their forks (a fork's id is the greater), inside the migration's
 * transaction, so no node serves a stream without them.
 */
async function backfillRecords(client: PoolClient): Promise<void> {
  const { rows } = await client.query<StreamRow>('SELECT * FROM streams WHERE record_next IS NULL ORDER BY id');
  for (const row of rows) {
    const stream = rowToStream(withoutRecords(row));
    const source = new ReadSource(client, stream.tail);
    const retained = await withLoads(() => chunksFromChain(source, stream, stream.earliestOffset, stream.tail - stream.earliestOffset));
    const records = legacyRecords(stream, retained);
    await client.query('UPDATE streams SET record_first = $1, record_next = $2 WHERE id = $3', [records.first, records.next, row.id]);
  }
}
