/**
 * In-memory engine for tests and `--store memory`. It runs the same executor and rules
 * as SQLite; its transaction is an undo log, so a failed batch or command leaves no
 * trace. Nothing survives the process.
 */
import type { BucketState } from '../../core/bucket.js';
import type { BucketSettings } from '../../core/bucket-settings.js';
import { isCollectable, isListed, ownStart } from '../../core/stream.js';
import { messagesHeld } from '../../core/records.js';
import type { LinkView, SubscriptionState } from '../../core/subscription-types.js';
import type { ProducerRecord, StreamState } from '../../core/types.js';
import { BatchedStore } from '../batched.js';
import { chunkFromChain, chunksFromChain, readFromChain, type ChunkSource, type StoredChunk } from '../chain.js';
import type { Txn } from '../executor.js';
import { summarizeProducers } from '../../core/producer.js';
import { descendantsEarliest } from '../../core/snapshot.js';
import type { BucketInfo, BucketListing, HeldTotals, ProducerListing, StoreOptions, StoreTotals, StreamListing } from '../store.js';
import { compareUtf8 } from '../../core/utf8-order.js';
import { MemorySubscriptions } from './subscriptions.js';

interface StreamData {
  /** Own chunks in position order. */
  chunks: StoredChunk[];
  producers: Map<string, ProducerRecord>;
  snapshot: Buffer | null;
}

/** Index of the last chunk with `start <= position`, or -1. */
function lastAtOrBefore(chunks: StoredChunk[], position: number): number {
  let lo = 0;
  let hi = chunks.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (chunks[mid]!.start <= position) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}

export class MemoryStore extends BatchedStore {
  private readonly streams = new Map<string, StreamState>();
  private readonly byId = new Map<number, string>();
  private readonly data = new Map<number, StreamData>();
  private readonly buckets = new Map<string, BucketState>();
  private nextId = 1;
  private undo: Array<() => void> | null = null;
  private readonly subscriptions = new MemorySubscriptions(
    (step) => this.record(step),
    () => [...this.streams.values()].map((s) => this.view(s)!),
    (name) => this.view(this.streams.get(name)),
  );
  private readonly txn: Txn = this.createTxn();

  constructor(options: StoreOptions) {
    super(options);
  }

  private record(undoStep: () => void): void {
    this.undo?.push(undoStep);
  }

  private setStream(stream: StreamState): void {
    const previous = this.streams.get(stream.name);
    this.streams.set(stream.name, stream);
    this.byId.set(stream.id, stream.name);
    this.record(() => {
      if (previous) this.streams.set(previous.name, previous);
      else this.streams.delete(stream.name);
      if (!previous || previous.id !== stream.id) this.byId.delete(stream.id);
    });
  }

  private streamData(id: number): StreamData {
    let entry = this.data.get(id);
    if (!entry) {
      entry = { chunks: [], producers: new Map(), snapshot: null };
      this.data.set(id, entry);
    }
    return entry;
  }

  protected transact(body: (txn: Txn) => void): void {
    this.undo = [];
    try {
      body(this.txn);
    } catch (error) {
      for (const step of this.undo.reverse()) step();
      throw error;
    } finally {
      this.undo = null;
    }
  }

  private view(stream: StreamState | undefined): StreamState | undefined {
    if (!stream) return undefined;
    const seen = this.withPendingTouch(stream);
    return seen === stream ? { ...stream } : seen;
  }

  private byIdView(id: number): StreamState | undefined {
    const name = this.byId.get(id);
    return name === undefined ? undefined : this.view(this.streams.get(name));
  }

  private readonly chunkSource: ChunkSource = {
    streamById: (id) => this.byIdView(id),
    chunkContaining: (streamId, position) => {
      const chunks = this.data.get(streamId)?.chunks ?? [];
      const i = lastAtOrBefore(chunks, position);
      return i < 0 ? null : chunks[i]!;
    },
    chunksFrom: (streamId, from, before) => {
      const chunks = this.data.get(streamId)?.chunks ?? [];
      const first = lastAtOrBefore(chunks, from - 1) + 1;
      const out: StoredChunk[] = [];
      for (let i = first; i < chunks.length && chunks[i]!.start < before; i++) out.push(chunks[i]!);
      return out;
    },
  };

  private deleteProducer(streamId: number, id: string): void {
    const producers = this.data.get(streamId)?.producers;
    const previous = producers?.get(id);
    if (!producers || !previous) return;
    producers.delete(id);
    this.record(() => producers.set(id, previous));
  }

