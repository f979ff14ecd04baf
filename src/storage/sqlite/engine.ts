/**
 * The embedded default engine: SQLite through better-sqlite3, WAL journal. Each batch is
 * one transaction, acknowledged once an fsync of the WAL covers it (durability.ts); a
 * command that breaks an invariant is dropped and the batch rerun without it.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { BucketState } from '../../core/bucket.js';
import type { StreamState } from '../../core/types.js';
import { BatchedStore, ReadNotSettledError, StorageUnavailableError } from '../batched.js';
import type { Txn } from '../executor.js';
import { chunkFromChain, chunksFromChain, readFromChain, type ChunkSource, type StoredChunk } from '../chain.js';
import { appendAt, appendsOfRow, rowFrom, type StoredChunkRow } from './chunk-rows.js';
import type { BucketInfo, StoreOptions, StreamListing } from '../store.js';
import { StreamCache } from './cache.js';
import { ProducerCache } from './producer-cache.js';
import { HeldProducers, unpackProducerChanges, type HeldChange } from './held-producers.js';
import { PRODUCER_COLUMNS, producerFromValues, producerValues, type ProducerValues } from '../producer-columns.js';
import { WalDurability, type Fdatasync } from './durability.js';
import { ChunkInserter, packAppends, pointIntoPacked, recoverRecentBatches, type PackedAppend } from './recent-batches.js';
import { RecentChunks, type RecentChunk, type SealMarks } from './recent.js';
import { lockDataDir } from './dir-lock.js';
import { migrate } from './schema.js';
import { rowToStream, STREAM_VALUE_COLUMNS, streamColumnValues, TAIL_COLUMN, type StreamRow } from '../stream-columns.js';

/** When recent appends (recent.ts) are indexed, and how many at a time. */
export interface RecentIndexing {
  /** Recent appends are sealed for indexing once this many have gathered... */
  sealRows: number;
  /**
   * ...or, when they are spread over many streams, `perStream` times as many as the
   * streams they belong to, up to `max` (so each stream's index page holds several).
   */
  spreadRows?: { perStream: number; max: number };
  /** ...or this many bytes... */
  sealBytes: number;
  /** ...or this many bytes of large appends (recent.ts's LARGE_APPEND_BYTES); sealBytes when not given. */
  sealLargeBytes?: number;
  /** Sealed appends indexed after each commit: a slice small enough not to stall requests. */
  stepRows: number;
}

// A seal writes up to one index page per stream it holds, so the rows mark grows with the
// streams held, 16 appends each: at a fixed 8,192, 10,000 streams got a page per append
// once the index outgrew them (6 KB written per 100-byte append after 3.5 minutes); at
// 65,536 it stayed at 1.7-2.0 KB. Fixed at 65,536, 500 streams cost 8% more CPU per
// append (a larger set held) for nothing; 8,192 is the floor. 8 MiB lets 65,536 appends
// of 100 bytes gather. The mark for large appends keeps them from waiting in memory,
// where they save little: with 8 MiB, 128 appends of 1 MiB grew the server by 91-104
// MiB, with 1 MiB by 66-72 MiB (limits.test.ts allows 100).
const DEFAULT_RECENT_INDEXING: RecentIndexing = {
  sealRows: 8192,
  spreadRows: { perStream: 16, max: 65_536 },
  sealBytes: 8 * 1024 * 1024,
  sealLargeBytes: 1024 * 1024,
  stepRows: 256,
};

/** The marks a seal waits for when the held appends belong to `streams` streams. */
function sealMarksFor(indexing: RecentIndexing, streams: number): SealMarks {
  const spread = indexing.spreadRows;
  const rows = spread === undefined ? indexing.sealRows : Math.min(spread.max, Math.max(indexing.sealRows, spread.perStream * streams));
  return { rows, bytes: indexing.sealBytes, largeBytes: indexing.sealLargeBytes ?? indexing.sealBytes };
}

/** Bytes of appends one row of `recent_batches` holds, unless a single append is larger. */
const MAX_BATCH_ROW_BYTES = 1024 * 1024;

/**
 * Stream states kept in memory. 100,000 cached states held about 120 MB; 20,000 keep the
 * 100,000-stream figure near 180 MB, and cost writes spread over more streams than that
 * ~8% (one row read each).
 */
export const DEFAULT_STREAM_CACHE_ENTRIES = 20_000;

/**
 * A read waits for each pending commit that removed bytes of its stream (about one fsync
 * each); a client that drops and recreates one name without pause could otherwise hold
 * that stream's readers forever. Past this many waits the read is refused with 503.
 */
