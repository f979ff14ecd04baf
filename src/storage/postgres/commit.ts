/**
 * How a batch's last round trip goes out (engine.ts): its writes and COMMIT, with BEGIN and
 * the guard first for an optimistic batch (optimistic.ts), in one socket write; and the
 * ROLLBACK of a batch that failed.
 */
import pg from 'pg';
import { CommitOutcomeUnknownError } from '../errors.js';
import type { PgBatch } from './batch.js';
import type { Queryable } from './chunks.js';
import type { KnownRow } from './known-rows.js';
import { GUARD_FAILED, GUARD_SQL } from './optimistic.js';

/**
 * Runs `send`, which sends statements on `client` without waiting (pipelined), with the
 * connection's socket corked: pg writes each statement's messages with a system call of
 * its own, and a batch's round trip holds two to four statements (issue 41: in one profile,
 * 16% of a node's samples, idle ones included, went to those writes). Everything `send`
 * sends before its first await goes out in one write.
 */
export function together<T>(client: pg.PoolClient, send: () => T): T {
  // pg's own socket, not part of its typed API: without one (another pg), statements go out as before.
  const socket = (client as unknown as { connection?: { stream?: { cork?: () => void; uncork?: () => void } } }).connection?.stream;
  if (typeof socket?.cork !== 'function' || typeof socket.uncork !== 'function') return send();
  socket.cork();
  try {
    return send();
  } finally {
    socket.uncork();
  }
}

/** A batch that lost a race with another node's (deadlock, concurrent creation) runs again, up to this many times. */
export const MAX_ATTEMPTS = 5;
/** SQLSTATEs of a transaction that lost a race and may simply run again. */
const RETRYABLE = new Set(['40001', '40P01', '23505']);

export function isRetryable(error: unknown): boolean {
  return error instanceof pg.DatabaseError && error.code !== undefined && RETRYABLE.has(error.code);
}

/** The guard of an optimistic batch failed its transaction: the rows were not as known. */
function isGuardFailure(outcome: PromiseSettledResult<unknown>): boolean {
  return outcome.status === 'rejected' && outcome.reason instanceof pg.DatabaseError && outcome.reason.code === GUARD_FAILED;
}

/** Longest a ROLLBACK may take before its connection is given up instead of returned to the pool. */
const ROLLBACK_TIMEOUT_MS = 1_000;

/** False when the connection could not roll back in time (it died, or a timed-out statement still runs on it). */
export async function rolledBack(client: pg.PoolClient): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ROLLBACK_TIMEOUT_MS)));
  const rollback = client.query('ROLLBACK').then(
    () => true,
    () => false,
  );
  try {
    return await Promise.race([rollback, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Sends the batch's last writes and COMMIT. When the batch sent no writes before (the
 * common case), they go out in one round trip: should a write fail to be sent at all,
 * the COMMIT that follows it commits no change. Otherwise COMMIT waits for the writes,
 * so that it can never commit the earlier ones without the last. With `guard` (an
 * optimistic batch, which sent nothing yet), BEGIN and the guard go first in the same
 * round trip, and the answer is the transaction's id as the guard gave it, or 'stale'
 * when the guard failed the transaction (it committed nothing); null without a guard.
 * `onId` hears the transaction's id (null: not known) as soon as it is, before the
 * COMMIT's answer: without a guard once the writes are sent, with one when the guard answers.
 */
export async function sendCommit(
  client: pg.PoolClient,
  db: Queryable,
  batch: PgBatch,
  guard: readonly KnownRow[] | null,
  hints: string[],
  onId: (xid: string | null) => void,
): Promise<string | null | 'stale'> {
  const alone = batch.sentWrites;
  if (alone) await batch.flush(hints);
  const sent = together(client, () => {
    const begun = guard ? client.query('BEGIN') : Promise.resolve();
    const checked = guard ? db.query<{ xid: string }>(GUARD_SQL, [guard.map((r) => r.stream.id), guard.map((r) => r.version)]) : null;
    checked?.then(
      (answer) => onId(answer.rows[0]!.xid),
      () => onId(null),
    );
    const written = alone ? Promise.resolve() : batch.flush(hints);
    return [begun, written, checked ?? Promise.resolve(null), client.query('COMMIT')] as const;
  });
  // After the flush, which takes the batch's writes as its rows (PgBatch.committedRows).
  if (!guard) onId(batch.transactionId);
  batch.roundTrips += alone ? 1 : 0;
  const outcomes = await Promise.allSettled(sent);
  const [, , xid, commit] = outcomes;
  if (guard && isGuardFailure(xid) && commit.status === 'fulfilled' && commit.value.command === 'ROLLBACK') return 'stale';
  // A statement the server refused rolled the transaction back (its COMMIT answers ROLLBACK).
  for (const outcome of outcomes) if (outcome.status === 'rejected' && outcome.reason instanceof pg.DatabaseError) throw outcome.reason;
  // The connection failed once COMMIT was sent: the batch may or may not have applied.
  for (const outcome of outcomes) if (outcome.status === 'rejected') throw new CommitOutcomeUnknownError(outcome.reason);
  const tag = (commit as PromiseFulfilledResult<pg.QueryResult>).value.command;
  if (tag !== 'COMMIT') throw new Error(`invariant: COMMIT answered ${tag}`);
  return (xid as PromiseFulfilledResult<{ rows: Array<{ xid: string }> } | null>).value?.rows[0]!.xid ?? null;
}
