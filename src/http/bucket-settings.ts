/**
 * Bucket settings as requests see them (core/bucket-settings.ts is what they mean): read
 * from the bucket's row, which every node sharing a store reads, and kept for
 * BUCKET_SETTINGS_CACHE_MS so that anonymous reads of a public bucket and creates in a
 * limited one do not query the store each time. A change made through this node is seen
 * at once here (forget); other nodes see it within BUCKET_SETTINGS_CACHE_MS.
 */
import type { BucketSettings } from '../core/bucket-settings.js';
import type { Store } from '../storage/store.js';

export const BUCKET_SETTINGS_CACHE_MS = 1000;
/** Anonymous requests choose the bucket names looked up: the cache never grows past this. */
const MAX_CACHED_BUCKETS = 10_000;

type Lookup = (bucket: string) => Promise<BucketSettings | undefined>;

export class BucketSettingsCache {
  private readonly entries = new Map<string, { atMs: number; settings: BucketSettings | undefined }>();

  constructor(
    private readonly lookup: Lookup,
    private readonly now: () => number,
  ) {}

  static of(store: Store, now: () => number): BucketSettingsCache {
    return new BucketSettingsCache((bucket) => store.bucketSettings(bucket), now);
  }

  /** A bucket's settings; undefined for one without any, or that does not exist. */
  async get(bucket: string): Promise<BucketSettings | undefined> {
    const nowMs = this.now();
    const kept = this.entries.get(bucket);
    if (kept !== undefined && nowMs - kept.atMs < BUCKET_SETTINGS_CACHE_MS) return kept.settings;
    const settings = await this.lookup(bucket);
    if (this.entries.size >= MAX_CACHED_BUCKETS) this.entries.clear();
    this.entries.set(bucket, { atMs: nowMs, settings });
    return settings;
  }

  /** Drops what is kept of a bucket, after a change of its settings or its deletion through this node. */
  forget(bucket: string): void {
    this.entries.delete(bucket);
  }
}
