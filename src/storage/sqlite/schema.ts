/**
 * The SQLite schema, versioned. A database written by a newer rill is refused rather
 * than misread; older versions are migrated forward in order.
 */
import type Database from 'better-sqlite3';
import { WITHOUT_RECORDS_SQL } from '../records-backfill.js';

export const SCHEMA_VERSION = 13;

const MIGRATIONS: Record<number, string> = {
  1: `
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE buckets (id TEXT PRIMARY KEY, created_at_ms INTEGER NOT NULL);
    CREATE TABLE streams (
      id INTEGER PRIMARY KEY,
      name TEXT NOT NULL UNIQUE,
      bucket TEXT,
      incarnation TEXT NOT NULL,
      content_type TEXT NOT NULL,
      ttl_s INTEGER,
      expires_at_ms INTEGER,
      created_at_ms INTEGER NOT NULL,
      last_access_ms INTEGER NOT NULL,
      expiry_ms INTEGER,
      tail INTEGER NOT NULL,
      closed INTEGER NOT NULL,
      last_stream_seq TEXT,
      epoch_floor INTEGER,
      fork_source_id INTEGER,
      fork_offset INTEGER,
      fork_sub_offset INTEGER,
      earliest_offset INTEGER NOT NULL,
      deleted INTEGER NOT NULL,
      fork_refs INTEGER NOT NULL
    );
    CREATE INDEX streams_expiry ON streams (expiry_ms) WHERE expiry_ms IS NOT NULL AND deleted = 0;
    CREATE INDEX streams_bucket ON streams (bucket, name) WHERE bucket IS NOT NULL;
    CREATE TABLE chunks (
      id INTEGER PRIMARY KEY,
      stream_id INTEGER NOT NULL,
      start INTEGER NOT NULL,
      data BLOB NOT NULL
    );
    CREATE UNIQUE INDEX chunks_position ON chunks (stream_id, start);
    CREATE TABLE producers (
      stream_id INTEGER NOT NULL,
      producer_id TEXT NOT NULL,
      epoch INTEGER NOT NULL,
      last_seq INTEGER NOT NULL,
      receipt_start INTEGER NOT NULL,
      receipt_next INTEGER NOT NULL,
      receipt_closed INTEGER NOT NULL,
      digest TEXT,
      claim_closed_epoch INTEGER,
      claim_closed_seq INTEGER,
      claim_digest TEXT,
      last_seen_ms INTEGER NOT NULL,
      PRIMARY KEY (stream_id, producer_id)
    ) WITHOUT ROWID;
    CREATE INDEX producers_seen ON producers (stream_id, last_seen_ms);
    INSERT INTO meta (key, value) VALUES ('next_stream_id', '1');
  `,
  // Snapshots, retention bookkeeping and attributes.
  2: `
    ALTER TABLE streams ADD COLUMN attrs TEXT;
    ALTER TABLE streams ADD COLUMN snapshot_offset INTEGER;
    ALTER TABLE streams ADD COLUMN snapshot_content_type TEXT;
    ALTER TABLE streams ADD COLUMN snapshot_digest TEXT;
    CREATE TABLE snapshots (stream_id INTEGER PRIMARY KEY, data BLOB NOT NULL);
    CREATE INDEX streams_fork_source ON streams (fork_source_id) WHERE fork_source_id IS NOT NULL;
  `,
  // Appends not yet in the chunks index (see recent.ts), moved there in bulk.
  // AUTOINCREMENT: rowids never go back, even when the table empties, so "sealed up to
  // rowid N" always means the same rows.
  3: `
    CREATE TABLE recent_chunks (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      stream_id INTEGER NOT NULL,
      start INTEGER NOT NULL,
      data BLOB NOT NULL
    );
  `,
  // No new tables: from here on a plain append does not write its stream's row, so
  // `streams.tail` may lag behind the stream's chunks (the engine reads both). A rill
  // of schema 3 would take the lagging tail as the stream's end, so it must refuse this.
  4: `-- the meaning of streams.tail changed; no table did`,
  // Recent appends stored one row per committed batch (see recent-batches.ts). What a
  // crash left in the old table is indexed first, as the engine of schema 4 would have.
  5: `
    INSERT OR IGNORE INTO chunks (stream_id, start, data)
      SELECT r.stream_id, r.start, r.data FROM recent_chunks r WHERE EXISTS (SELECT 1 FROM streams s WHERE s.id = r.stream_id)
      ORDER BY r.stream_id, r.start;
    DROP TABLE recent_chunks;
    CREATE TABLE recent_batches (id INTEGER PRIMARY KEY, appends BLOB NOT NULL);
  `,
  // A row of `chunks` may hold several appends of its stream, `bounds` telling where each
  // ends (see chunk-rows.ts); NULL, as in every existing row, is one append. A rill of
  // schema 5 would read such a row as one append, so it must refuse this.
  6: `
    ALTER TABLE chunks ADD COLUMN bounds BLOB;
  `,
  // A row of `recent_batches` also holds its commit's producer record changes, written to
  // `producers` only later (see held-producers.ts). A rill of schema 6 would not replay
  // them after a crash, so it must refuse this.
  7: `
    ALTER TABLE recent_batches ADD COLUMN producers TEXT;
  `,
  // Subscriptions (see subscription-columns.ts): the state as JSON with the columns the
  // engine queries on, and one row per (subscription, stream) link with its cursor. A
  // rill of schema 7 would serve the streams without them, never waking a subscriber
  // nor dropping the links of streams it deletes, so it must refuse this.
  8: `
    CREATE TABLE subscriptions (
      key TEXT PRIMARY KEY,
      scope TEXT NOT NULL,
      record TEXT NOT NULL,
      awake INTEGER NOT NULL,
      due_ms INTEGER,
      has_pattern INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX subscriptions_due ON subscriptions (due_ms) WHERE due_ms IS NOT NULL;
    CREATE INDEX subscriptions_pattern ON subscriptions (scope) WHERE has_pattern = 1;
    CREATE TABLE subscription_links (
      sub_key TEXT NOT NULL,
      stream TEXT NOT NULL,
      path TEXT NOT NULL,
      explicit INTEGER NOT NULL,
      glob INTEGER NOT NULL,
      acked INTEGER NOT NULL,
      PRIMARY KEY (sub_key, stream)
    ) WITHOUT ROWID;
    CREATE INDEX subscription_links_stream ON subscription_links (stream, sub_key);
    -- With the key's stream, it holds all a scan for pending links reads.
    CREATE INDEX subscription_links_path ON subscription_links (sub_key, path, acked);
  `,
  // JSON record coordinates (core/records.ts): a stream's first retained and next record
  // ordinals, and the ordinals of a producer's last receipt. Rows stored before get them
  // when the store opens (backfillRecords in records-backfill.ts). A rill of schema 8
  // would append without moving record_next, so it must refuse this.
  9: `
    ALTER TABLE streams ADD COLUMN record_first INTEGER;
    ALTER TABLE streams ADD COLUMN record_next INTEGER;
    ALTER TABLE producers ADD COLUMN receipt_record_start INTEGER;
    ALTER TABLE producers ADD COLUMN receipt_record_next INTEGER;
  `,
  // Streams without records number their appends in record_first and record_next, what
  // stats counts as their messages (core/records.ts). Their rows held 0 and 0: emptied
  // here, they are numbered when the store opens (backfillRecords). A rill of schema 9
  // would append without counting, so it must refuse this.
  10: `
    UPDATE streams SET record_first = NULL, record_next = NULL WHERE ${WITHOUT_RECORDS_SQL};
  `,
  // Bucket settings an admin sets (core/bucket-settings.ts), as JSON; NULL: none.
  11: `
    ALTER TABLE buckets ADD COLUMN settings TEXT;
  `,
  // A stream's own retention policy (core/retention-policy.ts), as JSON, and the time
  // marks of an age limit, as JSON, with when the sweep looks at them; NULL: none. A rill
  // of schema 11 would append past the policy without trimming, so it must refuse this.
  12: `
    ALTER TABLE streams ADD COLUMN retention_policy TEXT;
    ALTER TABLE streams ADD COLUMN time_marks TEXT;
    ALTER TABLE streams ADD COLUMN age_due_ms INTEGER;
    CREATE INDEX streams_age_due ON streams (age_due_ms) WHERE age_due_ms IS NOT NULL AND deleted = 0;
  `,
  // The cold tier (storage/cold/, docs/decisions.md): each row is a range of a stream's
  // history held by an object in object storage, its rows of `chunks` deleted in the same
  // transaction. A rill of schema 12 would read those ranges as missing, so it must refuse this.
  13: `
    CREATE TABLE cold_segments (
      stream_id INTEGER NOT NULL,
      start INTEGER NOT NULL,
      end_offset INTEGER NOT NULL,
      object_key TEXT NOT NULL,
      sha256 TEXT NOT NULL,
      object_bytes INTEGER NOT NULL,
      PRIMARY KEY (stream_id, start)
    ) WITHOUT ROWID;
  `,
};

export function migrate(db: Database.Database): void {
  const current = db.pragma('user_version', { simple: true }) as number;
  if (current > SCHEMA_VERSION) {
    throw new Error(`the data directory was written by a newer rill (schema ${current}; this one knows ${SCHEMA_VERSION})`);
  }
  for (let version = current + 1; version <= SCHEMA_VERSION; version++) {
    db.transaction(() => {
      db.exec(MIGRATIONS[version]!);
      db.pragma(`user_version = ${version}`);
    })();
  }
}
