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
  'receipt_record_start',
  'receipt_record_next',
] as const;

/**
 * One value per column of PRODUCER_COLUMNS: a list of another length fails to compile.
 * The receipt's record range is null on streams without records, and on receipts stored
 * before rill kept record coordinates (whose stored lists end before it).
 */
export type ProducerValues = [
  string,
  number,
  number,
  number,
  number,
  0 | 1,
  string | null,
  number | null,
  number | null,
  string | null,
  number,
  number | null,
  number | null,
];

/** A row of `producers`: the stream's id, then the record's values. */
export type ProducerRow = [number, ...ProducerValues];

/**
 * `[streamId, ...producerValues(r)]` in one literal: every write of a record (SQLite's
 * held changes and upserts, PostgreSQL's bulk writes) takes this form, and the spread
 * copied the values a second time.
 */
export function producerRow(streamId: number, r: ProducerRecord): ProducerRow {
  const records = r.receipt.records;
  return [
    streamId,
    r.id,
    r.epoch,
    r.lastSeq,
    r.receipt.start,
    r.receipt.next,
    r.receipt.closed ? 1 : 0,
    r.digest,
    r.claim.closedEpoch,
    r.claim.closedSeq,
    r.claim.digest,
    r.lastSeenMs,
    records?.start ?? null,
    records?.next ?? null,
  ];
}

export function producerValues(r: ProducerRecord): ProducerValues {
  return producerRow(0, r).slice(1) as ProducerValues;
}

export function producerFromValues(v: ProducerValues): ProducerRecord {
  const [id, epoch, lastSeq, start, next, closed, digest, closedEpoch, closedSeq, claimDigest, lastSeenMs, recordStart, recordNext] = v;
  const records = recordStart === null || recordStart === undefined || recordNext === null || recordNext === undefined ? null : { start: recordStart, next: recordNext };
  return {
    id,
    epoch,
    lastSeq,
    receipt: { start, next, closed: closed === 1, records },
    digest,
    claim: { closedEpoch, closedSeq, digest: claimDigest },
    lastSeenMs,
  };
}
