/**
 * The embedded default engine: SQLite through better-sqlite3, WAL journal. Each batch is
 * one transaction, acknowledged once an fsync of the WAL covers it (durability.ts); a
 * command that breaks an invariant is dropped and the batch rerun without it.
 *
 * This file opens the store, runs each batch's transaction and what follows its commit,
 * and answers reads. The batch's view of the database is its Txn (txn.ts); appends and
 * producer changes are held and indexed later (held-writes.ts); docs/architecture.md
 * walks through all of it.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { LinkView, SubscriptionState } from '../../core/subscription-types.js';
import type { StreamState } from '../../core/types.js';
import { BatchedStore } from '../batched.js';
import { ReadNotSettledError, StorageUnavailableError } from '../errors.js';
import { chunkFromChain, chunksFromChain, readFromChain, type ChunkSource, type StoredChunk } from '../chain.js';
import { DiskSpace } from '../disk-space.js';
import { windowEnd } from '../../core/window.js';
import { LargeAppendCache } from '../large-appends.js';
import type { Txn } from '../executor.js';
import { bucketSettingsFromStored, withSettings, type BucketSettings } from '../../core/bucket-settings.js';
import type { BucketInfo, BucketListing, HeldTotals, ProducerListing, StoreOptions, StoreTotals, StreamCacheCounters, StreamListing } from '../store.js';
import { producerFromValues } from '../producer-columns.js';
import { countMessagesIn, messagesHeld } from '../../core/records.js';
import { legacyRecords, withoutRecords } from '../records-backfill.js';
import type { StreamRow } from '../stream-columns.js';
import { StreamCache } from './cache.js';
import { SqliteColdRows } from './cold-rows.js';
import { IndexedReads } from './indexed-reads.js';
import { lockDataDir } from './dir-lock.js';
import { DEFAULT_STREAM_CACHE_BYTES, DEFAULT_STREAM_CACHE_ENTRIES } from './defaults.js';

import { filesystemFreeBytes, reserveBytesFor, SpaceReserve } from '../space-reserve.js';
import { COMMIT_OVERHEAD_BYTES, WalCheckpointer } from './checkpoints.js';
import { WalDurability, type Fdatasync } from './durability.js';
import { DEFAULT_RECENT_INDEXING, HeldWrites, type RecentIndexing } from './held-writes.js';
import { ProducerCache } from './producer-cache.js';
import { makeDatabasePrivate } from './private-files.js';
import { migrate } from './schema.js';
import { prepareStatements, type Statements } from './statements.js';
import { StreamRows } from './stream-rows.js';
import { SqliteSubscriptions } from './subscriptions.js';
import { SqliteTxn } from './txn.js';

export type { RecentIndexing } from './held-writes.js';

/** The cold tier's history as the engine's synchronous reads see it (SqliteStore.setColdChunks). */
export interface SyncColdChunks {
  /** Where the stream's cold history ends (0: none). */
  end(streamId: number): number;
  /** The cold append with the greatest start at or before `position`, or null. */
  containing(streamId: number, position: number): StoredChunk | null;
  /** The cold appends with `from <= start < before`, in order. */
  from(streamId: number, from: number, before: number): StoredChunk[];
}


/**
 * Stream states kept in memory. 100,000 cached states held about 120 MB; 20,000 keep the
 * 100,000-stream figure near 180 MB, and cost writes spread over more streams than that
 * ~8% (one row read each).
 */

/**
 * A read waits for each pending commit that removed bytes of its stream (about one fsync
 * each); a client that drops and recreates one name without pause could otherwise hold
 * that stream's readers forever. Past this many waits the read is refused with 503.
 */
export const MAX_REMOVAL_WAITS = 100;
/** Streams `heldTotals` sums between two turns of the event loop (about 10 ms of work). */
const HELD_PAGE = 5000;

/** SQLite result codes that mean the storage failed, not that a statement broke a rule. */
const STORAGE_FAULT_CODES = ['SQLITE_FULL', 'SQLITE_IOERR', 'SQLITE_NOMEM', 'SQLITE_BUSY', 'SQLITE_LOCKED', 'SQLITE_READONLY', 'SQLITE_CORRUPT', 'SQLITE_CANTOPEN', 'SQLITE_NOTADB', 'SQLITE_PROTOCOL', 'SQLITE_NOLFS'];

