/**
 * The one storage interface. Writes are commands queued into batches; each batch runs
 * every command's load-decide-apply step inside one transaction and resolves the
 * commands' promises only after that transaction is durable. Reads see committed state
 * only.
 */
import type { PutAttrsOutcome } from '../core/attrs.js';
import type { RetentionPolicy } from '../core/retention-policy.js';
import type { PublishSnapshotOutcome, PublishSnapshotRequest, RetentionOutcome, RetentionRequest } from '../core/snapshot.js';
import type { BucketCreateOutcome, BucketDeleteOutcome, BucketSettingsOutcome, BucketState } from '../core/bucket.js';
import type { BucketSettings, BucketSettingsChange } from '../core/bucket-settings.js';
import type { CreateOutcome, CreateRequest } from '../core/create.js';
import type { DeleteDecision } from '../core/stream.js';
import type { LinkView, SubscriptionState } from '../core/subscription-types.js';
import type { SubscriptionCommands } from './subscription-steps.js';
import type { TransactionOutcome } from '../core/transaction.js';
import type { AppendOutcome, AppendRequest, ProducerRecord, ProducerSettings, StreamState } from '../core/types.js';

/** What /metrics and /stats show of a cold tier (storage/cold/). */
export interface ColdTierStats {
  /** Stream bytes held in object storage (a dropped stream's until the sweep removes its objects). */
  coldBytes: number;
  /** Bytes of streams held in the hot store, as the uploader's last pass counted them. */
  hotBytes: number;
  uploads: number;
  uploadedBytes: number;
  uploadFailures: number;
  /** Sealed bytes still hot, awaiting upload (the 507 limit reads it). */
  uploadLagBytes: number;
  sweptObjects: number;
  /** Objects fetched for reads, and the seconds they took in all. */
  coldFetches: number;
  coldFetchSeconds: number;
  cacheHits: number;
  cacheMisses: number;
}

/**
 * Where one stream's own history stands between the tiers (`{stream}/stats`): `[start, end)`
 * is in object storage, from `end` to the tail in the hot store. Segments wholly below the
 * earliest offset (trimmed, awaiting the sweep) are not counted; `start` is clipped to it.
 */
export interface StreamColdRange {
  /** Equal when no segment holds any of the stream's retained history. */
  start: number;
  end: number;
  segments: number;
  /** The segments' objects' size in the store. */
  objectBytes: number;
}

export type DeleteOutcome = Exclude<DeleteDecision, { kind: 'dropped' }> | { kind: 'dropped' };

export interface StoreCommands extends SubscriptionCommands {
  createBucket: { input: { id: string }; output: BucketCreateOutcome };
  deleteBucket: { input: { id: string }; output: BucketDeleteOutcome };
  /** Applies an admin's change to a bucket's settings (core/bucket-settings.ts), read and written in one transaction. */
  setBucketSettings: { input: { id: string; change: BucketSettingsChange }; output: BucketSettingsOutcome };
  createStream: { input: CreateRequest; output: CreateOutcome };
  /** `bucketRetention`: the default retention policy of the stream's bucket, as the caller knows it (core/retention-policy.ts). */
  append: { input: { name: string; request: AppendRequest; bucketRetention?: RetentionPolicy }; output: AppendOutcome };
  /** A group transaction: every append applies, in order, or none does (core/transaction.ts). */
  appendTransaction: { input: { operations: Array<{ name: string; request: AppendRequest; bucketRetention?: RetentionPolicy }> }; output: TransactionOutcome };
  deleteStream: { input: { name: string; incarnation: string | null }; output: DeleteOutcome };
  /** Collect expired streams; answers how many were dropped or soft-deleted. */
  expireStreams: { input: { limit: number }; output: { expired: number } };
  /** Applies age limits to streams whose oldest time mark is due (core/retention-policy.ts); answers how many were cut. */
  trimAged: { input: { limit: number }; output: { trimmed: number } };
  publishSnapshot: { input: { name: string; request: PublishSnapshotRequest; body: Buffer }; output: PublishSnapshotOutcome };
  setRetention: { input: { name: string; request: RetentionRequest }; output: RetentionOutcome };
  putAttrs: { input: { name: string; attrs: string | null; incarnation: string | null }; output: PutAttrsOutcome };
}

export type CommandName = keyof StoreCommands;
export type Command = { [K in CommandName]: { kind: K; input: StoreCommands[K]['input'] } }[CommandName];

