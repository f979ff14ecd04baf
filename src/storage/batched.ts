/**
 * Group commit shared by the engines: commands queued during one turn of the event loop
 * run together in one transaction with one durable commit. A command's promise resolves
 * only after that commit; if the commit fails, every command of the batch is refused
 * with STORAGE_UNAVAILABLE and none of them applied.
 */
import type { BucketSettings } from '../core/bucket-settings.js';
import { touched } from '../core/stream.js';
import type { LinkView, SubscriptionState } from '../core/subscription-types.js';
import { DEFAULT_PRODUCER_SETTINGS, type ProducerSettings, type StreamState } from '../core/types.js';
import { isJsonContentType } from '../protocol/content-type.js';
import { countJsonMessages } from '../protocol/json.js';
import type { DiskSpace } from './disk-space.js';
import {
  CommandFailedError,
  CommitOutcomeUnknownError,
  DurabilityLostError,
  InsufficientStorageError,
  StorageFailure,
  StorageUnavailableError,
} from './errors.js';
import { CommandRefused, Executor, type Txn } from './executor.js';
import { MissingState } from './missing.js';
import type {
  BucketInfo,
  BucketListing,
  Command,
  CommandName,
  CommitEvent,
  StorageObserver,
  Store,
  StoreCommands,
  StoreOptions,
  HeldTotals,
  ProducerListing,
  StoreTotals,
  StreamListing,
} from './store.js';

interface Pending {
  kind: CommandName;
  /** Typed by `kind` (see run); `never` lets a batch pass as the Command list it is. */
  input: never;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
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
  /**
   * Renewals taken into a batch that is not yet answered. Until it is, reads may see the
   * streams without them: an asynchronous engine's rows lack them until its COMMIT
   * returns (PostgreSQL commits over the network), and SQLite's readers see a stream as
   * it was before a commit still waiting for its fsync. So reads still apply them: a read
   * in that window would otherwise see a renewed stream as expired.
   */
  private readonly committingTouches = new Set<ReadonlyMap<number, number>>();
  protected closed = false;
  private readonly observers: StorageObserver[] = [];
  /** The observers that take what durable batches appended. */
  private readonly appendObservers: StorageObserver[] = [];

  constructor(options: StoreOptions) {
    this.settings = options.producers ?? DEFAULT_PRODUCER_SETTINGS;
    this.now = options.nowMs ?? Date.now;
  }

  /** Runs `body` in one transaction and makes it durable, or throws having applied nothing. */
  protected abstract transact(body: (txn: Txn) => void): void;

  /**
   * Engines over a networked database run a batch in an asynchronous transaction
   * instead: their Txn may stop a step with MissingState until it has loaded what the
   * step asked for. Given the batch's commands and the streams whose TTL reads renewed,
   * so that the engine can load what they name in a few round trips first. Resolves
   * once committed and durable, or throws having applied nothing.
   */
  protected transactAsync?: (commands: readonly Command[], streamIds: Iterable<number>, body: (txn: Txn) => Promise<void>) => Promise<void>;

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

  /** The engine's free-space limit on writes (disk-space.ts), if it has one. */
  protected diskSpace: DiskSpace | null = null;

