/**
 * Group commit shared by the engines: commands queued during one turn of the event loop
 * run together in one transaction with one durable commit. A command's promise resolves
 * only after that commit; if the commit fails, every command of the batch is refused
 * with STORAGE_UNAVAILABLE and none of them applied.
 */
import { touched } from '../core/stream.js';
import { DEFAULT_PRODUCER_SETTINGS, type ProducerSettings, type StreamState } from '../core/types.js';
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import { Executor, type Txn } from './executor.js';
import type { BucketInfo, CommandName, CommitEvent, Store, StoreCommands, StoreOptions, StreamListing } from './store.js';

interface Pending {
  kind: CommandName;
  input: unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** Thrown to a command whose batch could not be committed. */
export class StorageUnavailableError extends Error {
  readonly protocol = protocolError('STORAGE_UNAVAILABLE', 'storage is unavailable; the write was not applied', { retryAfterSeconds: 1 });
  constructor(override readonly cause: unknown) {
    super(`storage unavailable: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

/**
 * A read of a stream whose name keeps losing stored bytes (dropped and recreated, or
 * trimmed) faster than commits become durable: each such commit makes its readers wait
 * one more fsync, and past a bound they are refused rather than held without end.
 */
export class ReadNotSettledError extends Error {
  readonly protocol = protocolError('UNAVAILABLE', 'the stream is being removed or trimmed faster than reads can settle; retry later', {
    retryAfterSeconds: 1,
  });
  constructor(name: string, waits: number) {
    super(`read of ${name} not settled after ${waits} waits for removals to become durable`);
  }
}

/**
 * The storage itself failed inside a batch (disk full, I/O error, a transaction the
 * database abandoned). The whole batch is refused with STORAGE_UNAVAILABLE and applies
 * nothing, rather than the one command failing while the others commit.
 */
export class StorageFailure extends Error {
  constructor(override readonly cause: unknown) {
    super(`storage failed: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

/**
 * The storage could not make a committed batch durable (an fsync failed). Whether its
 * writes survive is unknown until the server restarts and reads the disk, so the store
 * refuses everything from then on.
 */
export class DurabilityLostError extends Error {
  readonly protocol = protocolError('STORAGE_UNAVAILABLE', 'storage failed while making the write durable; its outcome is unknown: retry it unchanged', {
    retryAfterSeconds: 1,
  });
  constructor(override readonly cause: unknown) {
    super(`durability lost: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

/** Thrown to a command whose own step failed on an invariant; the rest of the batch commits. */
export class CommandFailedError extends Error {
  readonly protocol = protocolError('INTERNAL', 'the server failed to process the request');
  constructor(override readonly cause: unknown) {
    super(`command failed: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

/** The typed answer a storage error carries; null for any other error. */
export function storageRefusal(error: unknown): ProtocolError | null {
  const typed =
    error instanceof StorageUnavailableError ||
    error instanceof CommandFailedError ||
    error instanceof DurabilityLostError ||
    error instanceof ReadNotSettledError;
  return typed ? error.protocol : null;
}

/** Most commands a batch takes; the rest wait for the next one. */
const MAX_BATCH_COMMANDS = 1024;

export abstract class BatchedStore implements Store {
  protected readonly settings: ProducerSettings;
  protected readonly now: () => number;
  private queue: Pending[] = [];
  private scheduled = false;
  /** The queue waits for `commitHeld` (see `mayCommit`). */
  private queueHeld = false;
  private listeners = new Set<(events: CommitEvent[]) => void>();
  private fatalListeners = new Set<(error: unknown) => void>();
  private fatal: unknown = undefined;
  /** Batches committed and waiting to be durable. */
  private settling = 0;
  private settled: Array<() => void> = [];
  /** Sliding-TTL renewals from reads, stored with the next batch. */
  protected readonly pendingTouches = new Map<number, number>();
  protected closed = false;

  constructor(options: StoreOptions) {
    this.settings = options.producers ?? DEFAULT_PRODUCER_SETTINGS;
    this.now = options.nowMs ?? Date.now;
  }

  /** Runs `body` in one transaction and makes it durable, or throws having applied nothing. */
  protected abstract transact(body: (txn: Txn) => void): void;

  /**
   * Calls `done` once everything committed so far is durable, or with the error that
   * made that impossible. Engines whose commit is already durable call it at once.
   */
  protected whenDurable(done: (error?: unknown) => void): void {
    done();
  }

  /**
   * False while a commit now would only wait for the durable flush to have room: the
   * queue then waits too, and the engine calls `commitHeld` when there is room, so that
   * what arrives meanwhile joins one batch instead of making commits of its own.
   */
  protected mayCommit(): boolean {
    return true;
  }

  /**
   * The durable flush has room again: what waited for it commits at the end of this
   * turn of the event loop (so the answers the ended flush released go out first).
   */
  protected commitHeld(): void {
    if (!this.queueHeld) return;
    this.queueHeld = false;
    this.schedule();
  }

  /** True when an error thrown inside a batch is the storage failing, not a command's own fault. */
  protected isStorageFault(_error: unknown): boolean {
    return false;
  }

  abstract getStream(name: string): Promise<StreamState | undefined>;
  abstract readRange(stream: StreamState, from: number, maxBytes: number): Promise<Buffer>;
  abstract readChunks(stream: StreamState, from: number, maxBytes: number): Promise<Array<{ start: number; data: Buffer }>>;
  abstract snapshotBody(stream: StreamState): Promise<Buffer | null>;
  abstract chunkAt(stream: StreamState, position: number): Promise<{ start: number; data: Buffer } | null>;
  abstract getBucket(id: string): Promise<BucketInfo | undefined>;
  abstract listStreams(bucket: string, prefix: string, after: string | null, limit: number): Promise<StreamListing>;
  protected abstract closeEngine(): void;

  run<K extends CommandName>(kind: K, input: StoreCommands[K]['input']): Promise<StoreCommands[K]['output']> {
    if (this.fatal !== undefined) return Promise.reject(new StorageUnavailableError(this.fatal));
    if (this.closed) return Promise.reject(new StorageUnavailableError(new Error('store is closed')));
    return new Promise((resolve, reject) => {
      this.queue.push({ kind, input, resolve: resolve as (v: unknown) => void, reject });
      this.schedule();
    });
  }

  touch(stream: StreamState, nowMs: number): void {
    if (stream.config.ttlSeconds === null) return;
    this.touchAt(stream.id, nowMs);
  }

  private touchAt(streamId: number, nowMs: number): void {
    const previous = this.pendingTouches.get(streamId) ?? 0;
    if (nowMs > previous) this.pendingTouches.set(streamId, nowMs);
  }

  /** A loaded stream as reads see it: with its pending TTL renewal, as core applies it. */
  protected withPendingTouch(stream: StreamState): StreamState {
    const touchedAtMs = this.pendingTouches.get(stream.id);
    return touchedAtMs === undefined ? stream : touched(stream, touchedAtMs);
  }

  onCommit(listener: (events: CommitEvent[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The store cannot go on (durability lost, or a broken invariant after a commit); the process should restart. */
  onFatal(listener: (error: unknown) => void): () => void {
    this.fatalListeners.add(listener);
    return () => this.fatalListeners.delete(listener);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    // Every queued command gets its answer: a batch takes at most MAX_BATCH_COMMANDS.
    // A failed batch rejects its commands, so the queue always shrinks.
    do this.flush();
    while (this.queue.length > 0);
    this.closed = true;
    if (this.settling > 0) await new Promise<void>((resolve) => this.settled.push(resolve));
    this.closeEngine();
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      if (this.mayCommit()) this.flush();
      else this.queueHeld = true;
    });
  }

  private flush(): void {
    if (this.queue.length === 0 && this.pendingTouches.size === 0) return;
    const batch = this.queue.splice(0, MAX_BATCH_COMMANDS);
    if (this.queue.length > 0) this.schedule();
    // Taken out of the pending map so that, inside the transaction, streams load as
    // stored and core decides whether each renewal applies.
    const touches = new Map(this.pendingTouches);
    this.pendingTouches.clear();
    const failed = new Map<Pending, CommandFailedError>();
    let committed: { outcomes: Map<Pending, unknown>; events: CommitEvent[] } | null = null;
    // A command that throws (a broken invariant) aborts the transaction; the batch then
    // runs again without it, so one bad command never fails the others.
    while (committed === null) {
      try {
        committed = this.runBatch(batch, failed, touches);
      } catch (error) {
        if (error instanceof CommandFault) {
          failed.set(error.op, new CommandFailedError(error.cause));
          continue;
        }
        for (const [id, at] of touches) this.touchAt(id, at);
        const refusal = new StorageUnavailableError(error);
        for (const op of batch) op.reject(failed.get(op) ?? refusal);
        return;
      }
    }
    this.settling++;
    const done = committed;
    this.whenDurable((error) => this.settle(batch, failed, done, error));
  }

  /** Answers a committed batch once it is durable; only then do readers hear of it. */
  private settle(batch: Pending[], failed: Map<Pending, unknown>, committed: { outcomes: Map<Pending, unknown>; events: CommitEvent[] }, error?: unknown): void {
    if (error !== undefined) this.failFatally(error);
    for (const op of batch) {
      const failure = failed.get(op);
      if (failure) op.reject(failure);
      else if (error !== undefined) op.reject(new DurabilityLostError(error));
      else op.resolve(committed.outcomes.get(op));
    }
    if (error === undefined && committed.events.length > 0) for (const listener of this.listeners) listener(committed.events);
    if (--this.settling === 0) for (const resolve of this.settled.splice(0)) resolve();
  }

  /** Nothing more can be trusted to work (durability lost, or a broken invariant after a commit). */
  protected failFatally(error: unknown): void {
    if (this.fatal !== undefined) return;
    this.fatal = error;
    for (const listener of this.fatalListeners) listener(error);
  }

  private runBatch(batch: Pending[], failed: Map<Pending, unknown>, touches: Map<number, number>) {
    const outcomes = new Map<Pending, unknown>();
    let events: CommitEvent[] = [];
    this.transact((txn) => {
      outcomes.clear();
      const executor = new Executor(txn, this.settings, this.now());
      executor.storeTouches(touches);
      for (const op of batch) {
        if (failed.has(op)) continue;
        try {
          outcomes.set(op, executor.run(op.kind, op.input as never));
        } catch (cause) {
          if (cause instanceof StorageFailure || this.isStorageFault(cause)) throw new StorageFailure(cause);
          throw new CommandFault(op, cause);
        }
      }
      events = [...executor.events.values()];
    });
    return { outcomes, events };
  }
}

/** A command's own step threw inside the batch transaction. */
class CommandFault extends Error {
  constructor(
    readonly op: Pending,
    override readonly cause: unknown,
  ) {
    super('command failed inside a batch');
  }
}
