/**
 * The SQLite store, run on the process's storage thread (worker.ts) so that the event
 * loop never waits for storage: a 32 MiB append's COMMIT, the indexing that follows it and a large
 * catch-up read take the store's thread, while this one goes on parsing and answering
 * requests. Each call crosses as one message and its answer as another; the store's
 * batching, durability and reads work there exactly as in one thread (its own tests and
 * the storage contract run it both ways). docs/decisions.md says why a thread.
 */
import type { BucketSettings } from '../../core/bucket-settings.js';
import { Worker } from 'node:worker_threads';
import type { LinkView, SubscriptionState } from '../../core/subscription-types.js';
import type { StreamState } from '../../core/types.js';
import { StorageUnavailableError } from '../errors.js';
import { workerScript } from '../worker-script.js';
import type { Packet } from './codec.js';
import type {
  BucketInfo,
  BucketListing,
  CommandName,
  CommitEvent,
  StorageObserver,
  Store,
  StoreCommands,
  HeldTotals,
  ProducerListing,
  StoreTotals,
  StreamCacheCounters,
  StreamListing,
} from '../store.js';
import { NO_CACHE } from '../store.js';
import { fromCounterList, fromWire, Outbox, unpack, type FromStore, type ReadName, type ThreadSettings, type ToStore } from './wire.js';

export interface ThreadStoreOptions extends ThreadSettings {
  /** The clock the store judges time by; every call carries its reading. */
  nowMs?: () => number;
  /** Writes started being refused for want of disk space (full), or are accepted again. */
  onDiskSpace?: (full: boolean, freeBytes: number) => void;
}

type Call = { kind: 'run'; command: CommandName; input: unknown } | { kind: 'read'; read: ReadName; args: unknown[] } | { kind: 'close' };

/**
 * The process's storage thread, started by the first store opened and shared by every
 * store opened after (a test process runs several servers; a thread costs about 60 ms to
 * start). It keeps the process alive only while some store is open.
 */
class StorageThread {
  private static current: StorageThread | null = null;
  private readonly stores = new Map<number, ThreadStore>();
  private readonly opening = new Map<number, { resolve: (store: ThreadStore) => void; reject: (error: unknown) => void; store: ThreadStore }>();
  private nextStoreId = 1;
  private readonly outbox: Outbox<ToStore>;

  private constructor(readonly worker: Worker) {
    this.outbox = new Outbox((packet, transfer) => worker.postMessage(packet, transfer));
    worker.on('message', (packet: Packet) => unpack<FromStore>(packet).forEach((message) => this.heard(message)));
    worker.on('error', (error) => this.lost(error));
    worker.on('exit', (code) => this.lost(new Error(`the storage thread exited with code ${code}`)));
    worker.unref();
  }

  static get(): StorageThread {
    StorageThread.current ??= new StorageThread(new Worker(workerScript(import.meta.url, 'worker')));
    return StorageThread.current;
  }

  open(options: ThreadStoreOptions): Promise<ThreadStore> {
    const { nowMs: _clock, onDiskSpace: _hook, ...settings } = options;
    const id = this.nextStoreId++;
    const store = new ThreadStore(this, id, options);
    return new Promise((resolve, reject) => {
      this.opening.set(id, { resolve, reject, store });
      this.holdProcess();
      this.post({ kind: 'open', store: id, settings, nowMs: store.nowMs() });
    });
  }

  post(message: ToStore): void {
    this.outbox.post(message);
  }

  /** A store closed (or failed to open): the thread no longer holds the process open for it. */
  closed(id: number): void {
    this.stores.delete(id);
    this.holdProcess();
  }

  private holdProcess(): void {
    if (this.stores.size + this.opening.size > 0) this.worker.ref();
    else this.worker.unref();
  }

  private heard(message: FromStore): void {
    const opening = this.opening.get(message.store);
    // Before its answer to the open, a store may say only how much disk space there is.
    if (opening === undefined || message.kind === 'diskSpace') return (opening?.store ?? this.stores.get(message.store))?.heard(message);
    this.opening.delete(message.store);
    if (message.kind === 'opened') {
      this.stores.set(message.store, opening.store);
      opening.resolve(opening.store);
    } else {
      opening.reject(message.kind === 'openFailed' ? fromWire(message.error) : new Error(`the storage thread answered ${message.kind} before opening`));
    }
    this.holdProcess();
  }

