/** Bucket rules: create is idempotent; a bucket that holds streams cannot be deleted. */
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import { decideExpire, notFound } from './stream.js';
import type { StreamState } from './types.js';

export interface BucketState {
  id: string;
  createdAtMs: number;
}

export type BucketCreateOutcome = { kind: 'created'; bucket: BucketState } | { kind: 'exists'; bucket: BucketState };

export function decideCreateBucket(existing: BucketState | undefined, id: string, nowMs: number): BucketCreateOutcome {
  if (existing) return { kind: 'exists', bucket: existing };
  return { kind: 'created', bucket: { id, createdAtMs: nowMs } };
}

export type BucketDeleteOutcome = { kind: 'deleted' } | { kind: 'rejected'; error: ProtocolError };

/**
 * A bucket is held by its live streams and by deleted or expired ones that forks still
 * read (410). Expired streams that nothing reads are already gone to clients (404, left
 * out of counts and listings) and are collected with the bucket, so a bucket does not
 * stay undeletable until the expiry sweep reaches them.
 *
 * `rowCount` counts every stream row in the bucket; `expired` are its rows past their
 * expiry that are not yet deleted.
 */
export function decideDeleteBucket(
  existing: BucketState | undefined,
  rowCount: number,
  expired: StreamState[],
  nowMs: number,
): { outcome: BucketDeleteOutcome; collect: StreamState[] } {
  if (!existing) return { outcome: { kind: 'rejected', error: notFound('bucket') }, collect: [] };
  const collect = expired.filter((s) => decideExpire(s, nowMs).kind === 'dropped');
  const held = rowCount - collect.length;
  if (held > 0) {
    const error = protocolError('BUCKET_NOT_EMPTY', `the bucket still holds ${held} stream(s); delete them first`);
    return { outcome: { kind: 'rejected', error }, collect: [] };
  }
  return { outcome: { kind: 'deleted' }, collect };
}