export const MAX_REMOVAL_WAITS = 100;

/** SQLite result codes that mean the storage failed, not that a statement broke a rule. */
const STORAGE_FAULT_CODES = ['SQLITE_FULL', 'SQLITE_IOERR', 'SQLITE_NOMEM', 'SQLITE_BUSY', 'SQLITE_LOCKED', 'SQLITE_READONLY', 'SQLITE_CORRUPT', 'SQLITE_CANTOPEN', 'SQLITE_NOTADB', 'SQLITE_PROTOCOL', 'SQLITE_NOLFS'];

function isStorageFault(error: unknown): boolean {
  if (!(error instanceof Database.SqliteError)) return false;
  return STORAGE_FAULT_CODES.some((code) => error.code === code || error.code.startsWith(`${code}_`));
}

function streamParams(s: StreamState): Record<string, unknown> {
  const params: Record<string, unknown> = { id: s.id };
  const values = streamColumnValues(s);
  STREAM_VALUE_COLUMNS.forEach((column, i) => (params[column] = values[i]));
  return params;
}

const STREAM_COLUMNS = ['id', ...STREAM_VALUE_COLUMNS].join(', ');

function prepareStatements(db: Database.Database) {
  const named = STREAM_COLUMNS.split(', ').map((c) => `@${c}`).join(', ');
  return {
    streamByName: db.prepare<[string], StreamRow>(`SELECT * FROM streams WHERE name = ?`),
    streamById: db.prepare<[number], StreamRow>(`SELECT * FROM streams WHERE id = ?`),
    insertStream: db.prepare(`INSERT INTO streams (${STREAM_COLUMNS}) VALUES (${named})`),
    deleteStream: db.prepare<[number]>(`DELETE FROM streams WHERE id = ?`),
    deleteChunks: db.prepare<[number]>(`DELETE FROM chunks WHERE stream_id = ?`),
    deleteAllProducers: db.prepare<[number]>(`DELETE FROM producers WHERE stream_id = ?`),
    deleteSnapshot: db.prepare<[number]>(`DELETE FROM snapshots WHERE stream_id = ?`),
    putSnapshot: db.prepare<[number, Buffer]>(`INSERT OR REPLACE INTO snapshots (stream_id, data) VALUES (?, ?)`),
    snapshotBody: db.prepare<[number], { data: Buffer }>(`SELECT data FROM snapshots WHERE stream_id = ?`),
    trimWhole: db.prepare<[number, number, number]>(`DELETE FROM chunks WHERE stream_id = ? AND start < ? AND start + length(data) <= ?`),
    chunkBefore: db.prepare<[number, number], StoredChunkRow & { id: number }>(
      `SELECT id, start, data, bounds FROM chunks WHERE stream_id = ? AND start < ? ORDER BY start DESC LIMIT 1`,
    ),
    deleteChunk: db.prepare<[number]>(`DELETE FROM chunks WHERE id = ?`),
    descendantsEarliest: db.prepare<[number], { e: number | null }>(
      `WITH RECURSIVE d(id, earliest) AS (
         SELECT id, earliest_offset FROM streams WHERE fork_source_id = ?
         UNION ALL SELECT s.id, s.earliest_offset FROM streams s JOIN d ON s.fork_source_id = d.id)
       SELECT min(earliest) AS e FROM d`,
    ),
    bucketExpired: db.prepare<[string, number], StreamRow>(
      `SELECT * FROM streams WHERE bucket = ? AND deleted = 0 AND expiry_ms IS NOT NULL AND expiry_ms <= ?`,
    ),
    expired: db.prepare<[number, number], StreamRow>(
      `SELECT * FROM streams WHERE expiry_ms IS NOT NULL AND deleted = 0 AND expiry_ms <= ? ORDER BY expiry_ms LIMIT ?`,
    ),
    nextId: db.prepare<[], { value: string }>(`SELECT value FROM meta WHERE key = 'next_stream_id'`),
    setNextId: db.prepare<[string]>(`UPDATE meta SET value = ? WHERE key = 'next_stream_id'`),
    bucket: db.prepare<[string], { id: string; created_at_ms: number }>(`SELECT * FROM buckets WHERE id = ?`),
    insertBucket: db.prepare<[string, number]>(`INSERT INTO buckets (id, created_at_ms) VALUES (?, ?)`),
    deleteBucket: db.prepare<[string]>(`DELETE FROM buckets WHERE id = ?`),
    bucketRows: db.prepare<[string], { n: number }>(`SELECT count(*) AS n FROM streams WHERE bucket = ?`),
    bucketLive: db.prepare<[string, number], { n: number }>(
      `SELECT count(*) AS n FROM streams WHERE bucket = ? AND deleted = 0 AND (expiry_ms IS NULL OR expiry_ms > ?)`,
    ),
    // Names compare as UTF-8 bytes (BINARY collation), the order listings promise.
    listFrom: db.prepare<[string, string, string, number], { name: string }>(
      `SELECT name FROM streams WHERE bucket = ? AND name >= ? AND name > ? AND deleted = 0 AND (expiry_ms IS NULL OR expiry_ms > ?) ORDER BY name`,
    ),
    insertChunk: db.prepare<[number, number, Buffer, Buffer | null]>(`INSERT INTO chunks (stream_id, start, data, bounds) VALUES (?, ?, ?, ?)`),
    insertBatch: db.prepare<[number, Buffer, string | null]>(`INSERT INTO recent_batches (id, appends, producers) VALUES (?, ?, ?)`),
    batchProducerChanges: db.prepare<[], string>(`SELECT producers FROM recent_batches WHERE producers IS NOT NULL ORDER BY id`).pluck(),
    deleteRecentUpTo: db.prepare<[number]>(`DELETE FROM recent_batches WHERE id <= ?`),
    clearRecent: db.prepare(`DELETE FROM recent_batches`),
    // length() of a blob is read from the record header: the bytes themselves are not loaded.
    lastChunkEnd: db.prepare<[number], { end: number }>(
      `SELECT start + length(data) AS end FROM chunks WHERE stream_id = ? ORDER BY start DESC LIMIT 1`,
    ),
    chunkContaining: db.prepare<[number, number], StoredChunkRow>(
      `SELECT start, data, bounds FROM chunks WHERE stream_id = ? AND start <= ? ORDER BY start DESC LIMIT 1`,
    ),
    // Rows from the one holding `from` (a row may hold appends from before it), to `before`.
    chunkRowsFrom: db.prepare<{ stream: number; from: number; before: number }, StoredChunkRow>(
      `SELECT start, data, bounds FROM chunks WHERE stream_id = @stream AND start < @before
         AND start >= coalesce((SELECT max(start) FROM chunks WHERE stream_id = @stream AND start <= @from), @from)
       ORDER BY start`,
    ),
    // A record's columns in producerValues' order (held-producers.ts), read and written as lists.
    producer: db
      .prepare<[number, string], ProducerValues>(`SELECT ${PRODUCER_COLUMNS.join(', ')} FROM producers WHERE stream_id = ? AND producer_id = ?`)
      .raw(),
    upsertProducer: db.prepare<[number, ...ProducerValues]>(
      `INSERT OR REPLACE INTO producers (stream_id, ${PRODUCER_COLUMNS.join(', ')}) VALUES (?, ${PRODUCER_COLUMNS.map(() => '?').join(', ')})`,
    ),
    deleteProducer: db.prepare<[number, string]>(`DELETE FROM producers WHERE stream_id = ? AND producer_id = ?`),
    forgetProducers: db.prepare<[number, number], string>(`DELETE FROM producers WHERE stream_id = ? AND last_seen_ms <= ? RETURNING producer_id`).pluck(),
    liveProducerCount: db.prepare<[number, number, string], { n: number }>(
      `SELECT count(*) AS n FROM producers WHERE stream_id = ? AND last_seen_ms > ? AND producer_id <> ?`,
    ),
    expiredMaxEpoch: db.prepare<[number, number], { e: number | null }>(
      `SELECT max(epoch) AS e FROM producers WHERE stream_id = ? AND last_seen_ms <= ?`,
    ),
    // The order of compareEvictionOrder (core/producer.ts): BINARY collation compares UTF-8 bytes.
    leastRecentLive: db.prepare<[number, number, string], { producer_id: string; epoch: number; last_seen_ms: number }>(
      `SELECT producer_id, epoch, last_seen_ms FROM producers WHERE stream_id = ? AND last_seen_ms > ? AND producer_id <> ? ORDER BY last_seen_ms, producer_id LIMIT 1`,
    ),
  };
}