  /** True when a batch failed because the storage ran out of space (answered 507, not 503). */
  protected isOutOfSpace(_error: unknown): boolean {
    return false;
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
  abstract bucketSettings(id: string): Promise<BucketSettings | undefined>;
  abstract listStreams(bucket: string, prefix: string, after: string | null, limit: number): Promise<StreamListing>;
  abstract listBuckets(after: string | null, limit: number): Promise<BucketListing>;
  abstract totals(): Promise<StoreTotals>;
  abstract heldTotals(): Promise<HeldTotals>;
  abstract bucketHeldBytes(bucket: string): Promise<number>;
  abstract countProducers(stream: StreamState): Promise<number>;
  abstract listProducers(stream: StreamState, after: string | null, limit: number): Promise<ProducerListing>;
  abstract getSubscription(key: string): Promise<SubscriptionState | undefined>;
  abstract listSubscriptions(scope: string | null, afterKey: string | null, limit: number): Promise<SubscriptionState[]>;
  abstract subscriptionLinks(subKey: string, afterPath: string | null, limit: number): Promise<LinkView[]>;
  abstract linkIndex(after: { stream: string; subKey: string } | null, limit: number): Promise<Array<{ stream: string; subKey: string }>>;
  abstract dueSubscriptions(nowMs: number, limit: number): Promise<string[]>;
  abstract getMeta(key: string): Promise<string | undefined>;
  abstract compareAndSetMeta(key: string, expected: string | undefined, value: string): Promise<boolean>;
  protected abstract closeEngine(): void | Promise<void>;

  run<K extends CommandName>(kind: K, input: StoreCommands[K]['input']): Promise<StoreCommands[K]['output']> {
    if (this.fatal !== undefined) return Promise.reject(new StorageUnavailableError(this.fatal));
    if (this.closed) return Promise.reject(new StorageUnavailableError(new Error('store is closed')));
    const noSpace = this.diskSpace?.admit(kind, input);
    if (noSpace) return Promise.reject(noSpace);
    return new Promise((resolve, reject) => {
      this.queue.push({ kind, input: input as never, resolve: resolve as (v: unknown) => void, reject });
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

  /** A loaded stream as reads see it: with its latest TTL renewal not yet stored, as core applies it. */
  protected withPendingTouch(stream: StreamState): StreamState {
    let touchedAtMs = this.pendingTouches.get(stream.id);
    for (const touches of this.committingTouches) {
      const at = touches.get(stream.id);
      if (at !== undefined && (touchedAtMs === undefined || at > touchedAtMs)) touchedAtMs = at;
    }
    return touchedAtMs === undefined ? stream : touched(stream, touchedAtMs);
  }

  observe(observer: StorageObserver): void {
    this.observers.push(observer);
    if (observer.batchDurable) this.appendObservers.push(observer);
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
    do this.commitQueued();
    while (this.queue.length > 0);
    this.closed = true;
    if (this.settling > 0) await new Promise<void>((resolve) => this.settled.push(resolve));
    await this.closeEngine();
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      if (this.mayCommit()) this.commitQueued();
      else this.queueHeld = true;
    });
  }

  /** Commits the queued commands (at most MAX_BATCH_COMMANDS) and the reads' TTL renewals as one batch. */
  private commitQueued(): void {
    if (this.queue.length === 0 && this.pendingTouches.size === 0) return;
    const batch = this.queue.splice(0, MAX_BATCH_COMMANDS);
    if (this.queue.length > 0) this.schedule();
    // Taken out of the pending map so that, inside the transaction, streams load as
    // stored and core decides whether each renewal applies.
    const touches = new Map(this.pendingTouches);
    this.pendingTouches.clear();
    // A synchronous engine's loads inside its transaction must see the rows as stored
    // (they go through withPendingTouch): it adds them once committed (see committed).
    if (this.transactAsync) this.committingTouches.add(touches);
    const work: BatchWork = { batch, touches, failed: new Map(), outcomes: new Map(), events: [], next: 0 };
    this.settling++;
    if (this.transactAsync) void this.commitAsync(work);
    else this.commitSync(work);
  }

  // A command that throws (a broken invariant) aborts the transaction; the batch then
  // runs again without it, so one bad command never fails the others.
  private commitSync(work: BatchWork): void {
    const startedMs = this.observers.length > 0 ? performance.now() : 0;
    for (;;) {
      try {
        this.transact((txn) => {
          const executor = this.startBatch(txn, work);
          if (this.runSteps(txn, executor, work, false)) throw new Error('invariant: a synchronous engine must not miss state');
          work.events = [...executor.events.values()];
        });
        break;
      } catch (error) {
        if (!this.dropFaulty(work, error)) return this.refuse(work, error);
      }
    }
    this.committed(work, startedMs);
  }

  /** As commitSync, for engines whose transaction may stop to load state (MissingState). */
  private async commitAsync(work: BatchWork): Promise<void> {
    const startedMs = this.observers.length > 0 ? performance.now() : 0;
    for (;;) {
      try {
        await this.transactAsync!(work.batch, work.touches.keys(), async (txn) => {
          const executor = this.startBatch(txn, work);
          for (let missing = this.runSteps(txn, executor, work, false); missing; missing = this.runSteps(txn, executor, work, true)) await missing.load();
          work.events = [...executor.events.values()];
        });
        break;
      } catch (error) {
        if (!this.dropFaulty(work, error)) return this.refuse(work, error);
      }
    }
    this.committed(work, startedMs);
  }

  /** The batch committed: measured (when observed), then answered once durable. */
  private committed(work: BatchWork, startedMs: number): void {
    if (!this.transactAsync) this.committingTouches.add(work.touches);
    const observers = this.observers;
    if (observers.length === 0) return this.whenDurable((error) => this.settle(work, error));
    const committedMs = performance.now();
    for (const observer of observers) observer.batchCommitted(work.batch.length, (committedMs - startedMs) / 1000);
    this.whenDurable((error) => {
      if (error === undefined && this.appendObservers.length > 0) observeAppends(this.appendObservers, work, (performance.now() - committedMs) / 1000);
      this.settle(work, error);
    });
  }

  private startBatch(txn: Txn, work: BatchWork): Executor {
    work.next = 0;
    work.outcomes.clear();
    return new Executor(txn, this.settings, this.now());
  }

  /**
   * Runs the batch's steps from `work.next` on: step 0 stores the reads' TTL renewals,
   * step i + 1 runs command i. Answers the state a step must load before it can go on
   * (its changes so far undone; it runs again from its start), or null once all ran.
   */
  private runSteps(txn: Txn, executor: Executor, work: BatchWork, resumed: boolean): MissingState | null {
    for (; work.next <= work.batch.length; work.next++, resumed = false) {
      const op = work.next === 0 ? null : work.batch[work.next - 1]!;
      if (op && work.failed.has(op)) continue;
      if (!resumed) txn.beginStep?.();
      try {
        if (op) work.outcomes.set(op, executor.run(op.kind, op.input as never));
        else executor.storeTouches(work.touches);
      } catch (cause) {
        if (cause instanceof MissingState) {
          txn.rewindStep?.();
          return cause;
        }
        if (cause instanceof StorageFailure || this.isStorageFault(cause) || !op) throw new StorageFailure(cause);
        throw new CommandFault(op, cause);
      }
    }
    return null;
  }

  /** True when `error` is one command's own fault: the batch then runs again without it. */
  private dropFaulty(work: BatchWork, error: unknown): boolean {
    if (!(error instanceof CommandFault)) return false;
    work.failed.set(error.op, error.cause instanceof CommandRefused ? error.cause : new CommandFailedError(error.cause));
    return true;
  }

  /** The batch could not commit: none of it applied, and the reads' renewals wait for the next. */
  private refuse(work: BatchWork, error: unknown): void {
    this.committingTouches.delete(work.touches);
    for (const [id, at] of work.touches) this.touchAt(id, at);
    const refusal = this.refusalOf(error);
    for (const op of work.batch) answerLeftOut(op, work.failed.get(op) ?? refusal);
    for (const observer of this.observers) observer.batchRefused();
    this.batchEnded();
  }

  private refusalOf(error: unknown): Error {
    if (error instanceof CommitOutcomeUnknownError) return new DurabilityLostError(error.cause);
    if (this.isOutOfSpace(error instanceof StorageFailure ? error.cause : error)) return this.diskSpace?.ranOut() ?? new InsufficientStorageError(0);
    return new StorageUnavailableError(error);
  }

  /** Answers a committed batch once it is durable; only then do readers hear of it. */
  private settle(work: BatchWork, error?: unknown): void {
    this.committingTouches.delete(work.touches);
    if (error !== undefined) this.failFatally(error);
    for (const op of work.batch) {
      const failure = work.failed.get(op);
      if (failure) answerLeftOut(op, failure);
      else if (error !== undefined) op.reject(new DurabilityLostError(error));
      else op.resolve(work.outcomes.get(op));
    }
    if (error === undefined && work.events.length > 0) for (const listener of this.listeners) listener(work.events);
    this.batchEnded();
  }

  private batchEnded(): void {
    if (--this.settling === 0) for (const resolve of this.settled.splice(0)) resolve();
  }

  /** Nothing more can be trusted to work (durability lost, or a broken invariant after a commit). */
  protected failFatally(error: unknown): void {
    if (this.fatal !== undefined) return;
    this.fatal = error;
    for (const listener of this.fatalListeners) listener(error);
  }
}

/** Answers a command the batch ran without: its refusal (CommandRefused), or the failure that left it out. */
function answerLeftOut(op: Pending, failure: unknown): void {
  if (failure instanceof CommandRefused) op.resolve(failure.outcome);
  else op.reject(failure);
}

/** Tells the observer what a durable batch appended: bytes, and messages (a JSON append holds one per line). */
function observeAppends(observers: readonly StorageObserver[], work: BatchWork, waitSeconds: number): void {
  let bytes = 0;
  let messages = 0;
  const count = (request: StoreCommands['append']['input']['request']): void => {
    bytes += request.data.length;
    messages += request.contentType !== null && isJsonContentType(request.contentType) ? countJsonMessages(request.data) : 1;
  };
  for (const op of work.batch) {
    if (work.failed.has(op)) continue;
    const outcome = work.outcomes.get(op) as { kind: string; closeOnly?: boolean; operations?: Array<{ kind: string }> } | undefined;
    if (op.kind === 'append' && outcome?.kind === 'appended' && !outcome.closeOnly) count((op.input as StoreCommands['append']['input']).request);
    if (op.kind !== 'appendTransaction' || outcome?.kind !== 'committed') continue;
    const { operations } = op.input as StoreCommands['appendTransaction']['input'];
    operations.forEach(({ request }, i) => outcome.operations![i]!.kind === 'appended' && count(request));
  }
  for (const observer of observers) observer.batchDurable!(waitSeconds, bytes, messages);
}

/** One batch of commands on its way through a transaction. */
interface BatchWork {
  batch: Pending[];
  touches: Map<number, number>;
  /** Commands whose own step failed or refused after applying changes, left out when the batch runs again. */
  failed: Map<Pending, unknown>;
  outcomes: Map<Pending, unknown>;
  events: CommitEvent[];
  /** The step runSteps runs next. */
  next: number;
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
