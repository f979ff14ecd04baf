/**
 * Optimistic batches (issue 41): a batch of appends to streams this node knows, by
 * producers whose records it knows with them (known-rows.ts), runs on what it knows,
 * without loading the rows, and goes out in one round trip: BEGIN, a guard, the
 * writes, COMMIT. The guard locks the rows, in name order as every batch locks streams,
 * and fails the transaction (division by zero) unless each is still at the version the
 * batch ran on (which covers the stream's producer records); the COMMIT after a failed
 * statement answers ROLLBACK, and the batch runs again the usual way (load under lock,
 * then write). So a batch commits only on the rows it read, as a batch that loaded them
 * would have: the same rule across nodes, and, one batch in flight per node, the same
 * order within one.
 */
import { compareUtf8 } from '../../core/utf8-order.js';
import type { Command } from '../store.js';
import type { Queryable } from './chunks.js';
import type { KnownRow, KnownRows } from './known-rows.js';

/**
 * Locks the rows `$1`, in the order given (the caller gives them in name order), and
 * divides by zero unless every one is there at the version `$2` gives it; answers this
 * transaction's id, for the versions of the rows it writes. Each row is found through
 * its key by construction, as the loads in batch.ts find theirs: written as `WHERE id =
 * ANY($1) ORDER BY name`, the guard was planned as a scan of every stream row (issue 41).
 */
export const GUARD_SQL = `SELECT 1 / (count(*) = cardinality($1::bigint[]))::int AS ok, pg_current_xact_id()::xid::text AS xid
  FROM unnest($1::bigint[], $2::text[]) e(id, v)
  CROSS JOIN LATERAL (SELECT xmin::text AS v FROM streams s WHERE s.id = e.id FOR UPDATE) l
  WHERE l.v = e.v`;

/** SQLSTATE of the guard's division by zero: the rows were not as known. */
export const GUARD_FAILED = '22012';

/** An optimistic batch asked for state it does not hold: it runs the usual way instead. */
export class NotOptimistic extends Error {
  constructor() {
    super('an optimistic batch needed state it did not hold');
  }
}

/**
 * The known rows a batch of `commands` runs on, or null when it cannot run optimistically:
 * a command other than an append or a transaction of appends, a producer whose record (or
 * its absence, with every record of the stream) is not known with its stream's row, or a
 * stream (named, or renewed by a read: `streamIds`) not known. A question the batch still
 * cannot answer from them (a summary of producers past their age) fails it with
 * NotOptimistic, and it runs the usual way.
 */
export function knownRowsFor(commands: readonly Command[], streamIds: readonly number[], known: KnownRows): KnownRow[] | null {
  const rows = new Map<number, KnownRow>();
  for (const c of commands) {
    if (c.kind !== 'append' && c.kind !== 'appendTransaction') return null;
    for (const { name, request } of c.kind === 'append' ? [c.input] : c.input.operations) {
      const row = known.byNameFresh(name);
      if (row === undefined || (request.producer && !producerKnown(row, request.producer.id))) return null;
      rows.set(row.stream.id, row);
    }
  }
  for (const id of streamIds) {
    const row = known.byIdFresh(id);
    if (row === undefined) return null;
    rows.set(id, row);
  }
  return inNameOrder([...rows.values()]);
}

/** Whether the row holds the producer's record, or every record of its stream (so that its absence is known too). */
function producerKnown(row: KnownRow, producerId: string): boolean {
  if (row.producers === undefined) return false;
  return row.producers.all || Boolean(row.producers.records.get(producerId));
}

/**
 * Rows in the order every batch locks streams: by name as `ORDER BY name` gives them
 * (`streams.name` is in the "C" collation, UTF-8 bytes). Two batches that lock in one
 * order never wait on each other in a cycle.
 */
function inNameOrder(rows: KnownRow[]): KnownRow[] {
  return rows.sort((a, b) => compareUtf8(a.stream.name, b.stream.name));
}

/**
 * A connection that refuses every query until opened: an optimistic batch's loads fail
 * with NotOptimistic before anything is sent, and its commit opens it.
 */
export function gated(db: Queryable): { db: Queryable; open(): void } {
  let open = false;
  return {
    db: { query: (text, values) => (open ? db.query(text, values) : Promise.reject(new NotOptimistic())) },
    open: () => void (open = true),
  };
}