type Statements = ReturnType<typeof prepareStatements>;

export interface SqliteStoreOptions extends StoreOptions {
  /** Directory holding `rill.db`. */
  dataDir: string;
  /** Tuning of recent-append indexing; tests make it small to exercise every path. */
  recentIndexing?: RecentIndexing;
  /** Stream states kept in memory; DEFAULT_STREAM_CACHE_ENTRIES when not given. */
  streamCacheEntries?: number;
  /** The WAL flush; tests pass a stand-in to hold commits between COMMIT and durable. */
  fdatasync?: Fdatasync;
}

export class SqliteStore extends BatchedStore {
  /** Protected so that test subclasses can inject faults (e.g. PRAGMA max_page_count). */
  protected readonly db: Database.Database;
  private readonly sql: Statements;
  private nextStreamId: number;
  private persistedNextStreamId: number;
  private readonly txn: Txn;
  private readonly cache: StreamCache;
  private readonly producers = new ProducerCache(50_000);
  /** Producer record changes not yet written to `producers` (held-producers.ts). */
  private readonly heldProducers = new HeldProducers();
  private readonly recent = new RecentChunks();
  private readonly chunkInserter: ChunkInserter;
  /**
   * Appends of the open transaction not yet stored, for the row `batchId` of
   * `recent_batches`: the same objects recent.ts holds, so that storeBatchRow can point
   * their bytes into the packed row.
   */
  private batchAppends: Array<PackedAppend & RecentChunk> = [];
  private batchBytes = 0;
  /** The id of the row the next appends go to; it only grows. */
  private batchId = 1;
  private readonly recentIndexing: RecentIndexing;
  private readonly updates = new Map<string, Database.Statement>();
  private readonly runTransaction: (body: (txn: Txn) => void) => void;
  private readonly durability: WalDurability;
  /** The data directory's lock (dir-lock.ts), released last on close. */
  private readonly dirLock: Database.Database;