function isStorageFault(error: unknown): boolean {
  if (!(error instanceof Database.SqliteError)) return false;
  return STORAGE_FAULT_CODES.some((code) => error.code === code || error.code.startsWith(`${code}_`));
}

export interface SqliteStoreOptions extends StoreOptions {
  /** Directory holding `rill.db`. */
  dataDir: string;
  /** Tuning of recent-append indexing; tests make it small to exercise every path. */
  recentIndexing?: RecentIndexing;
  /** Stream states kept in memory; DEFAULT_STREAM_CACHE_ENTRIES when not given. */
  streamCacheEntries?: number;
  /** The memory, estimated, that cached stream states may take; DEFAULT_STREAM_CACHE_BYTES when not given. */
  streamCacheBytes?: number;
  /** The WAL flush; tests pass a stand-in to hold commits between COMMIT and durable. */
  fdatasync?: Fdatasync;
  /**
   * Below this much free space on the data directory's filesystem, writes that add data
   * are refused with 507 while deletes and retention go on (disk-space.ts); 0 turns it off.
   */
  minFreeDiskBytes?: number;
  /** Told when writes start being refused for want of disk space, and when they are accepted again. */
  onDiskSpace?: (full: boolean, freeBytes: number) => void;
  /**
   * Where WAL checkpoints run: inside the COMMITs that grow the WAL (the default), or on a
   * thread of their own (checkpoints.ts), as a server runs them so that no request waits
   * for one.
   */
  checkpoints?: 'inline' | 'thread';
}

/**
 * A commit that stored at least this much leaves its indexing (a copy as large) to the
 * next turn of the event loop, so that requests waiting since it began are answered between
 * the two instead of after both.
 */
const LARGE_COMMIT_BYTES = 1024 * 1024;

/**
 * With checkpoints on their own thread, the COMMIT that grows the WAL past this many pages
 * (64 MiB of 4 KiB pages) still checkpoints inline: a backstop should the thread fall behind.
 */
const BACKSTOP_CHECKPOINT_PAGES = 16_384;

export class SqliteStore extends BatchedStore {
  /** Protected so that test subclasses can inject faults (e.g. PRAGMA max_page_count). */
  protected readonly db: Database.Database;
  private readonly sql: Statements;
  private readonly cache: StreamCache;
  private readonly streams: StreamRows;
  private readonly producers = new ProducerCache(50_000);
  private readonly largeAppends = new LargeAppendCache();
  private readonly indexed: IndexedReads;
  /** Appends and producer changes not yet in `chunks` and `producers`. */
  private readonly heldWrites: HeldWrites;
  private readonly txn: SqliteTxn;
  private readonly subscriptions: SqliteSubscriptions;
  private readonly runTransaction: (body: (txn: Txn) => void) => void;
  private readonly durability: WalDurability;
  /** The data directory's lock (dir-lock.ts), released last on close. */
  private readonly dirLock: Database.Database;
  private readonly reserve: SpaceReserve | null;
  private readonly checkpointer: WalCheckpointer | null = null;

