/** The stored form of a producer record, shared by the SQL engines. */
import type { ProducerRecord } from '../core/types.js';

/**
 * The columns of `producers` after `stream_id`, in the order producerValues gives them:
 * the one flat form of a record, for the table's statements and the stored changes.
 */
export const PRODUCER_COLUMNS = [
  'producer_id',
  'epoch',
  'last_seq',
  'receipt_start',
  'receipt_next',
  'receipt_closed',
  'digest',
  'claim_closed_epoch',
  'claim_closed_seq',
  'claim_digest',
  'last_seen_ms',
] as const;

/** One value per column of PRODUCER_COLUMNS: a list of another length fails to compile. */
export type ProducerValues = [string, number, number, number, number, 0 | 1, string | null, number | null, number | null, string | null, number];

export function producerValues(r: ProducerRecord): ProducerValues {
  return [r.id, r.epoch, r.lastSeq, r.receipt.start, r.receipt.next, r.receipt.closed ? 1 : 0, r.digest, r.claim.closedEpoch, r.claim.closedSeq, r.claim.digest, r.lastSeenMs];
}

export function producerFromValues(v: ProducerValues): ProducerRecord {
  const [id, epoch, lastSeq, start, next, closed, digest, closedEpoch, closedSeq, claimDigest, lastSeenMs] = v;
  return { id, epoch, lastSeq, receipt: { start, next, closed: closed === 1 }, digest, claim: { closedEpoch, closedSeq, digest: claimDigest }, lastSeenMs };
}
