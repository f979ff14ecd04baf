/**
 * Stream rows as this node last saw them committed, each with its version: the `xmin` of
 * the row version (the transaction that wrote it). A batch whose commands only need rows
 * known here can run without loading them first (optimistic.ts): it sends, in one round
 * trip, a guard that locks the rows and aborts the transaction unless their versions are
 * still these, its writes and COMMIT. A stale entry therefore costs a fallback, never a
 * wrong answer; entries are dropped on other nodes' hints only to make that rarer.
 */
import type { StreamState } from '../../core/types.js';
import { rowToStream, streamColumnValues, streamRowOfValues } from '../stream-columns.js';

export interface KnownRow {
  stream: StreamState;
  /** The row version's xmin, as text. */
  version: string;
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

  constructor(
    private readonly maxRows: number,
    private readonly nowMs: () => number = () => performance.now(),
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

  /** Rows committed as given (the oldest entries go past maxRows); `gone`: ids no longer stored. */
  remember(rows: Iterable<KnownRow>, gone: Iterable<number> = []): void {
    const atMs = this.nowMs();
    for (const id of gone) this.dropId(id);
    for (const { stream, version } of rows) {
      this.dropId(stream.id);
      const other = this.byName.get(stream.name);
      if (other) this.dropId(other.stream.id);
      const entry = { stream, version, atMs };
      this.byId.set(stream.id, entry);
      this.byName.set(stream.name, entry);
    }
    for (const id of this.byId.keys()) {
      if (this.byId.size <= this.maxRows) break;
      this.dropId(id);
    }
  }

  /** Another node changed these streams (null: it cannot say which). */
  forget(names: readonly string[] | null): void {
    if (names === null) {
      this.byId.clear();
      this.byName.clear();
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
