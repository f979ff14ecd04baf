/**
 * Two batches in flight on one node (issue 41): while a batch's COMMIT waits for its WAL
 * flush, the next batch may run on the rows as that batch will leave them, and go out as
 * an optimistic batch (optimistic.ts) on a connection of its own. Its guard expects, for
 * each row the first batch wrote, the first batch's transaction id as the row's xmin:
 * PostgreSQL makes the guard wait on the first batch's row locks, then sees the row as the
 * first batch left it (committed: its id) or as before (rolled back: another id, and the
 * guard fails the second batch, which then runs the usual way once the first has ended).
 * So the second commits only on rows that truly hold what it ran on, whatever became of
 * the first; it is answered, and what it wrote remembered, only after the first ended.
 *
 * The first batch's id must be known before the second is built on it: a loaded batch has
 * it from its locking loads, an optimistic one from its guard's answer, which PostgreSQL
 * sends as soon as the guard ran (before the COMMIT's flush).
 */
import type { StreamState } from '../../core/types.js';
import type { KnownRow, KnownRows } from './known-rows.js';

/** Where a batch finds the rows it may run on: the known rows, or those a batch in flight will leave. */
export interface RowLookup {
  byNameFresh(name: string): KnownRow | undefined;
  byIdFresh(id: number): KnownRow | undefined;
}

/** What a committed batch leaves: its stream rows and their versions (PgBatch.committedRows). */
export interface Left {
  left: { rows: KnownRow[]; gone: number[] };
}

/** A batch a node runs, as the batch after it sees it. */
export interface InFlight {
  /** Settles (never rejects) once the batch ended: committed and remembered, or failed. */
  ended: Promise<void>;
  /** Its rows as it leaves them should it commit, once its COMMIT is on its way and its id known; null before and after. */
  after: RowsAfter | null;
  /** A batch begun beside it could not commit there and waits for it: no other begins beside it. */
  declined: boolean;
}

/**
 * The rows a batch leaves once committed as transaction `xid`, over the rows known: each
 * row it wrote at version `xid`, each it only loaded at the version it loaded. A stream it
 * changed without a version to show for it (dropped, or written by a batch that learned no
 * id), and an id it found gone, are not offered at all.
 */
export class RowsAfter implements RowLookup {
  private readonly byName = new Map<string, KnownRow>();
  private readonly byId = new Map<number, KnownRow>();
  private readonly goneIds: Set<number>;

  constructor(
    rows: readonly KnownRow[],
    gone: readonly number[],
    private readonly touched: ReadonlySet<string>,
    private readonly known: KnownRows,
  ) {
    for (const row of rows) {
      this.byName.set(row.stream.name, row);
      this.byId.set(row.stream.id, row);
    }
    this.goneIds = new Set(gone);
  }

  byNameFresh(name: string): KnownRow | undefined {
    const row = this.byName.get(name);
    if (row !== undefined) return row;
    return this.touched.has(name) ? undefined : this.unchanged(this.known.byNameFresh(name));
  }

  byIdFresh(id: number): KnownRow | undefined {
    const row = this.byId.get(id);
    if (row !== undefined) return row;
    return this.goneIds.has(id) ? undefined : this.unchanged(this.known.byIdFresh(id));
  }

  /** A known row, unless the batch in flight changed its stream (under its name or its id). */
  private unchanged(row: KnownRow | undefined): KnownRow | undefined {
    if (row === undefined) return undefined;
    const stream: StreamState = row.stream;
    return this.touched.has(stream.name) || this.goneIds.has(stream.id) ? undefined : row;
  }
}
