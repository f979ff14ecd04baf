/**
 * Group commit shared by the engines: commands queued during one turn of the event loop
 * run together in one transaction with one durable commit. A command's promise resolves
 * only after that commit; if the commit fails, every command of the batch is refused
 * with STORAGE_UNAVAILABLE and none of them applied.
 */
import { DEFAULT_PRODUCER_SETTINGS, type ProducerSettings, type StreamState } from '../core/types.js';
import { protocolError } from '../protocol/errors.js';
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
 * Thrown by an engine when storage itself failed beneath a command (disk full, I/O
 * error, the transaction lost). The batch's transaction can no longer be trusted, so the
 * whole batch is abandoned and refused with STORAGE_UNAVAILABLE, rather than the command
 * alone failing while the others commit.
 */
export class StorageFailure extends Error {
  constructor(override readonly cause: unknown) {
    super(`storage failed: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

/** Thrown to a command whose own step failed on an invariant; the rest of the batch commits. */
export class CommandFailedError extends Error {
  readonly protocol = protocolError('INTERNAL', 'the server failed to process the request');
  constructor(override readonly cause: unknown) {
    super(`command failed: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

/** Most commands a batch takes; the rest wait for the next one. */
const MAX_BATCH_COMMANDS = 1024;

export abstract class BatchedStore implements Store {
  protected readonly settings: ProducerSettings;
  protected readonly now: () => number;
  private queue: Pending[] = [];
  private scheduled = false;
  private listeners = new Set<(events: CommitEvent[]) => void>();
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
   * Runs `body` so that a throw undoes only what `body` did. When the storage fails
   * beneath it, throws StorageFailure instead, which abandons the whole batch.
   */
  protected abstract atomically<T>(txn: Txn, body: () => T): T;
  /** Applies pending TTL renewals inside the batch transaction. */
  protected abstract storeTouches(txn: Txn, touches: Map<number, number>): void;

  abstract getStream(name: string): Promise<StreamState | undefined>;
  abstract readRange(stream: StreamState, from: number, maxBytes: number): Promise<Buffer>;
  abstract chunkAt(stream: StreamState, position: number): Promise<{ start: number; data: Buffer } | null>;
  abstract getBucket(id: string): Promise<BucketInfo | undefined>;
  abstract listStreams(bucket: string, prefix: string, after: string | null, limit: number): Promise<StreamListing>;
  protected abstract closeEngine(): void;

  run<K extends CommandName>(kind: K, input: StoreCommands[K]['input']): Promise<StoreCommands[K]['output']> {
    if (this.closed) return Promise.reject(new StorageUnavailableError(new Error('store is closed')));
    return new Promise((resolve, reject) => {
      this.queue.push({ kind, input, resolve: resolve as (v: unknown) => void, reject });
      this.schedule();
    });
  }

  touch(stream: StreamState, nowMs: number): void {
    if (stream.config.ttlSeconds === null) return;
    const previous = this.pendingTouches.get(stream.id) ?? 0;
    if (nowMs > previous) this.pendingTouches.set(stream.id, nowMs);
  }

  onCommit(listener: (events: CommitEvent[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.flush();
    this.closed = true;
    this.closeEngine();
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    if (this.queue.length === 0 && this.pendingTouches.size === 0) return;
    const batch = this.queue.splice(0, MAX_BATCH_COMMANDS);
    if (this.queue.length > 0) this.schedule();
    const outcomes: Array<{ ok: true; value: unknown } | { ok: false; error: unknown }> = [];
    let events: CommitEvent[] = [];
    const touches = new Map(this.pendingTouches);
    try {
      this.transact((txn) => {
        outcomes.length = 0;
        if (touches.size > 0) this.storeTouches(txn, touches);
        const executor = new Executor(txn, this.settings, this.now());
        for (const op of batch) outcomes.push(this.runOne(txn, executor, op));
        events = [...executor.events.values()];
      });
    } catch (error) {
      const refusal = new StorageUnavailableError(error);
      for (const op of batch) op.reject(refusal);
      return;
    }
    for (const [id, at] of touches) if (this.pendingTouches.get(id) === at) this.pendingTouches.delete(id);
    batch.forEach((op, i) => {
      const result = outcomes[i]!;
      if (result.ok) op.resolve(result.value);
      else op.reject(result.error);
    });
    if (events.length > 0) for (const listener of this.listeners) listener(events);
  }

  private runOne(txn: Txn, executor: Executor, op: Pending): { ok: true; value: unknown } | { ok: false; error: unknown } {
    try {
      const value = this.atomically(txn, () => executor.run(op.kind, op.input as never));
      return { ok: true, value };
    } catch (error) {
      // A storage failure aborts the batch's transaction; only rule failures stay local.
      if (error instanceof StorageFailure) throw error;
      return { ok: false, error: new CommandFailedError(error) };
    }
  }
}