  constructor(options: SqliteStoreOptions) {
    super(options);
    this.cache = new StreamCache(options.streamCacheEntries ?? DEFAULT_STREAM_CACHE_ENTRIES, options.streamCacheBytes ?? DEFAULT_STREAM_CACHE_BYTES);
    mkdirSync(options.dataDir, { recursive: true });
    // Before anything writes: on a disk filled to the last byte, the reserve is the room to open in.
    const minFreeBytes = options.minFreeDiskBytes ?? 0;
    this.reserve = minFreeBytes > 0 ? new SpaceReserve(options.dataDir, reserveBytesFor(minFreeBytes)) : null;
    this.reserve?.adjust(filesystemFreeBytes(options.dataDir));
    this.dirLock = lockDataDir(options.dataDir);
    try {
      makeDatabasePrivate(join(options.dataDir, 'rill.db'));
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
      // p99 at 500 streams fell from 9-10 to 7 ms at the same rate (100 was slower). With
      // checkpoints on their own thread, as servers run them, it is only a backstop.
      this.db.pragma(`wal_autocheckpoint = ${options.checkpoints === 'thread' ? BACKSTOP_CHECKPOINT_PAGES : 250}`);
      migrate(this.db);
      this.sql = prepareStatements(this.db);
      this.indexed = new IndexedReads(this.sql, this.largeAppends);
      this.heldWrites = new HeldWrites(this.db, this.sql, options.recentIndexing ?? DEFAULT_RECENT_INDEXING);
      this.streams = new StreamRows(this.db, this.sql, this.cache, this.heldWrites.recent, (stream) => this.withPendingTouch(stream), (stream, from, to) =>
        countMessagesIn(stream, chunksFromChain(this.chunkSource, stream, from, to - from)),
      );
      this.subscriptions = new SqliteSubscriptions(this.db, this.streams);
      this.txn = new SqliteTxn(this.sql, this.streams, this.heldWrites, this.producers, this.chunkSource, this.subscriptions, this.largeAppends);
      // Appends and producer changes a crash left in `recent_batches` are applied before anything reads them.
      this.heldWrites.recover();
      this.backfillRecords();
      this.durability = new WalDurability(join(options.dataDir, 'rill.db-wal'), options.dataDir, options.fdatasync, () => this.commitHeld());
      const transaction = this.db.transaction((body: (txn: Txn) => void) => {
        body(this.txn);
        this.txn.finish();
      });
      this.runTransaction = (body) => {
        try {
          transaction(body);
        } catch (error) {
          this.subscriptions.forgetCached();
          throw error;
        }
      };
      this.diskSpace = this.watchDiskSpace(options);
      if (options.checkpoints === 'thread') this.checkpointer = new WalCheckpointer(join(options.dataDir, 'rill.db'));
    } catch (error) {
      // A store that failed to open (say, a newer schema) leaves the directory to the next.
      this.dirLock.close();
      throw error;
    }
  }

  private watchDiskSpace(options: SqliteStoreOptions): DiskSpace | null {
    const minFreeBytes = options.minFreeDiskBytes ?? 0;
    if (minFreeBytes === 0) return null;
    const freePages = this.db.prepare('PRAGMA freelist_count').pluck();
    const pageSize = this.db.pragma('page_size', { simple: true }) as number;
    return new DiskSpace({
      path: options.dataDir,
      minFreeBytes,
      freeInStoreBytes: () => (freePages.get() as number) * pageSize,
      reserve: this.reserve,
      onChange: options.onDiskSpace,
    });
  }

  protected override isOutOfSpace(error: unknown): boolean {
    return error instanceof Database.SqliteError && error.code === 'SQLITE_FULL';
  }

  /** One batch's transaction: the executor's steps, its batch row, COMMIT; then a slice of indexing when one is due. */
  protected transact(body: (txn: Txn) => void): void {
    this.cache.begin();
    this.heldWrites.begin();
    this.largeAppends.begin();
    this.txn.trimmedIds.clear();
    try {
      this.runTransaction(body);
    } catch (error) {
      this.cache.rollback();
      this.heldWrites.rollback();
      this.largeAppends.rollback();
      this.producers.clear();
      throw error;
    }
    this.heldWrites.commit();
    this.largeAppends.commit();
    this.durability.committed(this.cache.commit(), this.txn.trimmedIds);
    this.txn.committed();
    const storedBytes = this.heldWrites.transactionBytes;
    this.checkpointer?.committed(storedBytes + COMMIT_OVERHEAD_BYTES);
    const sliceRows = this.heldWrites.sealIfDue();
    if (sliceRows === null) return;
    if (storedBytes < LARGE_COMMIT_BYTES) return this.inOwnTransaction(() => this.indexSealedSlice(sliceRows));
    setImmediate(() => {
      // Closing indexes everything itself; a slice begun since may have ended the seal.
      if (!this.closed && this.heldWrites.recent.sealedUpToId !== null) this.inOwnTransaction(() => this.indexSealedSlice(sliceRows));
    });
  }

  /** Appends held in memory until indexed (see recent.ts). */
  get recentRows(): number {
    return this.heldWrites.recent.size;
  }

  /** One slice of the seal (held-writes.ts); protected so that tests can make it fail. */
  protected indexSealedSlice(maxRows: number): void {
    this.heldWrites.indexSealedSlice(maxRows);
  }

