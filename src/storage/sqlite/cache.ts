/**
 * Committed stream state kept in memory, so that appends and reads do not query SQLite
 * for it. The engine is the only writer of its database, which keeps the cache exact.
 * Changes made inside a transaction are logged and undone if it rolls back.
 *
 * Bounded by entries and by an estimate of the memory they hold (`entryBytes`): a stream's
 * attributes (up to 16 KiB of a client's JSON) and time marks make some states fifty
 * times the size of a plain one, and a bound by count alone would let clients set how
 * much memory the cache takes.
 */
import type { StreamState } from '../../core/types.js';

/** A stream name's state before and after one transaction (null: no stream). */
export interface StreamChange {
  before: StreamState | null;
  after: StreamState | null;
}

export class StreamCache {
  private readonly byName = new Map<string, StreamState>();
  private readonly byId = new Map<number, StreamState>();
  private undo: Array<() => void> | null = null;
  /** For each name the current transaction changed: its state before and after it. */
  private changes: Map<string, StreamChange> | null = null;
  /**
   * The committed tail and record tail of streams evicted, by id (ids are never reused).
   * A stream's row lags its appends by up to RECORD_ROW_LAG_BYTES, and loading one counts
   * the messages of that lag from its appends: with most writes missing the cache that
   * count was over half of an append's cost (325k instructions an append against 128k).
   * A load whose tail is still the one kept here takes the record tail from here instead.
   * Two numbers a stream, kept for EVICTED_PER_ENTRY times as many streams as the cache.
   */
  private readonly evicted = new Map<number, EvictedTails>();
  private readonly maxEvicted: number;
  /** The estimated memory of the states held by name (`entryBytes`). */
  private bytes = 0;
  /** Lookups the cache answered, and those that went to the database (counted by StreamRows, for metrics). */
  hits = 0;
  misses = 0;

  constructor(
    private readonly maxEntries: number,
    private readonly maxBytes: number = Infinity,
  ) {
    this.maxEvicted = Math.min(maxEntries * EVICTED_PER_ENTRY, Math.floor(maxBytes / EVICTED_ENTRY_BYTES / EVICTED_SHARE));
  }

  /** States held, and their estimated memory in bytes. */
  get size(): { entries: number; bytes: number } {
    return { entries: this.byName.size, bytes: this.bytes };
  }

  /** The record tail of an evicted stream, when `tail` is still its tail; else undefined. */
  evictedRecordNext(id: number, tail: number): number | undefined {
    const kept = this.evicted.get(id);
    return kept !== undefined && kept.tail === tail ? kept.recordNext : undefined;
  }

  getByName(name: string): StreamState | undefined {
    return this.byName.get(name);
  }

  getById(id: number): StreamState | undefined {
    return this.byId.get(id);
  }

  /** Remembers a state read from the database (not a change). */
  remember(stream: StreamState): void {
    this.putByName(stream.name, stream);
    this.byId.set(stream.id, stream);
    if (this.byName.size > this.maxEntries || this.bytes > this.maxBytes) this.evictOldest(stream.name);
  }

  /** Every change to `byName` goes through here and `dropByName`, which keep `bytes`. */
  private putByName(name: string, stream: StreamState): void {
    const previous = this.byName.get(name);
    if (previous !== undefined) this.bytes -= entryBytes(previous);
    this.byName.set(name, stream);
    this.bytes += entryBytes(stream);
  }

  private dropByName(name: string): void {
    const previous = this.byName.get(name);
    if (previous === undefined) return;
    this.bytes -= entryBytes(previous);
    this.byName.delete(name);
  }

  private note(name: string, previous: StreamState | undefined, next: StreamState | null): void {
    if (!this.changes) return;
    const change = this.changes.get(name);
    if (change) change.after = next;
    else this.changes.set(name, { before: previous ?? null, after: next });
  }

  /** Records a change made by the current transaction. */
  set(stream: StreamState, previousByName = this.byName.get(stream.name)): void {
    this.note(stream.name, previousByName, stream);
    const previousById = this.byId.get(stream.id);
    this.remember(stream);
    this.undo?.push(() => {
      this.restore(stream.name, stream.id, previousByName, previousById);
    });
  }