  constructor(options: SqliteStoreOptions) {
    super(options);
    this.recentIndexing = options.recentIndexing ?? DEFAULT_RECENT_INDEXING;
    this.cache = new StreamCache(options.streamCacheEntries ?? DEFAULT_STREAM_CACHE_ENTRIES);
    mkdirSync(options.dataDir, { recursive: true });
    this.dirLock = lockDataDir(options.dataDir);
    try {
      this.db = new Database(join(options.dataDir, 'rill.db'));
      // WAL lets readers work beside the writer. SQLite itself does not fsync at COMMIT
      // (NORMAL): the engine fsyncs the WAL file from the thread pool after each commit and
      // acknowledges a batch only once an fsync that began after its COMMIT has finished.
      // An acknowledged write therefore survives power loss exactly as with FULL, while
      // the event loop keeps serving (and committing the next batch) during the fsync.
      // NORMAL still syncs the WAL before every checkpoint and the database after it.
      this.db.pragma('journal_mode = WAL');
      this.db.pragma('synchronous = NORMAL');
      this.db.pragma('busy_timeout = 5000');
      // SQLite checkpoints inside the COMMIT that grows the WAL past this many pages, on the
      // event loop (page copy plus two fsyncs). At its default of 1,000 those were the
      // longest stalls under load (8-12 ms); at 250 they are a quarter as long and append
      // p99 at 500 streams fell from 9-10 to 7 ms at the same rate (100 was slower).
      this.db.pragma('wal_autocheckpoint = 250');
      migrate(this.db);
      this.sql = prepareStatements(this.db);
      this.nextStreamId = Number(this.sql.nextId.get()!.value);
      this.persistedNextStreamId = this.nextStreamId;
      this.txn = this.createTxn();
      this.chunkInserter = new ChunkInserter(this.db);
      // Appends and producer changes a crash left in `recent_batches` are applied before anything reads them.
      this.db.transaction(() => {
        const exists = this.streamExistence();
        recoverRecentBatches(this.db, this.chunkInserter, (id) => (exists(id) ? (this.sql.lastChunkEnd.get(id)?.end ?? 0) : undefined));
        this.replayProducerChanges(exists);
        this.sql.clearRecent.run();
      })();
      this.durability = new WalDurability(join(options.dataDir, 'rill.db-wal'), options.dataDir, options.fdatasync, () => this.commitHeld());
      this.runTransaction = this.db.transaction((body: (txn: Txn) => void) => {
        body(this.txn);
        this.storeBatchRow(this.heldProducers.txnChangesPacked());
        if (this.nextStreamId !== this.persistedNextStreamId) this.sql.setNextId.run(String(this.nextStreamId));
      });
    } catch (error) {
      // A store that failed to open (say, a newer schema) leaves the directory to the next.
      this.dirLock.close();
      throw error;
    }
  }

