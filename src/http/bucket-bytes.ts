/**
 * --bucket-max-bytes (or a bucket's own maxBytes): a write is refused with 507
 * BUCKET_BYTES_LIMIT when it would take the bytes its bucket's streams retain past the
 * limit; the rule is core/bucket.ts (bucketBytesRefusal).
 *
 * Counting a bucket's bytes costs a look-up per stream (Store.bucketHeldBytes), so each node
 * keeps, for each limited bucket it writes to: the count it last read (read again once older
 * than BUCKET_BYTES_READ_MS), the bytes it stored since, and the bytes of its writes under
 * way. A write passes when those and its own bytes fit. A write that finishes while the
 * count is being read is kept as stored since, so it may be counted twice until the next
 * read: the error is on the side of refusing, never of passing the limit. Bytes freed
 * elsewhere (retention, another node's deletes) are seen at the next read; a delete
 * through this node makes the next write read again. Nodes sharing a store see each
 * other's writes only when they read, so together they may pass a limit by what the
 * others wrote within BUCKET_BYTES_READ_MS.
 */
import { bucketBytesRefusal, type BucketLimits } from '../core/bucket.js';
import { effectiveBucketLimits } from '../core/bucket-settings.js';
import type { ProtocolError } from '../protocol/errors.js';
import type { Store } from '../storage/store.js';
import type { BucketSettingsCache } from './bucket-settings.js';

export const BUCKET_BYTES_READ_MS = 1000;
/** Bucket names come from requests: the counts kept never grow past this. */
const MAX_COUNTED_BUCKETS = 10_000;

/** Room held for a write: settled once with the bytes it stored (0 when refused or a duplicate). */
interface BytesHold {
  settle(storedBytes: number): void;
}

const NOTHING_HELD: BytesHold = { settle() {} };
/** What a write that holds nothing reports its stored bytes to. */
const IGNORED = (): void => {};

interface BucketCount {
  /** The bucket's bytes as last read from the store. */
  read: number;
  /** When that read finished; -Infinity until the first, or after a delete through this node. */
  readAtMs: number;
  /** Bytes this node stored in the bucket since the read began. */
  since: number;
  /** Bytes of this node's writes under way in the bucket. */
  underWay: number;
  reading: Promise<void> | null;
}

export class BucketBytes {
  private readonly counts = new Map<string, BucketCount>();

  constructor(
    private readonly store: Store,
    private readonly settings: BucketSettingsCache,
    private readonly serverLimits: BucketLimits,
    private readonly now: () => number,
  ) {}

  /** Holds room for a write of `bytes` into `bucket`, or answers its refusal. */
  private async hold(bucket: string | null, bytes: number): Promise<BytesHold | ProtocolError> {
    // The /v1 family is no tenant's bucket, and a write of no bytes retains none.
    if (bucket === null || bytes === 0) return NOTHING_HELD;
    const limits = effectiveBucketLimits(this.serverLimits, await this.settings.get(bucket));
    if (limits.maxBytes === 0) {
      // Not counted while unlimited: should a limit come back, the count is read again.
      this.forget(bucket);
      return NOTHING_HELD;
    }
    const count = await this.current(bucket);
    const refused = bucketBytesRefusal(count.read + count.since + count.underWay, bytes, limits);
    if (refused) return refused;
    count.underWay += bytes;
    let settled = false;
    return {
      settle(storedBytes) {
        if (settled) return;
        settled = true;
        count.underWay -= bytes;
        count.since += storedBytes;
      },
    };
  }

  /**
   * Runs `write` with room held for its `bytes` in `bucket`, or answers the refusal without
   * running it. `write` reports the bytes it stored (none for a refusal or a duplicate)
   * through `stored`; the hold is settled with them however `write` ends.
   */
  within<T>(bucket: string | null, bytes: number, write: (stored: (bytes: number) => void) => Promise<T>): Promise<T | ProtocolError> {
    // Nothing to hold (hold's first case): the write runs at once, without the two promises
    // and turns of the general case (every append of the /v1 family passes here).
    if (bucket === null || bytes === 0) return write(IGNORED);
    return this.withinBucket(bucket, bytes, write);
  }

  private async withinBucket<T>(bucket: string, bytes: number, write: (stored: (bytes: number) => void) => Promise<T>): Promise<T | ProtocolError> {
    const held = await this.hold(bucket, bytes);
    if ('code' in held) return held;
    let storedBytes = 0;
    try {
      return await write((n) => {
        storedBytes += n;
      });
    } finally {
      held.settle(storedBytes);
    }
  }

  /** After a delete through this node: the next write reads the bucket's bytes again. */
  forget(bucket: string): void {
    const count = this.counts.get(bucket);
    if (count) count.readAtMs = -Infinity;
  }

  private async current(bucket: string): Promise<BucketCount> {
    let count = this.counts.get(bucket);
    if (count === undefined) {
      // Holds under way keep their own reference: dropping the table only costs a read.
      if (this.counts.size >= MAX_COUNTED_BUCKETS) this.counts.clear();
      count = { read: 0, readAtMs: -Infinity, since: 0, underWay: 0, reading: null };
      this.counts.set(bucket, count);
    }
    if (this.now() - count.readAtMs >= BUCKET_BYTES_READ_MS) await (count.reading ??= this.readAgain(bucket, count));
    return count;
  }

  private async readAgain(bucket: string, count: BucketCount): Promise<void> {
    const sinceBefore = count.since;
    try {
      count.read = await this.store.bucketHeldBytes(bucket);
      count.since -= sinceBefore;
      count.readAtMs = this.now();
    } finally {
      count.reading = null;
    }
  }
}
