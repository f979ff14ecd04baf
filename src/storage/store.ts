/**
 * The one storage interface. Writes are commands queued into batches; each batch runs
 * every command's load-decide-apply step inside one transaction and resolves the
 * commands' promises only after that transaction is durable. Reads see committed state
 * only.
 */
import type { PutAttrsOutcome } from '../core/attrs.js';
import type { PublishSnapshotOutcome, PublishSnapshotRequest, RetentionOutcome, RetentionRequest } from '../core/snapshot.js';
import type { BucketCreateOutcome, BucketDeleteOutcome, BucketState } from '../core/bucket.js';
import type { CreateOutcome, CreateRequest } from '../core/create.js';
import type { DeleteDecision } from '../core/stream.js';
import type { AppendOutcome, AppendRequest, ProducerSettings, StreamState } from '../core/types.js';

export type DeleteOutcome = Exclude<DeleteDecision, { kind: 'dropped' }> | { kind: 'dropped' };

export interface StoreCommands {
  createBucket: { input: { id: string }; output: BucketCreateOutcome };
  deleteBucket: { input: { id: string }; output: BucketDeleteOutcome };
  createStream: { input: CreateRequest; output: CreateOutcome };
  append: { input: { name: string; request: AppendRequest }; output: AppendOutcome };
  deleteStream: { input: { name: string; incarnation: string | null }; output: DeleteOutcome };
  /** Collect expired streams; answers how many were dropped or soft-deleted. */
  expireStreams: { input: { limit: number }; output: { expired: number } };
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

export interface StreamListing {
  names: string[];
  /** Present when more streams follow: pass as `after` to continue. */
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

export interface Store {
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
  /** The body of the stream's visible snapshot. */
  snapshotBody(stream: StreamState): Promise<Buffer | null>;
  /** The append that starts at or contains `position`, or null at the tail. */
  chunkAt(stream: StreamState, position: number): Promise<{ start: number; data: Buffer } | null>;
  getBucket(id: string): Promise<BucketInfo | undefined>;
  listStreams(bucket: string, prefix: string, after: string | null, limit: number): Promise<StreamListing>;
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