  protected transact(body: (txn: Txn) => void): void {
    this.cache.begin();
    this.recent.begin();
    this.heldProducers.begin();
    try {
      this.runTransaction(body);
    } catch (error) {
      this.cache.rollback();
      this.recent.rollback();
      this.heldProducers.rollback();
      this.producers.clear();
      this.dropBatchAppends();
      throw error;
    }
    this.recent.commit();
    this.heldProducers.commit();
    this.durability.committed(this.cache.commit());
    this.persistedNextStreamId = this.nextStreamId;
    // Each slice also covers as many rows as this commit added, so sealed rows drain faster
    // than appends arrive and memory stays bounded (about two seals and a batch).
    const added = this.recent.takeAddedCount();
    if (this.recent.sealedUpToId === null) {
      this.recent.sealIfFull(sealMarksFor(this.recentIndexing, this.recent.streamCount));
      // The producer changes held now are in rows up to the seal's: written before those go.
      if (this.recent.sealedUpToId !== null) this.heldProducers.seal();
    }
    if (this.recent.sealedUpToId !== null) this.alone(() => this.indexSealedStep(this.recentIndexing.stepRows + added));
  }

  /** Appends held in memory until indexed (see recent.ts). */
  get recentRows(): number {
    return this.recent.size;
  }

  /**
   * Indexes the next slice of sealed appends and writes as many sealed producer changes;
   * once all are, drops their rows from `recent_batches`.
   */
  protected indexSealedStep(maxRows: number): void {
    this.chunkInserter.insert(this.recent.takeSealed(maxRows));
    this.writeProducerChanges(this.heldProducers.takeSealed(maxRows));
    if (!this.recent.sealDone || !this.heldProducers.sealDone) return;
    this.sql.deleteRecentUpTo.run(this.recent.sealedUpToId!);
    this.recent.endSeal();
  }

  /**
   * Indexes every recent append (inside the caller's transaction), this transaction's own
   * included: they are indexed now, so its batch row is not stored.
   */
  private indexAllRecent(): void {
    this.chunkInserter.insert(this.recent.takeAll());
    this.writeProducerChanges(this.heldProducers.takeAll());
    this.sql.clearRecent.run();
    this.dropBatchAppends();
    // Their id is retired with them, as when a row is stored: a seal of everything up to
    // it must never cover appends added after it.
    this.batchId++;
  }

  /**
   * Stores the open transaction's appends not yet stored, and its producer changes when
   * given (at its end), as row `batchId`; the next go to a new id.
   */
  private storeBatchRow(producerChanges: string | null = null): void {
    if (this.batchAppends.length === 0 && producerChanges === null) return;
    const packed = packAppends(this.batchAppends);
    this.sql.insertBatch.run(this.batchId, packed, producerChanges);
    pointIntoPacked(this.batchAppends, packed);
    this.dropBatchAppends();
    this.batchId++;
  }

  private dropBatchAppends(): void {
    this.batchAppends = [];
    this.batchBytes = 0;
  }

  /**
   * Runs recent-append indexing in a transaction of its own, after a batch committed. It
   * changes no stream, so nothing waits for it: the next fsync covers it, and a crash
   * before that leaves the appends recent, to be indexed at the next start. When the
   * storage fails (say the disk is full) they stay recent and a later commit tries
   * again; any other error is a broken invariant, and the store stops.
   */
  private alone(work: () => void): void {
    this.recent.begin();
    this.heldProducers.begin();
    try {
      this.db.transaction(work)();
      this.recent.commit();
      this.heldProducers.commit();
    } catch (error) {
      this.recent.rollback();
      this.heldProducers.rollback();
      if (!isStorageFault(error)) this.failFatally(error);
    }
  }

  /**
   * A batch commits only when an fsync can start for it. Under load both fsyncs are
   * mostly in flight; commands arriving then used to commit each turn and wait anyway,
   * at about 1.2 commits per fsync. Held, they share one commit: fewer transactions
   * and WAL writes per append, and no later acknowledgement.
   */
  protected override mayCommit(): boolean {
    return this.durability.hasRoom();
  }

  protected override whenDurable(done: (error?: unknown) => void): void {
    this.durability.whenDurable(done);
  }

  /**
   * SQLite abandons the whole transaction on some errors (SQLITE_FULL, I/O errors). Such
   * an error, or a transaction found gone, is the storage failing: the batch is refused
   * whole instead of being rerun without one command.
   */
  protected override isStorageFault(error: unknown): boolean {
    return isStorageFault(error) || !this.db.inTransaction;
  }