/** What a committed batch changed, for the live layer. */
export interface CommitEvent {
  name: string;
  streamId: number;
  /** The stream after the batch; undefined when it was dropped. */
  stream: StreamState | undefined;
}

export interface BucketInfo extends BucketState {
  streamCount: number;
}

export interface BucketListing {
  buckets: BucketInfo[];
  /** Present when more buckets follow: pass as `after` to continue. */
  nextAfter: string | null;
}

/** What the store holds, for metrics and `rill stats`. */
/** What the streams `totals` counts hold (Store.heldTotals). */
export interface HeldTotals {
  bytes: number;
  messages: number;
}

export interface StoreTotals {
  buckets: number;
  /** Streams not deleted (those past their expiry but not yet collected included). */
  streams: number;
  producers: number;
}

/**
 * Told of every batch (ops/metrics.ts implements it). Called once per batch, never per
 * command, so that measuring costs the append path next to nothing.
 */
export interface StorageObserver {
  /** A batch of `commands` ran and committed in `commitSeconds`. */
  batchCommitted(commands: number, commitSeconds: number): void;
  /**
   * A committed batch became durable `waitSeconds` after its COMMIT, having appended this
   * much. Optional: only when some observer has it does a batch add up its appends.
   */
  batchDurable?(waitSeconds: number, appendedBytes: number, appendedMessages: number): void;
  /** A batch failed to commit: the storage failed, and its commands were refused. */
  batchRefused(): void;
}

export interface StreamListing {
  names: string[];
  /** Present when more streams follow: pass as `after` to continue. */
  nextAfter: string | null;
}

export interface ProducerListing {
  /** In producer id order, compared as UTF-8 bytes (as SQLite's BINARY and PostgreSQL's "C" do). */
  producers: ProducerRecord[];
  /** Present when more records follow: pass as `after` to continue. */
  nextAfter: string | null;
}

/**
 * What an engine shared by many nodes tells the live layer about commits made on other
 * nodes. Hints may be lost; the versions are the truth to check them against.
 */
export interface RemoteCommits {
  /**
   * Calls `listener` with the names of streams another node committed changes to, or with
   * null when hints may have been missed (the hint channel reconnected): then every
   * stream a reader waits on must be looked at again.
   */
  onHint(listener: (names: string[] | null) => void): () => void;
  /** A token per stored stream among `names`, changed by every commit that changes what its readers see. */
  versions(names: string[]): Promise<Map<string, string>>;
}

export interface StoreOptions {
  producers: ProducerSettings;
  /** Clock, injectable so tests can move time. */
  nowMs?: () => number;
}

/** Reads of subscription state outside a batch, for the service, GET and listings. */
export interface SubscriptionReads {
  getSubscription(key: string): Promise<SubscriptionState | undefined>;
  /** Subscriptions whose key starts with `scope + '/'` (every one when null), in key order after `afterKey`. */
  listSubscriptions(scope: string | null, afterKey: string | null, limit: number): Promise<SubscriptionState[]>;
  /** A subscription's links in path order after `afterPath`, with their streams' tails. */
  subscriptionLinks(subKey: string, afterPath: string | null, limit: number): Promise<LinkView[]>;
  /** Every (stream, subscription) membership, in stream key order after `after`, for the service's index of linked streams. */
  linkIndex(after: { stream: string; subKey: string } | null, limit: number): Promise<Array<{ stream: string; subKey: string }>>;
  /**
   * Keys of subscriptions the server must act on at `nowMs`: a webhook delivery due, a
   * lease expired, or a linked stream with unacknowledged data and no wake in flight.
   */
  dueSubscriptions(nowMs: number, limit: number): Promise<string[]>;
  /** A small durable value (signing keys, the token secret). */
  getMeta(key: string): Promise<string | undefined>;
  /** Stores `value` only when the current value is `expected` (undefined: absent); answers whether it did. */
  compareAndSetMeta(key: string, expected: string | undefined, value: string): Promise<boolean>;
}

export interface Store extends SubscriptionReads {
  /** Batches, commands and database round trips so far, where an engine counts them (PostgreSQL: the bench reads them at stop). */
  readonly stats?: { batches: number; commands: number; roundTrips: number };

  run<K extends CommandName>(kind: K, input: StoreCommands[K]['input']): Promise<StoreCommands[K]['output']>;

