/**
 * The SQLite engine's write path between a commit and the indexed tables. A commit
 * stores its appends and its producer record changes as one row of `recent_batches`
 * (recent-batches.ts, held-producers.ts) and keeps them in memory (recent.ts); once
 * enough have gathered they are sealed, and after each later commit a slice of what is
 * sealed is written to `chunks` and `producers`; when all of it is, the seal's rows leave
 * `recent_batches` as one range of ids. After a crash the remaining rows are replayed.
 *
 * Why each step is safe under `kill -9` is in docs/architecture.md ("The SQLite write
 * path"), each invariant with the test that checks it.
 */
import type Database from 'better-sqlite3';
import { producerRow } from '../producer-columns.js';
import { HeldProducers, unpackProducerChanges, type HeldChange } from './held-producers.js';
import { ChunkInserter, packAppends, pointIntoPacked, recoverRecentBatches, type PackedAppend } from './recent-batches.js';
import { RecentChunks, type RecentChunk, type SealMarks } from './recent.js';
import type { Statements } from './statements.js';

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
  /**
   * Appends of this many bytes or more skip being held: they are indexed by the
   * transaction that makes them (see addAppend). DIRECT_APPEND_BYTES when not given.
   */
  directBytes?: number;
}

/**
 * Holding an append saves a statement and an index page per append, which matters for
 * small ones only. A large one held was copied three times on the event loop (packed into
 * its batch row, inserted there, inserted again into `chunks`, then its row deleted, page
 * by page): a 32 MiB append held requests about 0.3 s in each of two turns.
 */
export const DIRECT_APPEND_BYTES = 1024 * 1024;

