/** Bucket rules: create is idempotent; a bucket that holds streams cannot be deleted. */
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import { decideExpire, notFound } from './stream.js';
import type { BucketSettings, BucketSettingsChange } from './bucket-settings.js';
import { applyBucketSettingsChange } from './bucket-settings.js';
import type { StreamState } from './types.js';

export interface BucketState {
  id: string;
  createdAtMs: number;
  /** What an admin set (PATCH /{bucket}); absent: none, the server-wide defaults apply. */
  settings?: BucketSettings;
}

export type BucketCreateOutcome = { kind: 'created'; bucket: BucketState } | { kind: 'exists'; bucket: BucketState };

export function decideCreateBucket(existing: BucketState | undefined, id: string, nowMs: number): BucketCreateOutcome {
  if (existing) return { kind: 'exists', bucket: existing };
  return { kind: 'created', bucket: { id, createdAtMs: nowMs } };
}

export type BucketSettingsOutcome = { kind: 'set'; bucket: BucketState } | { kind: 'rejected'; error: ProtocolError };

/** A settings change applies to a bucket that exists; the others are left as they were. */
export function decideBucketSettings(existing: BucketState | undefined, change: BucketSettingsChange): BucketSettingsOutcome {
  if (!existing) return { kind: 'rejected', error: notFound('bucket') };
  return { kind: 'set', bucket: { ...existing, settings: applyBucketSettingsChange(existing.settings, change) } };
}

export type BucketDeleteOutcome = { kind: 'deleted' } | { kind: 'rejected'; error: ProtocolError };

/**
 * A bucket may be deleted once it holds no stream a reader can see: its streams past
 * their expiry are collected with it (dropped, or soft-deleted while forks read them, as
 * the expiry sweep would), and streams already deleted but kept because forks (perhaps in
 * other buckets) still read their history stay behind for those forks, so the count
 * refused is the one its listing shows.
 *
 * `undeletedCount` counts the bucket's streams not deleted; `expired` are those of them
 * past their expiry.
 */
export function decideDeleteBucket(
  existing: BucketState | undefined,
  undeletedCount: number,
  expired: StreamState[],
  nowMs: number,
): { outcome: BucketDeleteOutcome; expire: StreamState[] } {
  if (!existing) return { outcome: { kind: 'rejected', error: notFound('bucket') }, expire: [] };
  const expire = expired.filter((s) => decideExpire(s, nowMs).kind !== 'none');
  const held = undeletedCount - expire.length;
  if (held > 0) {
    const error = protocolError('BUCKET_NOT_EMPTY', `the bucket still holds ${held} stream(s); delete them first`);
    return { outcome: { kind: 'rejected', error }, expire: [] };
  }
  return { outcome: { kind: 'deleted' }, expire };
}

/**
 * Most streams, subscriptions and retained bytes one bucket may hold (0: unlimited), so one
 * tenant's bucket cannot take the whole server: its disk, or every one of --max-subscriptions.
 */
export interface BucketLimits {
  maxStreams: number;
  maxSubscriptions: number;
  /** Bytes its streams retain (each stream's tail less its earliest offset, as stats counts them). */
  maxBytes: number;
}

export const NO_BUCKET_LIMITS: BucketLimits = { maxStreams: 0, maxSubscriptions: 0, maxBytes: 0 };

/** The refusal of a new stream or subscription in a bucket that holds `held` of them already, or null. */
export function bucketLimitRefusal(what: 'streams' | 'subscriptions', held: number, limits: BucketLimits): ProtocolError | null {
  if (what === 'streams') {
    if (limits.maxStreams === 0 || held < limits.maxStreams) return null;
    return protocolError('BUCKET_STREAM_LIMIT', `this bucket holds at most ${limits.maxStreams} streams (--bucket-max-streams, or the bucket's own limit); delete some first`);
  }
  if (limits.maxSubscriptions === 0 || held < limits.maxSubscriptions) return null;
  return protocolError('BUCKET_SUBSCRIPTION_LIMIT', `this bucket holds at most ${limits.maxSubscriptions} subscriptions (--bucket-max-subscriptions, or the bucket's own limit); delete some first`);
}

/**
 * The refusal of a write storing `adding` bytes in a bucket whose streams retain `held`, or
 * null. A write that would pass the limit is refused whole (507, as a full disk is): the
 * tenant frees room by deleting streams or letting retention trim them.
 */
export function bucketBytesRefusal(held: number, adding: number, limits: BucketLimits): ProtocolError | null {
  if (limits.maxBytes === 0 || adding === 0 || held + adding <= limits.maxBytes) return null;
  return protocolError(
    'BUCKET_BYTES_LIMIT',
    `this bucket retains at most ${limits.maxBytes} bytes (--bucket-max-bytes, or the bucket's own limit); it holds ${held} and this write adds ${adding}: delete or trim streams first`,
  );
}

/** The limits as `GET /{bucket}` shows them: null where there is none. */
export function bucketLimitsView(limits: BucketLimits): { maxStreams: number | null; maxSubscriptions: number | null; maxBytes: number | null } {
  return { maxStreams: limits.maxStreams || null, maxSubscriptions: limits.maxSubscriptions || null, maxBytes: limits.maxBytes || null };
}