  delete(stream: StreamState): void {
    const previousByName = this.byName.get(stream.name);
    // After the transaction the name holds no stream (unless it recreates one, noted then).
    this.note(stream.name, previousByName, null);
    const previousById = this.byId.get(stream.id);
    if (previousByName?.id === stream.id) this.dropByName(stream.name);
    this.byId.delete(stream.id);
    this.undo?.push(() => this.restore(stream.name, stream.id, previousByName, previousById));
  }

  private restore(name: string, id: number, byName: StreamState | undefined, byId: StreamState | undefined): void {
    if (byName) this.putByName(name, byName);
    else this.dropByName(name);
    if (byId) this.byId.set(id, byId);
    else this.byId.delete(id);
  }

  begin(): void {
    this.undo = [];
    this.changes = new Map();
  }

  /** Ends the transaction; answers what each changed name held before and after it. */
  commit(): Map<string, StreamChange> {
    const changes = this.changes ?? new Map<string, StreamChange>();
    this.undo = null;
    this.changes = null;
    return changes;
  }

  rollback(): void {
    const steps = this.undo ?? [];
    this.undo = null;
    this.changes = null;
    for (const step of steps.reverse()) step();
  }

  /**
   * Drops the oldest entries, to a tenth under the bounds, so that eviction runs once per
   * many loads; they are reloaded from SQLite when needed. Never `keep`, the state just
   * placed (an update keeps its name's place in the order, which may be the oldest).
   */
  private evictOldest(keep: string): void {
    const entriesAfter = Math.floor(this.maxEntries * 0.9);
    const bytesAfter = this.maxBytes * 0.9;
    for (const [name, stream] of this.byName) {
      if (this.byName.size <= entriesAfter && this.bytes <= bytesAfter) break;
      if (name === keep) continue;
      this.dropByName(name);
      if (this.byId.get(stream.id) === stream) this.byId.delete(stream.id);
      // Only a committed state: one the current transaction changed may yet be rolled back.
      if (!this.changes?.has(name)) this.keepTails(stream);
    }
  }

  private keepTails(stream: StreamState): void {
    if (this.evicted.size >= this.maxEvicted) {
      let toDrop = Math.max(1, Math.floor(this.maxEvicted / EVICTED_PER_ENTRY));
      for (const id of this.evicted.keys()) {
        if (toDrop-- <= 0) break;
        this.evicted.delete(id);
      }
    }
    this.evicted.delete(stream.id);
    this.evicted.set(stream.id, { tail: stream.tail, recordNext: stream.recordNext });
  }
}

interface EvictedTails {
  tail: number;
  recordNext: number;
}

/** Evicted streams whose tails are kept, per stream the cache holds. */
const EVICTED_PER_ENTRY = 10;
/** An evicted stream's two numbers with its map entry, about 80 bytes of V8's heap (measured when they were added). */
const EVICTED_ENTRY_BYTES = 80;
/** The evicted tails take at most this fraction of the cache's byte bound: 1 / EVICTED_SHARE. */
const EVICTED_SHARE = 4;

/**
 * A plain state held by name and by id: 366 bytes of V8's heap for one with a 22-character
 * name (100,000 of them, measured with `process.memoryUsage()` after a full GC), without
 * its name.
 */
const ENTRY_BASE_BYTES = 344;
/** A time mark: an object of three numbers in an array. */
const TIME_MARK_BYTES = 64;
/** A snapshot's metadata or a fork link: a small object with its strings. */
const LINK_BYTES = 160;

/**
 * The memory a cached state holds, estimated from what varies between states. Attributes
 * count two bytes a character: V8 keeps a string with any character outside Latin-1 in two.
 */
function entryBytes(stream: StreamState): number {
  let bytes = ENTRY_BASE_BYTES + stream.name.length + 2 * (stream.attrs?.length ?? 0) + (stream.lastStreamSeq?.length ?? 0);
  if (stream.timeMarks !== undefined) bytes += stream.timeMarks.length * TIME_MARK_BYTES;
  if (stream.snapshot !== null) bytes += LINK_BYTES;
  if (stream.fork !== null) bytes += LINK_BYTES;
  return bytes;
}
