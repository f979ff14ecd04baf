/**
 * A test wrapper around the real SQLite engine that injects storage faults. It lives in
 * the tests only; the server has no switch for it, it is simply handed this store.
 *
 * - `failCommits`: every batch runs its commands, then its commit fails, so SQLite rolls
 *   the transaction back (what a failed fsync or a lost disk looks like to the server).
 * - `setMaxPages`: caps the database size with PRAGMA max_page_count, so SQLite really
 *   runs out of space (SQLITE_FULL) in the middle of a batch.
 * - `failIndexing`: each slice of sealed recent appends is indexed, then fails, either as
 *   the storage failing ('full': SQLITE_FULL) or as a broken invariant ('bug').
 * - `holdNext(n)`: queues the next `n` commands and releases them together in one turn
 *   of the event loop, so that concurrent HTTP writes are certain to share one batch.
 * - `failReads`: the subscription sweep's read of due subscriptions fails as a read fails
 *   while a networked database is down (ReadUnavailableError); `sweepReads(n)` waits for
 *   the sweep to make `n` more of them.
 */
import Database from 'better-sqlite3';
import { SqliteStore, type SqliteStoreOptions } from '../../src/storage/sqlite/engine.js';
import type { Txn } from '../../src/storage/executor.js';
import type { CommandName, StoreCommands } from '../../src/storage/store.js';
import { ReadUnavailableError } from '../../src/storage/errors.js';

export class InjectedCommitFailure extends Error {}
export class InjectedBug extends Error {}

export class FaultyStore extends SqliteStore {
  failCommits = false;
  failIndexing: 'full' | 'bug' | null = null;
  /** Slices of recent appends whose indexing was made to fail. */
  indexingFailures = 0;
  /** Transactions attempted, and how many of them failed. */
  attempted = 0;
  failed = 0;
  failReads = false;
  private dueReads = 0;
  private dueReadWaiters: Array<{ at: number; resolve: () => void }> = [];
  private holding = 0;
  private held: Array<() => void> = [];

  constructor(options: SqliteStoreOptions) {
    super(options);
  }

  protected override transact(body: (txn: Txn) => void): void {
    this.attempted++;
    try {
      super.transact((txn) => {
        body(txn);
        if (this.failCommits) throw new InjectedCommitFailure('injected: the commit failed');
      });
    } catch (error) {
      this.failed++;
      throw error;
    }
  }

  protected override indexSealedSlice(maxRows: number): void {
    super.indexSealedSlice(maxRows);
    if (this.failIndexing === null) return;
    this.indexingFailures++;
    if (this.failIndexing === 'bug') throw new InjectedBug('injected: indexing broke an invariant');
    throw new Database.SqliteError('injected: database or disk is full', 'SQLITE_FULL');
  }

  override dueSubscriptions(nowMs: number, limit: number): Promise<string[]> {
    this.dueReads++;
    for (const waiter of this.dueReadWaiters.filter((w) => w.at <= this.dueReads)) waiter.resolve();
    this.dueReadWaiters = this.dueReadWaiters.filter((w) => w.at > this.dueReads);
    if (this.failReads) return Promise.reject(new ReadUnavailableError(new Error('injected: the database cannot be reached')));
    return super.dueSubscriptions(nowMs, limit);
  }

  /** Resolves when the subscription sweep has begun `count` more reads of due subscriptions. */
  sweepReads(count: number): Promise<void> {
    return new Promise((resolve) => this.dueReadWaiters.push({ at: this.dueReads + count, resolve }));
  }

  pageCount(): number {
    return this.db.pragma('page_count', { simple: true }) as number;
  }

  setMaxPages(pages: number): void {
    this.db.pragma(`max_page_count = ${pages}`);
  }

  holdNext(commands: number): void {
    this.holding = commands;
  }

  override run<K extends CommandName>(kind: K, input: StoreCommands[K]['input']): Promise<StoreCommands[K]['output']> {
    if (this.holding === 0) return super.run(kind, input);
    return new Promise((resolve, reject) => {
      this.held.push(() => super.run(kind, input).then(resolve, reject));
      if (this.held.length < this.holding) return;
      const release = this.held;
      this.held = [];
      this.holding = 0;
      for (const start of release) start();
    });
  }
}
