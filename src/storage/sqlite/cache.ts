/**
 * Committed stream state kept in memory, so that appends and reads do not query SQLite
 * for it. The engine is the only writer of its database, which keeps the cache exact.
 * Changes made inside a transaction are logged and undone if it rolls back.
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
  /** Lookups the cache answered, and those that went to the database (counted by StreamRows, for metrics). */
  hits = 0;
  misses = 0;

  constructor(private readonly maxEntries: number) {}

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
    if (this.byName.size >= this.maxEntries) this.evictOldest();
    this.byName.set(stream.name, stream);
    this.byId.set(stream.id, stream);
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
    if (previousByName?.id === stream.id) this.byName.delete(stream.name);
    this.byId.delete(stream.id);
    this.undo?.push(() => this.restore(stream.name, stream.id, previousByName, previousById));
  }

  private restore(name: string, id: number, byName: StreamState | undefined, byId: StreamState | undefined): void {
    if (byName) this.byName.set(name, byName);
    else this.byName.delete(name);
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

  /** Drops the oldest tenth of the entries; they are reloaded from SQLite when needed. */
  private evictOldest(): void {
    let toDrop = Math.max(1, Math.floor(this.maxEntries / 10));
    for (const [name, stream] of this.byName) {
      if (toDrop-- <= 0) break;
      this.byName.delete(name);
      if (this.byId.get(stream.id) === stream) this.byId.delete(stream.id);
      // Only a committed state: one the current transaction changed may yet be rolled back.
      if (!this.changes?.has(name)) this.keepTails(stream);
    }
  }

  private keepTails(stream: StreamState): void {
    if (this.evicted.size >= this.maxEntries * EVICTED_PER_ENTRY) {
      let toDrop = Math.max(1, this.maxEntries);
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

/** Evicted streams whose tails are kept, per stream the cache holds (about 80 bytes each against 1.2 KB). */
const EVICTED_PER_ENTRY = 10;