  private dropStream(stream: StreamState): void {
    const previousData = this.data.get(stream.id);
    const previous = this.streams.get(stream.name);
    this.streams.delete(stream.name);
    this.byId.delete(stream.id);
    this.data.delete(stream.id);
    this.record(() => {
      if (previous) this.streams.set(stream.name, previous);
      this.byId.set(stream.id, stream.name);
      if (previousData) this.data.set(stream.id, previousData);
    });
  }

  private createTxn(): Txn {
    return {
      subscriptions: this.subscriptions,
      getStream: (name) => this.view(this.streams.get(name)),
      getStreamById: (id) => this.byIdView(id),
      getBucket: (id) => this.buckets.get(id),
      countUndeletedStreams: (bucket) => [...this.streams.values()].filter((s) => s.bucket === bucket && !s.deleted).length,
      expiredBucketStreams: (bucket, nowMs) =>
        [...this.streams.values()]
          .map((s) => this.view(s)!)
          .filter((s) => s.bucket === bucket && isCollectable(s, nowMs)),
      getProducer: (streamId, producerId) => this.data.get(streamId)?.producers.get(producerId),
      producerSummary: (streamId, cutoffMs, excludeId) => summarizeProducers(this.data.get(streamId)?.producers.values() ?? [], cutoffMs, excludeId),
      chunkAt: (stream, position) => chunkFromChain(this.chunkSource, stream, position),
      chunksBetween: (stream, from, before) => chunksFromChain(this.chunkSource, stream, from, before - from),
      nextStreamId: () => this.nextId++,
      ageDueStreams: (nowMs, limit) =>
        [...this.streams.values()]
          .map((s) => this.view(s)!)
          .filter((s) => !s.deleted && s.ageDueMs !== undefined && s.ageDueMs <= nowMs)
          .sort((a, b) => a.ageDueMs! - b.ageDueMs!)
          .slice(0, limit),
      expiredStreams: (nowMs, limit) =>
        [...this.streams.values()]
          .map((s) => this.view(s)!)
          .filter((s) => isCollectable(s, nowMs))
          .slice(0, limit),
      putBucket: (bucket) => {
        // A settings change rewrites a bucket that exists: undoing it puts the old one back.
        const before = this.buckets.get(bucket.id);
        this.buckets.set(bucket.id, bucket);
        this.record(() => (before === undefined ? this.buckets.delete(bucket.id) : this.buckets.set(bucket.id, before)));
      },
      dropBucket: (id) => {
        const previous = this.buckets.get(id);
        this.buckets.delete(id);
        this.record(() => previous && this.buckets.set(id, previous));
      },
      insertStream: (stream) => this.setStream(stream),
      updateStream: (stream) => this.setStream(stream),
      dropStream: (stream) => this.dropStream(stream),
      appendChunk: (streamId, start, data) => {
        const chunks = this.streamData(streamId).chunks;
        chunks.push({ start, data: Buffer.from(data) });
        this.record(() => chunks.pop());
      },
      putProducer: (streamId, record) => {
        const producers = this.streamData(streamId).producers;
        const previous = producers.get(record.id);
        producers.set(record.id, record);
        this.record(() => (previous ? producers.set(record.id, previous) : producers.delete(record.id)));
      },
      deleteProducers: (streamId, ids) => ids.forEach((id) => this.deleteProducer(streamId, id)),
      putSnapshotBody: (streamId, body) => {
        const entry = this.streamData(streamId);
        const previous = entry.snapshot;
        entry.snapshot = Buffer.from(body);
        this.record(() => (entry.snapshot = previous));
      },
      trimBefore: (stream, position) => this.trimBefore(stream, position),
      descendantsEarliest: (streamId) => descendantsEarliest(this.streams.values(), streamId),
      forgetProducers: (streamId, atOrBeforeMs) => {
        for (const p of [...(this.data.get(streamId)?.producers.values() ?? [])]) {
          if (p.lastSeenMs <= atOrBeforeMs) this.deleteProducer(streamId, p.id);
        }
      },
    };
  }

  /** Deletes whole appends before `position`; an append cut by it keeps only its tail part. */
  private trimBefore(stream: StreamState, position: number): void {
    const entry = this.streamData(stream.id);
    const previous = entry.chunks;
    const kept: StoredChunk[] = [];
    for (const chunk of previous) {
      const end = chunk.start + chunk.data.length;
      if (end <= position) continue;
      kept.push(chunk.start < position ? { start: position, data: chunk.data.subarray(position - chunk.start) } : chunk);
    }
    entry.chunks = kept;
    this.record(() => (entry.chunks = previous));
  }

  async readChunks(stream: StreamState, from: number, maxBytes: number): Promise<StoredChunk[]> {
    return chunksFromChain(this.chunkSource, stream, from, maxBytes);
  }

  async snapshotBody(stream: StreamState): Promise<Buffer | null> {
    return this.data.get(stream.id)?.snapshot ?? null;
  }

