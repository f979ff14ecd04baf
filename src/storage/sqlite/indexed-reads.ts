/**
 * Reads of the `chunks` index, and the large appends kept beside it for readers going
 * through one in several responses (storage/large-appends.ts). A read of bytes runs inside
 * `readingTo`, which tells the loads where it ends: the large append it cuts there is kept,
 * and a kept one it takes to its end is dropped. Any other read (`chunkAt`, a transaction's)
 * finds what is kept and keeps nothing: a transaction may read its own insert, gone if it
 * rolls back, while a committed row's bytes never change.
 */
import type { StoredChunk } from '../chain.js';
import type { LargeAppendCache } from '../large-appends.js';
import { appendAt, appendsOfRow } from './chunk-rows.js';
import type { Statements } from './statements.js';

export class IndexedReads {
  /** Where the read of bytes running now ends; null in any other read. */
  private readEnd: number | null = null;

  constructor(
    private readonly sql: Statements,
    private readonly largeAppends: LargeAppendCache,
  ) {}

  /** Runs a read of bytes up to `end`. */
  readingTo<T>(end: number, read: () => T): T {
    this.readEnd = end;
    try {
      return read();
    } finally {
      this.readEnd = null;
    }
  }

  /** The indexed append with the greatest start at or before `position`. */
  appendAt(streamId: number, position: number): StoredChunk | null {
    const kept = this.largeAppends.containing(streamId, position);
    if (kept !== undefined) {
      // A read that takes it to its end was its reader's last; another reader loads it again.
      if (this.readEnd !== null && !this.readCuts(kept)) this.largeAppends.drop(streamId, kept);
      return kept;
    }
    const row = this.sql.chunkContaining.get(streamId, position);
    if (!row) return null;
    const append = appendAt(row, position);
    this.keepIfCut(streamId, append);
    return append;
  }

  /** The indexed appends with `from <= start < before`, in order. */
  *appendsFrom(streamId: number, from: number, before: number): Iterable<StoredChunk> {
    for (const row of this.sql.chunkRowsFrom.iterate({ stream: streamId, from, before })) {
      for (const append of appendsOfRow(row)) {
        if (append.start < from || append.start >= before) continue;
        this.keepIfCut(streamId, append);
        yield append;
      }
    }
  }

  /**
   * Keeps a large append a read of bytes cut at its end: its reader comes back for the
   * rest. One read whole is not kept: a live reader of 1 MiB appends would fill the
   * memory with what nobody asks for again.
   */
  private keepIfCut(streamId: number, append: StoredChunk): void {
    if (this.readCuts(append)) this.largeAppends.keep(streamId, append);
  }

  /** Whether a read of bytes runs now and ends inside `append`. */
  private readCuts(append: StoredChunk): boolean {
    return this.readEnd !== null && append.start + append.data.length > this.readEnd;
  }
}