  /** The committed state of a stream, including deleted or expired ones still stored. */
  getStream(name: string): Promise<StreamState | undefined>;
  /**
   * The stream's bytes `[from, from + maxBytes)`, clipped to its tail, following fork
   * links into the history the stream inherits.
   */
  readRange(stream: StreamState, from: number, maxBytes: number): Promise<Buffer>;
  /**
   * The same bytes as `readRange`, as the stored appends they belong to (the first and
   * last may be cut), so callers can tell where each message starts.
   */
  readChunks(stream: StreamState, from: number, maxBytes: number): Promise<Array<{ start: number; data: Buffer }>>;
  /**
   * Optional: the bytes of `readChunks`, exactly `[from, min(tail, from + maxBytes))`, handed
   * to `write` in order as they load, for an engine whose loads arrive over time (PostgreSQL's
   * large windows): a response sends the first while the last arrive. Resolves once all are
   * handed on; a failure may come after some were. A store laid over an engine that reads
   * otherwise (the cold tier) must not pass the engine's on.
   */
  streamChunks?(stream: StreamState, from: number, maxBytes: number, write: (bytes: Buffer) => void): Promise<void>;
  /** The body of the stream's visible snapshot. */
  snapshotBody(stream: StreamState): Promise<Buffer | null>;
  /** The append that starts at or contains `position`, or null at the tail. */
  chunkAt(stream: StreamState, position: number): Promise<{ start: number; data: Buffer } | null>;
  getBucket(id: string): Promise<BucketInfo | undefined>;
  /**
   * A bucket's settings (undefined: none, or no such bucket), read by its key alone: what
   * a tokenless request costs is then the same whether the bucket exists or not.
   */
  bucketSettings(id: string): Promise<BucketSettings | undefined>;
  listStreams(bucket: string, prefix: string, after: string | null, limit: number): Promise<StreamListing>;
  /** Buckets in id order after `after`, each with its stream count. */
  listBuckets(after: string | null, limit: number): Promise<BucketListing>;
  /** Cheap: /metrics reads these on every scrape. */
  totals(): Promise<StoreTotals>;
  /**
   * Bytes and messages the streams `totals` counts hold, each from its earliest offset to
   * its tail (a fork's inherited history included). Messages are summed from the stream
   * states (core/records.ts, messagesHeld), never from their bodies. May cost a look-up
   * per stream: not for /metrics.
   */
  heldTotals(): Promise<HeldTotals>;
  /**
   * Bytes the bucket's streams hold themselves (--bucket-max-bytes): each undeleted stream
   * from its earliest offset, or a fork from its fork point, to its tail; a fork's inherited
   * history is its source's. May cost a look-up per stream of the bucket.
   */
  bucketHeldBytes(bucket: string): Promise<number>;
  /** Producer records the stream holds. */
  countProducers(stream: StreamState): Promise<number>;
  /** The stream's producer records with ids after `after` (every one when null), at most `limit`. */
  listProducers(stream: StreamState, after: string | null, limit: number): Promise<ProducerListing>;
  /** The cold tier's figures (storage/cold/tiered-store.ts), for a store that has one. */
  coldStats?(): ColdTierStats;
  /** The stream's range in the cold tier, for a store that has one. */
  coldRange?(stream: StreamState): Promise<StreamColdRange>;
  /** Stream-cache hits and misses since the store opened, and what it holds now, for engines that keep one. */
  cacheCounters?(): StreamCacheCounters;
  /** Tells `observer` (beside any others) of every batch from now on. */
  observe(observer: StorageObserver): void;
  /** A read renewed the stream's sliding TTL. Kept in memory, stored with the next batch. */
  touch(stream: StreamState, nowMs: number): void;

  onCommit(listener: (events: CommitEvent[]) => void): () => void;
  /** Present when other nodes write the same streams (see RemoteCommits). */
  readonly remote?: RemoteCommits;
  /**
   * The store cannot go on (an fsync failed, or an invariant broke after a commit); only a
   * restart, reading the disk, can tell what survived.
   */
  onFatal(listener: (error: unknown) => void): () => void;
  close(): Promise<void>;
}

/** A stream cache's lookups since the store opened, and the states it holds now with their estimated memory. */
export interface StreamCacheCounters {
  hits: number;
  misses: number;
  entries: number;
  bytes: number;
  /** Reads of a large append answered from memory, and the memory those appends hold (large-appends.ts). */
  largeAppendHits: number;
  largeAppendBytes: number;
}

/** The counters of a store without a stream cache. */
export const NO_CACHE: StreamCacheCounters = Object.freeze({ hits: 0, misses: 0, entries: 0, bytes: 0, largeAppendHits: 0, largeAppendBytes: 0 });