  async getStream(name: string): Promise<StreamState | undefined> {
    return this.view(this.streams.get(name));
  }

  async readRange(stream: StreamState, from: number, maxBytes: number): Promise<Buffer> {
    return readFromChain(this.chunkSource, stream, from, maxBytes);
  }

  async chunkAt(stream: StreamState, position: number): Promise<StoredChunk | null> {
    return chunkFromChain(this.chunkSource, stream, position);
  }

  async bucketSettings(id: string): Promise<BucketSettings | undefined> {
    return this.buckets.get(id)?.settings;
  }

  async getBucket(id: string): Promise<BucketInfo | undefined> {
    const bucket = this.buckets.get(id);
    if (!bucket) return undefined;
    const now = this.now();
    const streamCount = [...this.streams.values()].filter((s) => s.bucket === id && isListed(s, now)).length;
    return { ...bucket, streamCount };
  }

  async listStreams(bucket: string, prefix: string, after: string | null, limit: number): Promise<StreamListing> {
    const now = this.now();
    const keyPrefix = `b/${bucket}/`;
    const ids = [...this.streams.values()]
      .filter((s) => s.bucket === bucket && isListed(s, now))
      .map((s) => s.name.slice(keyPrefix.length))
      .filter((id) => id.startsWith(prefix) && (after === null || compareUtf8(id, after) > 0))
      .sort(compareUtf8);
    const names = ids.slice(0, limit);
    return { names, nextAfter: ids.length > limit ? names[names.length - 1]! : null };
  }

  async listBuckets(after: string | null, limit: number): Promise<BucketListing> {
    const ids = [...this.buckets.keys()].filter((id) => after === null || id > after).sort();
    const buckets = await Promise.all(ids.slice(0, limit).map(async (id) => (await this.getBucket(id))!));
    return { buckets, nextAfter: ids.length > limit ? buckets[buckets.length - 1]!.id : null };
  }

  async totals(): Promise<StoreTotals> {
    let producers = 0;
    for (const data of this.data.values()) producers += data.producers.size;
    const streams = [...this.streams.values()].filter((s) => !s.deleted).length;
    return { buckets: this.buckets.size, streams, producers };
  }

  async heldTotals(): Promise<HeldTotals> {
    let bytes = 0;
    let messages = 0;
    for (const s of this.streams.values()) {
      if (s.deleted) continue;
      bytes += s.tail - s.earliestOffset;
      messages += messagesHeld(s);
    }
    return { bytes, messages };
  }

  async bucketHeldBytes(bucket: string): Promise<number> {
    let bytes = 0;
    for (const s of this.streams.values()) {
      if (s.bucket === bucket && !s.deleted) bytes += s.tail - ownStart(s);
    }
    return bytes;
  }

  async countProducers(stream: StreamState): Promise<number> {
    return this.data.get(stream.id)?.producers.size ?? 0;
  }

  async listProducers(stream: StreamState, after: string | null, limit: number): Promise<ProducerListing> {
    const all = [...(this.data.get(stream.id)?.producers.values() ?? [])]
      .filter((p) => after === null || compareUtf8(p.id, after) > 0)
      .sort((a, b) => compareUtf8(a.id, b.id));
    const producers = all.slice(0, limit);
    return { producers, nextAfter: all.length > limit ? producers[producers.length - 1]!.id : null };
  }

  // Subscriptions: memory holds nothing uncommitted between batches, so reads answer at once.
  getSubscription(key: string): Promise<SubscriptionState | undefined> {
    return this.subscriptions.reads.getSubscription(key);
  }

  listSubscriptions(scope: string | null, afterKey: string | null, limit: number): Promise<SubscriptionState[]> {
    return this.subscriptions.reads.listSubscriptions(scope, afterKey, limit);
  }

  subscriptionLinks(subKey: string, afterPath: string | null, limit: number): Promise<LinkView[]> {
    return this.subscriptions.reads.subscriptionLinks(subKey, afterPath, limit);
  }

  linkIndex(after: { stream: string; subKey: string } | null, limit: number): Promise<Array<{ stream: string; subKey: string }>> {
    return this.subscriptions.reads.linkIndex(after, limit);
  }

  dueSubscriptions(nowMs: number, limit: number): Promise<string[]> {
    return this.subscriptions.reads.dueSubscriptions(nowMs, limit);
  }

  getMeta(key: string): Promise<string | undefined> {
    return this.subscriptions.reads.getMeta(key);
  }

  compareAndSetMeta(key: string, expected: string | undefined, value: string): Promise<boolean> {
    return this.subscriptions.reads.compareAndSetMeta(key, expected, value);
  }

  protected closeEngine(): void {}
}