  /**
   * Runs recent-append indexing in a transaction of its own, after a batch committed. It
   * changes no stream, so nothing waits for it: the next fsync covers it, and a crash
   * before that leaves the appends recent, to be indexed at the next start. When the
   * storage fails (say the disk is full) they stay recent and a later commit tries
   * again; any other error is a broken invariant, and the store stops.
   */
  private inOwnTransaction(work: () => void): void {
    this.heldWrites.begin();
    try {
      this.db.transaction(work)();
      this.heldWrites.commit();
      this.checkpointer?.committed(this.heldWrites.transactionBytes + COMMIT_OVERHEAD_BYTES);
    } catch (error) {
      this.heldWrites.rollback();
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

  /**
   * Gives streams stored before record coordinates their ordinals (records-backfill.ts),
   * sources before their forks (a fork's id is the greater), in one transaction; their
   * rows' tails are brought up to date with them, as fromRow counts from the row's tail.
   */
  private backfillRecords(): void {
    const legacy = this.db.prepare<[], StreamRow>('SELECT * FROM streams WHERE record_next IS NULL ORDER BY id').all();
    if (legacy.length === 0) return;
    const update = this.db.prepare<[number, number, number, number]>('UPDATE streams SET tail = ?, record_first = ?, record_next = ? WHERE id = ?');
    this.db.transaction(() => {
      for (const row of legacy) {
        const stream = this.streams.fromRow(withoutRecords(row));
        const records = legacyRecords(stream, chunksFromChain(this.chunkSource, stream, stream.earliestOffset, stream.tail - stream.earliestOffset));
        update.run(stream.tail, records.first, records.next, row.id);
      }
    })();
  }

  // ---- reads -------------------------------------------------------------------------

  /**
   * A stream's appends: the ones a cold tier holds (below its boundary), then the indexed
   * ones from `chunks`, then the recent ones from memory.
   */
  private readonly chunkSource: ChunkSource = {
    streamById: (id) => this.streams.byId(id),
    chunkContaining: (streamId, position) =>
      this.heldWrites.recent.containing(streamId, position) ?? this.indexed.appendAt(streamId, position) ?? this.coldChunks?.containing(streamId, position) ?? null,
    chunksFrom: (streamId, from, before) => this.chunksFrom(streamId, from, before),
  };

  /**
   * History a cold tier moved out of `chunks` (storage/cold/), read synchronously from the
   * segments it holds in memory: the transactions' reads (a fork's anchor, a record
   * ordinal, a retention walk) go through here. A segment not in memory throws, the
   * command fails, and the tier fetches the segment and runs the command again.
   */
  private coldChunks: SyncColdChunks | null = null;

  setColdChunks(source: SyncColdChunks): void {
    this.coldChunks = source;
  }

  /** Without a cold tier, or above its boundary, the hot appends alone: no generator wraps them. */
  private chunksFrom(streamId: number, from: number, before: number): Iterable<StoredChunk> {
    const coldEnd = this.coldChunks === null ? 0 : this.coldChunks.end(streamId);
    if (from < coldEnd) return this.coldThenHot(this.coldChunks!, streamId, from, before, coldEnd);
    return from < before ? this.hotChunksFrom(streamId, from, before) : [];
  }

  private *coldThenHot(cold: SyncColdChunks, streamId: number, from: number, before: number, coldEnd: number): Iterable<StoredChunk> {
    yield* cold.from(streamId, from, Math.min(before, coldEnd));
    if (coldEnd < before) yield* this.hotChunksFrom(streamId, coldEnd, before);
  }

  /** Indexed chunks first, then recent ones: every recent append of a stream follows its indexed ones. */
  private *hotChunksFrom(streamId: number, from: number, before: number): Iterable<StoredChunk> {
    const firstRecent = this.heldWrites.recent.firstStart(streamId);
    // A tail read that starts among the recent appends needs no query.
    if (firstRecent === undefined || from < firstRecent) yield* this.indexed.appendsFrom(streamId, from, Math.min(before, firstRecent ?? before));
    yield* this.heldWrites.recent.from(streamId, from, before);
  }

  private coldRowsOnce: SqliteColdRows | null = null;

  /** The cold tier's view of this store's rows (storage/cold/host.ts), made when a cold tier asks. */
  coldRows(): SqliteColdRows {
    this.coldRowsOnce ??= new SqliteColdRows(this.db, {
      streamById: (id) => this.streams.byId(id),
      // No fork link followed: the cold tier walks the chain itself, level by level.
      ownChunks: (stream, from, maxBytes) => chunksFromChain(this.chunkSource, { ...stream, fork: null }, from, maxBytes),
      ownChunkAt: (stream, position) => chunkFromChain(this.chunkSource, { ...stream, fork: null }, position),
      // Only indexed rows move: a pass of the uploader indexes what is held first, as a trim does.
      indexHeld: () => {
        if (!this.heldWrites.isEmpty) this.inOwnTransaction(() => this.heldWrites.indexAll());
      },
    });
    return this.coldRowsOnce;
  }

  async readChunks(stream: StreamState, from: number, maxBytes: number): Promise<Array<{ start: number; data: Buffer }>> {
    return this.indexed.readingTo(windowEnd(stream.tail, from, maxBytes), () => chunksFromChain(this.chunkSource, stream, from, maxBytes));
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
    if (durable === undefined) return this.streams.byName(name);
    return durable === null ? undefined : this.withPendingTouch(durable);
  }

  async readRange(stream: StreamState, from: number, maxBytes: number): Promise<Buffer> {
    return this.indexed.readingTo(windowEnd(stream.tail, from, maxBytes), () => readFromChain(this.chunkSource, stream, from, maxBytes));
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
  async bucketSettings(id: string): Promise<BucketSettings | undefined> {
    const seen = this.durability.lastCommit();
    return this.answerWhenDurable(seen, bucketSettingsFromStored(this.sql.bucket.get(id)?.settings));
  }

  async getBucket(id: string): Promise<BucketInfo | undefined> {
    const seen = this.durability.lastCommit();
    const row = this.sql.bucket.get(id);
    const info = row ? withSettings({ id: row.id, createdAtMs: row.created_at_ms, streamCount: this.sql.bucketLive.get(id, this.now())!.n }, row.settings) : undefined;
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

  async listBuckets(after: string | null, limit: number): Promise<BucketListing> {
    const seen = this.durability.lastCommit();
    const now = this.now();
    const rows = this.sql.bucketsAfter.all(after ?? '', limit + 1);
    const buckets = rows.slice(0, limit).map((row) => ({ id: row.id, createdAtMs: row.created_at_ms, streamCount: this.sql.bucketLive.get(row.id, now)!.n }));
    return this.answerWhenDurable(seen, { buckets, nextAfter: rows.length > limit ? buckets[buckets.length - 1]!.id : null });
  }

  /** Held producer changes are written to their table first (as a query over one stream's records does), so that the count holds them. */
  async totals(): Promise<StoreTotals> {
    this.inOwnTransaction(() => this.heldWrites.writeAllProducers());
    const seen = this.durability.lastCommit();
    const row = this.db
      .prepare<[], StoreTotals>(
        `SELECT (SELECT count(*) FROM buckets) AS buckets, (SELECT count(*) FROM streams WHERE deleted = 0) AS streams, (SELECT count(*) FROM producers) AS producers`,
      )
      .get()!;
    return this.answerWhenDurable(seen, row);
  }

  /**
   * A row's tail may lag its chunks (stream-rows.ts), so each stream costs an indexed
   * look-up of its last chunk: about 2 µs. Pages of HELD_PAGE streams, with the event loop
   * let go between them, keep 100,000 streams from stalling requests; the sum is of each
   * stream as its page read it. Messages are N - F (core/records.ts, messagesHeld): the
   * row's when its tail is current, else the stream's as loaded, whose record tail counts
   * the less than RECORD_ROW_LAG_BYTES appended since the row was written (fromRow).
   */
  async heldTotals(): Promise<HeldTotals> {
    let bytes = 0;
    let messages = 0;
    for (let afterId = 0; ; ) {
      const seen = this.durability.lastCommit();
      const rows = this.sql.heldPage.all(afterId, HELD_PAGE);
      for (const row of rows) {
        const tail = this.streams.tailOf(row.id, row.tail, () => row.indexed_end ?? undefined);
        bytes += tail - row.earliest_offset;
        messages += tail === row.tail ? row.record_next - row.record_first : messagesHeld(this.streams.byId(row.id)!);
      }
      await this.answerWhenDurable(seen, null);
      if (rows.length < HELD_PAGE) return { bytes, messages };
      afterId = rows[rows.length - 1]!.id;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /** Paged like heldTotals; ownStart (core/stream.ts) is the row's `own_start`. */
  async bucketHeldBytes(bucket: string): Promise<number> {
    let bytes = 0;
    for (let afterName = ''; ; ) {
      const seen = this.durability.lastCommit();
      const rows = this.sql.bucketHeldPage.all(bucket, afterName, HELD_PAGE);
      for (const row of rows) bytes += this.streams.tailOf(row.id, row.tail, () => row.indexed_end ?? undefined) - row.own_start;
      await this.answerWhenDurable(seen, null);
      if (rows.length < HELD_PAGE) return bytes;
      afterName = rows[rows.length - 1]!.name;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  async countProducers(stream: StreamState): Promise<number> {
    this.inOwnTransaction(() => this.heldWrites.writeStreamProducers(stream.id));
    const seen = this.durability.lastCommit();
    const row = this.sql.producerCount.get(stream.id)!;
    return this.answerWhenDurable(seen, row.n);
  }

  /** Held changes are written first, as countProducers does, so the table holds every record. */
  async listProducers(stream: StreamState, after: string | null, limit: number): Promise<ProducerListing> {
    this.inOwnTransaction(() => this.heldWrites.writeStreamProducers(stream.id));
    const seen = this.durability.lastCommit();
    const rows = this.sql.producersAfter.all(stream.id, after ?? '', limit + 1);
    const producers = rows.slice(0, limit).map(producerFromValues);
    return this.answerWhenDurable(seen, { producers, nextAfter: rows.length > limit ? producers[producers.length - 1]!.id : null });
  }

  // ---- subscriptions: answered once every commit they could see is durable ------------

  getSubscription(key: string): Promise<SubscriptionState | undefined> {
    return this.durableAnswer(() => this.subscriptions.getSubscription(key));
  }

  listSubscriptions(scope: string | null, afterKey: string | null, limit: number): Promise<SubscriptionState[]> {
    return this.durableAnswer(() => this.subscriptions.listSubscriptions(scope, afterKey, limit));
  }

  subscriptionLinks(subKey: string, afterPath: string | null, limit: number): Promise<LinkView[]> {
    return this.durableAnswer(() => this.subscriptions.links(subKey, afterPath, limit));
  }

  linkIndex(after: { stream: string; subKey: string } | null, limit: number): Promise<Array<{ stream: string; subKey: string }>> {
    return this.durableAnswer(() => this.subscriptions.linkIndex(after, limit));
  }

  dueSubscriptions(nowMs: number, limit: number): Promise<string[]> {
    return this.durableAnswer(() => this.subscriptions.dueSubscriptions(nowMs, limit));
  }

  getMeta(key: string): Promise<string | undefined> {
    return this.durableAnswer(() => this.subscriptions.getMeta(key));
  }

  /** Its own transaction, counted as a commit so that the answer waits for an fsync that covers it. */
  compareAndSetMeta(key: string, expected: string | undefined, value: string): Promise<boolean> {
    if (this.closed) return Promise.reject(new StorageUnavailableError(new Error('store is closed')));
    const stored = this.subscriptions.compareAndSetMeta(key, expected, value);
    if (stored) this.durability.committed(new Map(), new Set());
    return this.answerWhenDurable(this.durability.lastCommit(), stored);
  }

  private durableAnswer<T>(read: () => T): Promise<T> {
    const seen = this.durability.lastCommit();
    return this.answerWhenDurable(seen, read());
  }

  cacheCounters(): StreamCacheCounters {
    const { entries, bytes } = this.cache.size;
    return { hits: this.cache.hits, misses: this.cache.misses, entries, bytes, largeAppendHits: this.largeAppends.hits, largeAppendBytes: this.largeAppends.size };
  }

  private async answerWhenDurable<T>(seq: number, answer: T): Promise<T> {
    await this.durableThrough(seq);
    return answer;
  }

  protected async closeEngine(): Promise<void> {
    // A clean stop leaves everything indexed; if this fails, the next start does it.
    if (!this.heldWrites.isEmpty) this.inOwnTransaction(() => this.heldWrites.indexAll());
    // Its connection closes first, so that this one, the last, checkpoints and removes the WAL.
    await this.checkpointer?.close();
    this.durability.close();
    this.db.close();
    this.dirLock.close();
  }
}
