/** Bucket rules: create is idempotent; a bucket that holds streams cannot be deleted. */
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import { notFound } from './stream.js';

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

/** `heldStreams` counts every stream row in the bucket, including ones kept for forks. */
export function decideDeleteBucket(existing: BucketState | undefined, heldStreams: number): BucketDeleteOutcome {
  if (!existing) return { kind: 'rejected', error: notFound('bucket') };
  if (heldStreams > 0) {
    return {
      kind: 'rejected',
      error: protocolError('BUCKET_NOT_EMPTY', `the bucket still holds ${heldStreams} stream(s); delete them first`),
    };
  }
  return { kind: 'deleted' };
}