// A seal writes up to one index page per stream it holds, so the rows mark grows with the
// streams held, 16 appends each: at a fixed 8,192, 10,000 streams got a page per append
// once the index outgrew them (6 KB written per 100-byte append after 3.5 minutes); at
// 65,536 it stayed at 1.7-2.0 KB. Fixed at 65,536, 500 streams cost 8% more CPU per
// append (a larger set held) for nothing; 8,192 is the floor. 8 MiB lets 65,536 appends
// of 100 bytes gather. The mark for large appends keeps them from waiting in memory,
// where they save little: with 8 MiB, 128 appends of 1 MiB grew the server by 91-104
// MiB, with 1 MiB by 66-72 MiB (limits.test.ts allows 100).
export const DEFAULT_RECENT_INDEXING: RecentIndexing = {
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

export class HeldWrites {
  /** Appends not yet in `chunks`, sealed or not. */
  readonly recent = new RecentChunks();
  /** Producer record changes not yet written to `producers` (held-producers.ts). */
  readonly producers = new HeldProducers();
  private readonly inserter: ChunkInserter;
  /**
   * Appends of the open transaction not yet stored, for the row `batchId` of
   * `recent_batches`: the same objects recent.ts holds, so that storeBatchRow can point
   * their bytes into the packed row.
   */
  private batchAppends: Array<PackedAppend & RecentChunk> = [];
  private batchBytes = 0;
  /** The id of the row the next appends go to; it only grows. */
  private batchId = 1;
  /** Bytes of appends the open (or just committed) transaction stored: new ones, or held ones indexed. */
  private txnBytes = 0;

  constructor(
    private readonly db: Database.Database,
    private readonly sql: Statements,
    private readonly indexing: RecentIndexing,
  ) {
    this.inserter = new ChunkInserter(db);
  }

  /** Whether nothing is held: every append is indexed and every producer change written. */
  get isEmpty(): boolean {
    return this.recent.size === 0 && this.producers.size === 0;
  }

  /**
   * At the start: applies the appends and producer changes a crash left in
   * `recent_batches`, before anything reads them, and empties the table; in one
   * transaction, so a crash during recovery leaves the rows to the next start.
   */
  recover(): void {
    this.db.transaction(() => {
      const exists = streamExistence(this.sql);
      const rows = recoverRecentBatches(this.db, this.inserter, (id) => (exists(id) ? (this.sql.lastChunkEnd.get(id)?.end ?? 0) : undefined));
      if (rows === 0) return;
      this.replayProducerChanges(exists);
      // Only when there was something: emptying an empty table still writes its page, and
      // a clean start would then leave a WAL frame for the next close to checkpoint.
      this.sql.clearRecent.run();
    })();
  }

  /** An append of the open transaction: held in memory, and stored with its batch row; or, when large, indexed now. */
  addAppend(streamId: number, start: number, data: Buffer): void {
    if (data.length >= (this.indexing.directBytes ?? DIRECT_APPEND_BYTES)) return this.indexNow(streamId, start, data);
    // Large appends are not copied into one ever larger row: a row holds up to
    // MAX_BATCH_ROW_BYTES (or one larger append), and a batch may store several.
    if (this.batchBytes > 0 && this.batchBytes + data.length > MAX_BATCH_ROW_BYTES) this.storeBatchRow();
    const held = { streamId, id: this.batchId, start, data };
    this.batchAppends.push(held);
    this.batchBytes += data.length;
    this.txnBytes += data.length;
    this.recent.add(streamId, held);
  }

  /** The end of the open transaction: its appends not yet stored, and its producer changes, go to a batch row. */
  endTransaction(): void {
    this.storeBatchRow(this.producers.txnChangesPacked());
  }

  /**
   * After a commit: seals what is held once a mark is reached (and nothing sealed is
   * left). Answers how many rows the next slice takes, or null when nothing is sealed.
   * Each slice also covers as many rows as this commit added, so sealed rows drain faster
   * than appends arrive and memory stays bounded (about two seals and a batch).
   */
  sealIfDue(): number | null {
    const added = this.recent.takeAddedCount();
    if (this.recent.sealedUpToId === null) {
      this.recent.sealIfFull(sealMarksFor(this.indexing, this.recent.streamCount));
      // The producer changes held now are in rows up to the seal's: written before those go.
      if (this.recent.sealedUpToId !== null) this.producers.seal();
    }
    return this.recent.sealedUpToId === null ? null : this.indexing.stepRows + added;
  }

  /**
   * Indexes the next slice of sealed appends and writes as many sealed producer changes;
   * once all are, drops their rows from `recent_batches`.
   */
  indexSealedSlice(maxRows: number): void {
    this.index(this.recent.takeSealed(maxRows));
    this.writeProducerChanges(this.producers.takeSealed(maxRows));
    if (!this.recent.sealDone || !this.producers.sealDone) return;
    this.sql.deleteRecentUpTo.run(this.recent.sealedUpToId!);
    this.recent.endSeal();
  }

  /**
   * Indexes every recent append (inside the caller's transaction), this transaction's own
   * included: they are indexed now, so its batch row is not stored.
   */
  indexAll(): void {
    this.index(this.recent.takeAll());
    this.writeProducerChanges(this.producers.takeAll());
    this.sql.clearRecent.run();
    this.dropBatchAppends();
    // Their id is retired with them, as when a row is stored: a seal of everything up to
    // it must never cover appends added after it.
    this.batchId++;
  }

  /**
   * Indexes a large append in the open transaction, its bytes bound as they are (no
   * copy). The stream's held appends, all before it, are indexed first: after a crash,
   * recovery takes a held append that starts before the end of its stream's last indexed
   * row as indexed already, so no row may be indexed past one still held.
   */
  private indexNow(streamId: number, start: number, data: Buffer): void {
    const held = this.recent.takeStream(streamId);
    this.index(held.map((append) => ({ streamId, start: append.start, data: append.data })));
    // Those this transaction made need no batch row now.
    const indexed = new Set(held);
    this.batchAppends = this.batchAppends.filter((append) => !indexed.has(append));
    this.batchBytes = this.batchAppends.reduce((bytes, append) => bytes + append.data.length, 0);
    this.index([{ streamId, start, data }]);
  }

  private index(appends: readonly PackedAppend[]): void {
    this.inserter.insert(appends);
    for (const append of appends) this.txnBytes += append.data.length;
  }

  /** Writes the stream's held producer changes to `producers` now, so that a query over its records sees them. */
  writeStreamProducers(streamId: number): void {
    this.writeProducerChanges(this.producers.takeStream(streamId));
  }

  /** Writes every held producer change to `producers` now, so that counting the table counts them. */
  writeAllProducers(): void {
    for (const streamId of this.producers.streamIds()) this.writeStreamProducers(streamId);
  }

  /** Bytes of appends the latest transaction stored, new or indexed (counted until the next begins). */
  get transactionBytes(): number {
    return this.txnBytes;
  }

  begin(): void {
    this.txnBytes = 0;
    this.recent.begin();
    this.producers.begin();
  }

  commit(): void {
    this.recent.commit();
    this.producers.commit();
  }

  /** Undoes the open transaction's changes to what is held; its batch row was not stored. */
  rollback(): void {
    this.recent.rollback();
    this.producers.rollback();
    this.dropBatchAppends();
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

  /** Writes producer record changes to `producers`, in order. */
  private writeProducerChanges(changes: readonly HeldChange[]): void {
    for (const { streamId, producerId, change } of changes) {
      if (change === null) this.sql.deleteProducer.run(streamId, producerId);
      else this.sql.upsertProducer.run(...producerRow(streamId, change));
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
}

/** Whether a stream id is stored, each id asked of SQLite once (recovery asks per append). */
function streamExistence(sql: Statements): (id: number) => boolean {
  const known = new Map<number, boolean>();
  return (id) => {
    let exists = known.get(id);
    if (exists === undefined) known.set(id, (exists = sql.streamById.get(id) !== undefined));
    return exists;
  };
}
