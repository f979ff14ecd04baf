/**
 * Group-local append transactions (Ursula's `group-append-transaction-v1`): several appends
 * to streams of one affinity key commit together or not at all. Each operation is judged by
 * the plain append's rules (core/append.ts), in request order, each seeing the ones before
 * it (two operations on one stream chain). This file adds what only a transaction has:
 *
 * - the first refused operation refuses the whole transaction with its own error, and
 *   nothing of it applies;
 * - a retry is recognised through its producer operations: when every operation is a
 *   producer duplicate, the transaction was applied before and is answered with the
 *   original receipts, applying nothing. When only some are (an operation without producer
 *   fields can never be recognised as a retry), applying the rest would apply the
 *   transaction a second time in part, so it is refused and nothing applies.
 */
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import type { AppendOutcome } from './types.js';

/** An operation's outcome within a committed transaction. */
export type CommittedOperation = Extract<AppendOutcome, { kind: 'appended' | 'duplicate' }>;

export type TransactionOutcome =
  | { kind: 'committed'; operations: CommittedOperation[] }
  | {
      kind: 'rejected';
      error: ProtocolError;
      /** Index of the operation refused; null when the transaction as a whole is. */
      operation: number | null;
      /** The stream the refusal is about numbers records (for Stream-Extensions). */
      records: boolean;
    };

/**
 * The transaction's refusal once operation `index` has been judged, or null when it may go
 * on. Every operation carries data, so a closed stream refuses it (never 'already-closed').
 */
export function refusalAt(outcome: AppendOutcome, index: number): Extract<TransactionOutcome, { kind: 'rejected' }> | null {
  if (outcome.kind === 'rejected') return { kind: 'rejected', error: outcome.error, operation: index, records: outcome.records };
  if (outcome.kind === 'already-closed') throw new Error('invariant: a transaction operation with data cannot end as already-closed');
  return null;
}

/** The transaction's outcome once every operation was judged and none refused. */
export function decideTransaction(outcomes: readonly CommittedOperation[]): TransactionOutcome {
  const duplicates = outcomes.filter((o) => o.kind === 'duplicate').length;
  if (duplicates === 0 || duplicates === outcomes.length) return { kind: 'committed', operations: [...outcomes] };
  const fresh = outcomes.findIndex((o) => o.kind !== 'duplicate');
  const error = protocolError(
    'TRANSACTION_PARTLY_APPLIED',
    `${duplicates} of the ${outcomes.length} operations were applied by an earlier attempt of this transaction and the others were not; nothing was applied again`,
  );
  return { kind: 'rejected', error, operation: fresh, records: outcomes[fresh]!.records };
}
