/**
 * Stream rows as this node last saw them committed, each with its version: the `xmin` of
 * the row version (the transaction that wrote it). A batch whose commands only need rows
 * known here can run without loading them first (optimistic.ts): it sends, in one round
 * trip, a guard that locks the rows and aborts the transaction unless their versions are
 * still these, its writes and COMMIT. A stale entry therefore costs a fallback, never a
 * wrong answer; entries are dropped on other nodes' hints only to make that rarer.
 *
 * An entry may also hold producer records of its stream as they were at its version. A
 * row's version covers them: every change to a producer record comes with a new version
 * of its stream's row, in the same transaction (an append writes the row; writes.ts
 * rewrites it for any other change), so records known at a version the guard finds
 * unchanged are as stored.
 */
import type { ProducerRecord, StreamState } from '../../core/types.js';
import { producerFromValues, producerValues } from '../producer-columns.js';
import { rowToStream, streamColumnValues, streamRowOfValues } from '../stream-columns.js';

/**
 * A stream's producer records as of its row's version: by id, null when known absent.
 * `all`: every record the stream has is here (a new producer's summary needs no query).
 */
export interface KnownProducers {
  records: ReadonlyMap<string, ProducerRecord | null>;
  all: boolean;
}

/** Records kept with one row at most: a stream with more keeps none (its batches load them). */
export const KNOWN_PRODUCERS_MAX = 64;

export interface KnownRow {
  stream: StreamState;
  /** The row version's xmin, as text. */
  version: string;
  /** Its producer records at that version, when a batch had them. */
  producers?: KnownProducers;
}

interface Entry extends KnownRow {
  atMs: number;
}

/**
 * Entries older than this are not used. xmin is a 32-bit transaction id that wraps: a row
 * rewritten since, by a transaction that happens to have the same id, would pass the guard.
 * That takes 2^32 transactions, so an age bound of minutes rules it out.
 */
export const KNOWN_ROW_MAX_AGE_MS = 60_000;

export class KnownRows {
  private readonly byName = new Map<string, Entry>();
  private readonly byId = new Map<number, Entry>();
  /** Producer records held by all entries. */
  private producerRecords = 0;

  constructor(
    private readonly maxRows: number,
    private readonly nowMs: () => number = () => performance.now(),
    private readonly maxProducerRecords = maxRows,
  ) {}

  get size(): number {
    return this.byId.size;
  }

  byNameFresh(name: string): KnownRow | undefined {
    return this.fresh(this.byName.get(name));
  }

  byIdFresh(id: number): KnownRow | undefined {
    return this.fresh(this.byId.get(id));
  }

  /** Producer records held with the rows. */
  get producerCount(): number {
    return this.producerRecords;
  }

  /** Rows committed as given (the oldest entries go past maxRows or maxProducerRecords); `gone`: ids no longer stored. */
  remember(rows: Iterable<KnownRow>, gone: Iterable<number> = []): void {
    const atMs = this.nowMs();
    for (const id of gone) this.dropId(id);
    for (const { stream, version, producers } of rows) {
      this.dropId(stream.id);
      const other = this.byName.get(stream.name);
      if (other) this.dropId(other.stream.id);
      const entry = { stream, version, producers, atMs };
      this.byId.set(stream.id, entry);
      this.byName.set(stream.name, entry);
      this.producerRecords += producers?.records.size ?? 0;
    }
    for (const id of this.byId.keys()) {
      if (this.byId.size <= this.maxRows && this.producerRecords <= this.maxProducerRecords) break;
      this.dropId(id);
    }
  }

  /** Another node changed these streams (null: it cannot say which). */
  forget(names: readonly string[] | null): void {
    if (names === null) {
      this.byId.clear();
      this.byName.clear();
      this.producerRecords = 0;
      return;
    }
    for (const name of names) {
      const entry = this.byName.get(name);
      if (entry) this.dropId(entry.stream.id);
    }
  }

  private fresh(entry: Entry | undefined): KnownRow | undefined {
    if (entry === undefined) return undefined;
    if (this.nowMs() - entry.atMs <= KNOWN_ROW_MAX_AGE_MS) return entry;
    this.dropId(entry.stream.id);
    return undefined;
  }

  private dropId(id: number): void {
    const entry = this.byId.get(id);
    if (!entry) return;
    this.byId.delete(id);
    this.producerRecords -= entry.producers?.records.size ?? 0;
    if (this.byName.get(entry.stream.name) === entry) this.byName.delete(entry.stream.name);
  }
}

/**
 * A state as a load of the row it was written to would give it back: the columns it is
 * stored as, read again. What a batch wrote is remembered in this form, so that a batch
 * run on a known row sees exactly what it would have loaded.
 */
export function asStored(stream: StreamState): StreamState {
  return rowToStream(streamRowOfValues([stream.id, ...streamColumnValues(stream)]));
}

/** A record as a load of its row would give it back (see asStored). */
export function producerAsStored(record: ProducerRecord): ProducerRecord {
  return producerFromValues(producerValues(record));
}