  /** A stream from the cache, or from SQLite (then cached), as reads see it. */
  private cached(fromCache: StreamState | undefined, load: () => StreamRow | undefined): StreamState | undefined {
    let stream = fromCache;
    if (!stream) {
      const row = load();
      if (!row) return undefined;
      stream = this.streamFromRow(row);
      this.cache.remember(stream);
    }
    return this.withPendingTouch(stream);
  }

  private streamByName(name: string): StreamState | undefined {
    return this.cached(this.cache.getByName(name), () => this.sql.streamByName.get(name));
  }

  private streamById(id: number): StreamState | undefined {
    return this.cached(this.cache.getById(id), () => this.sql.streamById.get(id));
  }

  /**
   * Writes only the columns that changed since the cached state, compared column by
   * column without building whole rows; this runs once per append inside the batch.
   *
   * A plain append changes only `tail`, and the chunk it stores records that move, so
   * its row is not written at all (one UPDATE less per append): a row's tail may lag
   * behind its chunks, and streamFromRow reads the tail from both. A write of any other
   * column brings the tail up to date with it, so that a change that could take chunks
   * away (a trim) never leaves the row behind.
   */
  private updateStream(next: StreamState): void {
    const previous = this.cache.getById(next.id) ?? this.streamById(next.id);
    if (!previous) throw new Error(`invariant: updating stream ${next.id}, which is not stored`);
    const params: Record<string, unknown> = { id: next.id, tail: next.tail };
    const values = streamColumnValues(next);
    const before = streamColumnValues(previous);
    let changed = '';
    for (let i = 0; i < values.length; i++) {
      if (i === TAIL_COLUMN || values[i] === before[i]) continue;
      const column = STREAM_VALUE_COLUMNS[i]!;
      params[column] = values[i];
      changed = changed === '' ? column : `${changed},${column}`;
    }
    if (changed !== '') this.updateStatement(`${changed},tail`).run(params);
    this.cache.set(next);
  }