  /** The thread failed or ended: every store on it is lost, and the next store opened starts another. */
  private lost(error: Error): void {
    if (StorageThread.current === this) StorageThread.current = null;
    for (const { reject } of this.opening.values()) reject(new StorageUnavailableError(error));
    this.opening.clear();
    for (const store of this.stores.values()) store.lost(error);
    this.stores.clear();
  }
}

export class ThreadStore implements Store {
  readonly nowMs: () => number;
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (value: unknown) => void; reject: (error: unknown) => void }>();
  private readonly commitListeners = new Set<(events: CommitEvent[]) => void>();
  private readonly fatalListeners = new Set<(error: unknown) => void>();
  private readonly observers: StorageObserver[] = [];
  private observing: 'no' | 'committed' | 'durable' = 'no';
  private cache: StreamCacheCounters = NO_CACHE;
  /** Why the store can no longer answer (closed, or its thread gone); set once. */
  private gone: Error | null = null;
  private closing: Promise<void> | null = null;

  constructor(
    private readonly thread: StorageThread,
    private readonly id: number,
    private readonly options: ThreadStoreOptions,
  ) {
    this.nowMs = options.nowMs ?? Date.now;
  }

  /** Opens the store on the process's storage thread; rejects with why it could not (a data directory in use, a newer schema). */
  static open(options: ThreadStoreOptions): Promise<ThreadStore> {
    return StorageThread.get().open(options);
  }

  heard(message: FromStore): void {
    switch (message.kind) {
      case 'answer':
        this.cache = fromCounterList(message.cache);
        return this.settle(message.id)?.resolve(message.value);
      case 'failed':
        return this.settle(message.id)?.reject(fromWire(message.error));
      case 'commit':
        for (const listener of this.commitListeners) listener(message.events as CommitEvent[]);
        return;
      case 'observed':
        return this.observed(message.observed);
      case 'diskSpace':
        return this.options.onDiskSpace?.(message.full, message.freeBytes);
      case 'fatal':
        return this.fatal(fromWire(message.error));
      default:
        return this.fatal(new Error(`the storage thread sent an unknown message (${message.kind})`));
    }
  }

  private settle(id: number): { resolve: (value: unknown) => void; reject: (error: unknown) => void } | undefined {
    const waiter = this.waiting.get(id);
    this.waiting.delete(id);
    return waiter;
  }

  private observed({ event, args }: Extract<FromStore, { kind: 'observed' }>['observed']): void {
    for (const observer of this.observers) {
      if (event === 'batchCommitted') observer.batchCommitted(...args);
      else if (event === 'batchRefused') observer.batchRefused();
      else observer.batchDurable?.(...args);
    }
  }

  private fatal(error: unknown): void {
    for (const listener of this.fatalListeners) listener(error);
  }

  /** The store closed, or its thread ended or failed: every call waiting is refused, and so is every later one. */
  lost(error: Error): void {
    if (this.gone !== null) return;
    this.gone = error;
    this.fatal(error);
    for (const [id, waiter] of this.waiting) {
      this.waiting.delete(id);
      waiter.reject(new StorageUnavailableError(error));
    }
  }

  private call(call: Call): Promise<never> {
    const refused = this.refusing();
    if (refused !== null) return Promise.reject(new StorageUnavailableError(refused));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.post({ ...call, id });
    });
  }

  private post(message: DistributiveOmit<ToStore, 'nowMs' | 'store'>): void {
    this.thread.post({ ...message, store: this.id, nowMs: this.nowMs() } as ToStore);
  }

  private read(read: ReadName, ...args: unknown[]): Promise<never> {
    return this.call({ kind: 'read', read, args });
  }

  run<K extends CommandName>(kind: K, input: StoreCommands[K]['input']): Promise<StoreCommands[K]['output']> {
    return this.call({ kind: 'run', command: kind, input });
  }

  getStream(name: string): Promise<StreamState | undefined> {
    return this.read('getStream', name);
  }
  readRange(stream: StreamState, from: number, maxBytes: number): Promise<Buffer> {
    return this.read('readRange', stream, from, maxBytes);
  }
  readChunks(stream: StreamState, from: number, maxBytes: number): Promise<Array<{ start: number; data: Buffer }>> {
    return this.read('readChunks', stream, from, maxBytes);
  }
  snapshotBody(stream: StreamState): Promise<Buffer | null> {
    return this.read('snapshotBody', stream);
  }
  chunkAt(stream: StreamState, position: number): Promise<{ start: number; data: Buffer } | null> {
    return this.read('chunkAt', stream, position);
  }
  getBucket(id: string): Promise<BucketInfo | undefined> {
    return this.read('getBucket', id);
  }

  bucketSettings(id: string): Promise<BucketSettings | undefined> {
    return this.read('bucketSettings', id);
  }
  listStreams(bucket: string, prefix: string, after: string | null, limit: number): Promise<StreamListing> {
    return this.read('listStreams', bucket, prefix, after, limit);
  }
  listBuckets(after: string | null, limit: number): Promise<BucketListing> {
    return this.read('listBuckets', after, limit);
  }
  totals(): Promise<StoreTotals> {
    return this.read('totals');
  }
  heldTotals(): Promise<HeldTotals> {
    return this.read('heldTotals');
  }
  bucketHeldBytes(bucket: string): Promise<number> {
    return this.read('bucketHeldBytes', bucket);
  }
  countProducers(stream: StreamState): Promise<number> {
    return this.read('countProducers', stream);
  }
  listProducers(stream: StreamState, after: string | null, limit: number): Promise<ProducerListing> {
    return this.read('listProducers', stream, after, limit);
  }
  getSubscription(key: string): Promise<SubscriptionState | undefined> {
    return this.read('getSubscription', key);
  }
  listSubscriptions(scope: string | null, afterKey: string | null, limit: number): Promise<SubscriptionState[]> {
    return this.read('listSubscriptions', scope, afterKey, limit);
  }
  subscriptionLinks(subKey: string, afterPath: string | null, limit: number): Promise<LinkView[]> {
    return this.read('subscriptionLinks', subKey, afterPath, limit);
  }
  linkIndex(after: { stream: string; subKey: string } | null, limit: number): Promise<Array<{ stream: string; subKey: string }>> {
    return this.read('linkIndex', after, limit);
  }
  dueSubscriptions(nowMs: number, limit: number): Promise<string[]> {
    return this.read('dueSubscriptions', nowMs, limit);
  }
  getMeta(key: string): Promise<string | undefined> {
    return this.read('getMeta', key);
  }
  compareAndSetMeta(key: string, expected: string | undefined, value: string): Promise<boolean> {
    return this.read('compareAndSetMeta', key, expected, value);
  }

  cacheCounters(): StreamCacheCounters {
    return this.cache;
  }

  /** Why calls are refused now: the store is gone, or closing (what was asked before close is still answered). */
  private refusing(): Error | null {
    return this.gone ?? (this.closing === null ? null : new Error('store is closed'));
  }

  touch(stream: StreamState, nowMs: number): void {
    if (stream.config.ttlSeconds === null || this.refusing() !== null) return;
    this.post({ kind: 'touch', stream, atMs: nowMs });
  }

  observe(observer: StorageObserver): void {
    this.observers.push(observer);
    const wanted = observer.batchDurable ? 'durable' : 'committed';
    if (this.observing === 'durable' || this.observing === wanted || this.refusing() !== null) return;
    // The thread keeps one forwarder; it is told again only when durable batches are newly wanted.
    this.observing = wanted;
    this.post({ kind: 'observe', durable: wanted === 'durable' });
  }

  onCommit(listener: (events: CommitEvent[]) => void): () => void {
    this.commitListeners.add(listener);
    return () => this.commitListeners.delete(listener);
  }

  onFatal(listener: (error: unknown) => void): () => void {
    this.fatalListeners.add(listener);
    return () => this.fatalListeners.delete(listener);
  }

  /** Every call made before it is answered first (the thread takes messages in order); later ones are refused. */
  close(): Promise<void> {
    if (this.closing === null) {
      const closed: Promise<void> | null = this.gone === null ? this.call({ kind: 'close' }) : null;
      this.closing = this.closeThread(closed);
    }
    return this.closing;
  }

  private async closeThread(closed: Promise<void> | null): Promise<void> {
    if (closed === null) return;
    // A closed store's thread ending is no failure.
    this.fatalListeners.clear();
    try {
      await closed;
    } finally {
      this.lost(new Error('store is closed'));
      this.thread.closed(this.id);
    }
  }
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