  /**
   * A stored row as a stream state. Its tail is the greater of the row's and the end of
   * the stream's last chunk (plain appends leave the row's behind, see updateStream);
   * every recent append lies after every indexed one, so a recent one ends last.
   */
  private streamFromRow(row: StreamRow): StreamState {
    const stream = rowToStream(row);
    const chunkEnd = this.recent.lastEnd(stream.id) ?? this.sql.lastChunkEnd.get(stream.id)?.end;
    if (chunkEnd === undefined || chunkEnd <= stream.tail) return stream;
    return { ...stream, tail: chunkEnd };
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

  private readonly chunkSource: ChunkSource = {
    streamById: (id) => this.streamById(id),
    chunkContaining: (streamId, position) => this.recent.containing(streamId, position) ?? this.indexedAppendAt(streamId, position),
    chunksFrom: (streamId, from, before) => this.chunksFrom(streamId, from, before),
  };

  /** Indexed chunks first, then recent ones: every recent append of a stream follows its indexed ones. */
  private *chunksFrom(streamId: number, from: number, before: number): Iterable<StoredChunk> {
    const firstRecent = this.recent.firstStart(streamId);
    // A tail read that starts among the recent appends needs no query.
    if (firstRecent === undefined || from < firstRecent) yield* this.indexedAppendsFrom(streamId, from, Math.min(before, firstRecent ?? before));
    yield* this.recent.from(streamId, from, before);
  }

  /** The indexed append with the greatest start at or before `position`. */
  private indexedAppendAt(streamId: number, position: number): StoredChunk | null {
    const row = this.sql.chunkContaining.get(streamId, position);
    return row ? appendAt(row, position) : null;
  }

  /** The indexed appends with `from <= start < before`, in order. */
  private *indexedAppendsFrom(streamId: number, from: number, before: number): Iterable<StoredChunk> {
    for (const row of this.sql.chunkRowsFrom.iterate({ stream: streamId, from, before })) {
      for (const append of appendsOfRow(row)) if (append.start >= from && append.start < before) yield append;
    }
  }

  private createTxn(): Txn {
    const sql = this.sql;
    return {
      getStream: (name) => this.streamByName(name),
      getStreamById: (id) => this.streamById(id),
      getBucket: (id) => {
        const row = sql.bucket.get(id);
        return row ? { id: row.id, createdAtMs: row.created_at_ms } : undefined;
      },
      countBucketRows: (bucket) => sql.bucketRows.get(bucket)!.n,
      expiredBucketStreams: (bucket, nowMs) => sql.bucketExpired.all(bucket, nowMs).map((row) => this.streamFromRow(row)),
      getProducer: (streamId, producerId) => {
        const held = this.heldProducers.get(streamId, producerId);
        if (held !== undefined) return held ?? undefined;
        const cached = this.producers.get(streamId, producerId);
        if (cached) return cached;
        const values = sql.producer.get(streamId, producerId);
        if (!values) return undefined;
        const record = producerFromValues(values);
        this.producers.remember(streamId, record);
        return record;
      },
      producerSummary: (streamId, cutoffMs, excludeId) => {
        // The queries below read the table: the stream's held changes go there first.
        this.writeProducerChanges(this.heldProducers.takeStream(streamId));
        const lru = sql.leastRecentLive.get(streamId, cutoffMs, excludeId);
        return {
          liveCount: sql.liveProducerCount.get(streamId, cutoffMs, excludeId)!.n,
          expiredMaxEpoch: sql.expiredMaxEpoch.get(streamId, cutoffMs)!.e,
          leastRecentLive: lru ? { id: lru.producer_id, epoch: lru.epoch, lastSeenMs: lru.last_seen_ms } : null,
        };
      },
      chunkAt: (stream, position) => chunkFromChain(this.chunkSource, stream, position),
      nextStreamId: () => this.nextStreamId++,
      expiredStreams: (nowMs, limit) => sql.expired.all(nowMs, limit).map((row) => this.streamFromRow(row)),
      putBucket: (bucket: BucketState) => void sql.insertBucket.run(bucket.id, bucket.createdAtMs),
      dropBucket: (id) => void sql.deleteBucket.run(id),
      insertStream: (stream) => {
        sql.insertStream.run(streamParams(stream));
        this.cache.set(stream);
      },
      updateStream: (stream) => this.updateStream(stream),
      dropStream: (stream) => {
        this.streamById(stream.id);
        this.cache.delete(stream);
        sql.deleteChunks.run(stream.id);
        // Its appends in recent_batches go with the next seal's range (or the next start skips them).
        this.recent.forget(stream.id);
        sql.deleteAllProducers.run(stream.id);
        this.producers.forgetStream(stream.id);
        this.heldProducers.dropStream(stream.id);
        sql.deleteSnapshot.run(stream.id);
        sql.deleteStream.run(stream.id);
      },
      putSnapshotBody: (streamId, body) => void sql.putSnapshot.run(streamId, body),
      trimBefore: (stream, position) => this.trimBefore(stream, position),
      descendantsEarliest: (streamId) => sql.descendantsEarliest.get(streamId)!.e,
      appendChunk: (streamId, start, data) => {
        // Large appends are not copied into one ever larger row: a row holds up to
        // MAX_BATCH_ROW_BYTES (or one larger append), and a batch may store several.
        if (this.batchBytes > 0 && this.batchBytes + data.length > MAX_BATCH_ROW_BYTES) this.storeBatchRow();
        const held = { streamId, id: this.batchId, start, data };
        this.batchAppends.push(held);
        this.batchBytes += data.length;
        this.recent.add(streamId, held);
      },
      putProducer: (streamId, record) => {
        this.producers.remember(streamId, record);
        this.heldProducers.put(streamId, record);
      },
      // Deletions are written at once (the producer summary's queries read the table) and
      // held too, so that their batch row logs them for replay.
      deleteProducers: (streamId, ids) => {
        this.producers.forget(streamId, ids);
        for (const id of ids) {
          sql.deleteProducer.run(streamId, id);
          this.heldProducers.delete(streamId, id);
        }
      },
      forgetProducers: (streamId, atOrBeforeMs) => {
        this.producers.forgetSeenAtOrBefore(streamId, atOrBeforeMs);
        this.writeProducerChanges(this.heldProducers.takeStream(streamId));
        for (const id of sql.forgetProducers.all(streamId, atOrBeforeMs)) this.heldProducers.delete(streamId, id);
      },
    };
  }

  /** Writes producer record changes to `producers`, in order. */
  private writeProducerChanges(changes: readonly HeldChange[]): void {
    for (const { streamId, producerId, change } of changes) {
      if (change === null) this.sql.deleteProducer.run(streamId, producerId);
      else this.sql.upsertProducer.run(streamId, ...producerValues(change));
    }
  }

  /**
   * After a crash: the producer changes of every remaining batch row, in row order, except
   * those of streams deleted since (stream ids are never reused). Inside the caller's
   * transaction, which then empties `recent_batches`.
   */
  private replayProducerChanges(streamExists: (id: number) => boolean): void {
    for (const packed of this.sql.batchProducerChanges.all()) {
      this.writeProducerChanges(unpackProducerChanges(packed).filter((c) => streamExists(c.streamId)));
    }
  }

  /** Whether a stream id is stored, each id asked of SQLite once (recovery asks per append). */
  private streamExistence(): (id: number) => boolean {
    const known = new Map<number, boolean>();
    return (id) => {
      let exists = known.get(id);
      if (exists === undefined) known.set(id, (exists = this.sql.streamById.get(id) !== undefined));
      return exists;
    };
  }

  /** Deletes whole appends before `position`; an append cut by it keeps only its tail part. */
  private trimBefore(stream: StreamState, position: number): void {
    // Trimming works on the index: what is recent is indexed first (retention is rare).
    this.indexAllRecent();
    this.sql.trimWhole.run(stream.id, position, position);
    const straddling = this.sql.chunkBefore.get(stream.id, position);
    if (!straddling || straddling.start + straddling.data.length <= position) return;
    const kept = rowFrom(straddling, position);
    this.sql.deleteChunk.run(straddling.id);
    this.sql.insertChunk.run(stream.id, kept.start, kept.data, kept.bounds);
  }

  async readChunks(stream: StreamState, from: number, maxBytes: number): Promise<Array<{ start: number; data: Buffer }>> {
    return chunksFromChain(this.chunkSource, stream, from, maxBytes);
  }

  async snapshotBody(stream: StreamState): Promise<Buffer | null> {
    return this.sql.snapshotBody.get(stream.id)?.data ?? null;
  }

  /**
   * Readers see durable state only: a stream changed by a commit still being fsynced reads
   * as before it, unless that commit removed bytes the earlier state names; then the read
   * waits for it (about one fsync).
   */
  async getStream(name: string): Promise<StreamState | undefined> {
    let waits = 0;
    for (let removal = this.durability.pendingRemoval(name); removal !== undefined; removal = this.durability.pendingRemoval(name)) {
      if (waits++ === MAX_REMOVAL_WAITS) throw new ReadNotSettledError(name, MAX_REMOVAL_WAITS);
      await this.durableThrough(removal);
    }
    const durable = this.durability.durableState(name);
    if (durable === undefined) return this.streamByName(name);
    return durable === null ? undefined : this.withPendingTouch(durable);
  }

  async readRange(stream: StreamState, from: number, maxBytes: number): Promise<Buffer> {
    return readFromChain(this.chunkSource, stream, from, maxBytes);
  }

  async chunkAt(stream: StreamState, position: number): Promise<{ start: number; data: Buffer } | null> {
    return chunkFromChain(this.chunkSource, stream, position);
  }

  /** Resolves once commit `seq` is durable. */
  private durableThrough(seq: number): Promise<void> {
    return new Promise((resolve, reject) =>
      this.durability.whenDurable((error) => (error === undefined ? resolve() : reject(new StorageUnavailableError(error))), seq),
    );
  }

  /**
   * Bucket reads query SQLite, which holds commits not yet durable: each answer waits until
   * every commit its query could see is durable, so a crash cannot undo what it reported.
   */
  async getBucket(id: string): Promise<BucketInfo | undefined> {
    const seen = this.durability.lastCommit();
    const row = this.sql.bucket.get(id);
    const info = row ? { id: row.id, createdAtMs: row.created_at_ms, streamCount: this.sql.bucketLive.get(id, this.now())!.n } : undefined;
    return this.answerWhenDurable(seen, info);
  }

  async listStreams(bucket: string, prefix: string, after: string | null, limit: number): Promise<StreamListing> {
    const seen = this.durability.lastCommit();
    const keyPrefix = `b/${bucket}/`;
    const names: string[] = [];
    // Names with the prefix are one contiguous run from `keyPrefix + prefix` on.
    for (const row of this.sql.listFrom.iterate(bucket, keyPrefix + prefix, keyPrefix + (after ?? ''), this.now())) {
      const id = row.name.slice(keyPrefix.length);
      if (!id.startsWith(prefix)) break;
      if (names.length === limit) return this.answerWhenDurable(seen, { names, nextAfter: names[names.length - 1]! });
      names.push(id);
    }
    return this.answerWhenDurable(seen, { names, nextAfter: null });
  }

  private async answerWhenDurable<T>(seq: number, answer: T): Promise<T> {
    await this.durableThrough(seq);
    return answer;
  }

  protected closeEngine(): void {
    // A clean stop leaves everything indexed; if this fails, the next start does it.
    if (this.recent.size > 0 || this.heldProducers.size > 0) this.alone(() => this.indexAllRecent());
    this.durability.close();
    this.db.close();
    this.dirLock.close();
  }
}
