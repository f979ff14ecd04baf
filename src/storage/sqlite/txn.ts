/**
 * The SQLite engine's Txn: the executor's synchronous view of the database inside one
 * batch's transaction. Stream states come from the stream cache or their rows
 * (stream-rows.ts); appends and producer record changes are held (held-writes.ts) and
 * reach `chunks` and `producers` later, in bulk; everything else is written at once
 * through the prepared statements (statements.ts). Every answer is synchronous: the
 * database is local, so no step ever waits (compare the PostgreSQL Txn, postgres/batch.ts).
 */
import type { BucketState } from '../../core/bucket.js';
import { withSettings } from '../../core/bucket-settings.js';
import type { ChunkView } from '../../core/create.js';
import type { ProducerRecord, ProducerView, StreamState } from '../../core/types.js';
import { chunkFromChain, chunksFromChain, type ChunkSource } from '../chain.js';
import type { Txn } from '../executor.js';
import { producerFromValues } from '../producer-columns.js';
import { rowFrom } from './chunk-rows.js';
import type { LargeAppendCache } from '../large-appends.js';
import type { HeldWrites } from './held-writes.js';
import type { ProducerCache } from './producer-cache.js';
import type { Statements } from './statements.js';
import type { StreamRows } from './stream-rows.js';
import type { SqliteSubscriptions } from './subscriptions.js';

// Declares the subscription methods forwarded below.

export class SqliteTxn implements Txn {
  /** Streams whose stored bytes this transaction deleted (trimBefore): readers of their state before it must wait (durability.ts). */
  readonly trimmedIds = new Set<number>();
  private nextId: number;
  /** The next stream id as stored in `meta`. */
  private persistedNextId: number;

  constructor(
    private readonly sql: Statements,
    private readonly streams: StreamRows,
    private readonly held: HeldWrites,
    private readonly producers: ProducerCache,
    /** The engine's appends, recent and indexed, for reads through fork links. */
    private readonly chunks: ChunkSource,
    readonly subscriptions: SqliteSubscriptions,
    /** Large appends the engine keeps for reads: told of those written; a trim or a drop makes a stream's stale. */
    private readonly largeAppends: LargeAppendCache,
  ) {
    this.nextId = Number(sql.nextId.get()!.value);
    this.persistedNextId = this.nextId;
  }

  /** The end of the batch's transaction, before COMMIT: its batch row and the next stream id are stored. */
  finish(): void {
    this.held.endTransaction();
    if (this.nextId !== this.persistedNextId) this.sql.setNextId.run(String(this.nextId));
  }

  /** The transaction committed. (After a rollback the ids it took stay taken: ids are never reused.) */
  committed(): void {
    this.persistedNextId = this.nextId;
  }

  // ---- reads -------------------------------------------------------------------------

  getStream(name: string): StreamState | undefined {
    return this.streams.byName(name);
  }

  getStreamById(id: number): StreamState | undefined {
    return this.streams.byId(id);
  }

  getBucket(id: string): BucketState | undefined {
    const row = this.sql.bucket.get(id);
    return row ? withSettings({ id: row.id, createdAtMs: row.created_at_ms }, row.settings) : undefined;
  }

  countUndeletedStreams(bucket: string): number {
    return this.sql.bucketUndeleted.get(bucket)!.n;
  }

  expiredBucketStreams(bucket: string, nowMs: number): StreamState[] {
    return this.sql.bucketExpired.all(bucket, nowMs).map((row) => this.streams.fromRow(row));
  }

  /** A held change first, then the record cache, then the table. */
  getProducer(streamId: number, producerId: string): ProducerRecord | undefined {
    const held = this.held.producers.get(streamId, producerId);
    if (held !== undefined) return held ?? undefined;
    const cached = this.producers.get(streamId, producerId);
    if (cached) return cached;
    const values = this.sql.producer.get(streamId, producerId);
    if (!values) return undefined;
    const record = producerFromValues(values);
    this.producers.remember(streamId, record);
    return record;
  }

  producerSummary(streamId: number, cutoffMs: number, excludeId: string): NonNullable<ProducerView['others']> {
    // The queries below read the table: the stream's held changes go there first.
    this.held.writeStreamProducers(streamId);
    const lru = this.sql.leastRecentLive.get(streamId, cutoffMs, excludeId);
    return {
      liveCount: this.sql.liveProducerCount.get(streamId, cutoffMs, excludeId)!.n,
      expiredMaxEpoch: this.sql.expiredMaxEpoch.get(streamId, cutoffMs)!.e,
      leastRecentLive: lru ? { id: lru.producer_id, epoch: lru.epoch, lastSeenMs: lru.last_seen_ms } : null,
    };
  }

  chunkAt(stream: StreamState, position: number): ChunkView | null {
    return chunkFromChain(this.chunks, stream, position);
  }

  chunksBetween(stream: StreamState, from: number, before: number): ChunkView[] {
    return chunksFromChain(this.chunks, stream, from, before - from);
  }

  nextStreamId(): number {
    return this.nextId++;
  }

  expiredStreams(nowMs: number, limit: number): StreamState[] {
    return this.sql.expired.all(nowMs, limit).map((row) => this.streams.fromRow(row));
  }

  ageDueStreams(nowMs: number, limit: number): StreamState[] {
    return this.sql.ageDue.all(nowMs, limit).map((row) => this.streams.fromRow(row));
  }

  descendantsEarliest(streamId: number): number | null {
    return this.sql.descendantsEarliest.get(streamId)!.e;
  }

  // ---- writes ------------------------------------------------------------------------

  putBucket(bucket: BucketState): void {
    this.sql.insertBucket.run(bucket.id, bucket.createdAtMs, bucket.settings === undefined ? null : JSON.stringify(bucket.settings));
  }

  dropBucket(id: string): void {
    this.sql.deleteBucket.run(id);
  }

  insertStream(stream: StreamState): void {
    this.streams.insert(stream);
  }

  updateStream(stream: StreamState): void {
    this.streams.update(stream);
  }

  dropStream(stream: StreamState): void {
    this.streams.byId(stream.id);
    this.streams.cache.delete(stream);
    this.sql.deleteChunks.run(stream.id);
    this.largeAppends.forget(stream.id);
    // Its appends in recent_batches go with the next seal's range (or the next start skips them).
    this.held.recent.forget(stream.id);
    this.sql.deleteAllProducers.run(stream.id);
    this.producers.forgetStream(stream.id);
    this.held.producers.dropStream(stream.id);
    this.sql.deleteSnapshot.run(stream.id);
    this.sql.deleteStream.run(stream.id);
  }

  putSnapshotBody(streamId: number, body: Buffer): void {
    this.sql.putSnapshot.run(streamId, body);
  }

  /** Deletes whole appends before `position`; an append cut by it keeps only its tail part. */
  trimBefore(stream: StreamState, position: number): void {
    this.trimmedIds.add(stream.id);
    this.largeAppends.forget(stream.id);
    // Trimming works on the index: what is recent is indexed first (retention is rare).
    this.held.indexAll();
    this.sql.trimWhole.run(stream.id, position, position);
    const straddling = this.sql.chunkBefore.get(stream.id, position);
    if (!straddling || straddling.start + straddling.data.length <= position) return;
    const kept = rowFrom(straddling, position);
    this.sql.deleteChunk.run(straddling.id);
    this.sql.insertChunk.run(stream.id, kept.start, kept.data, kept.bounds);
  }

  appendChunk(streamId: number, start: number, data: Buffer): void {
    this.held.addAppend(streamId, start, data);
    this.largeAppends.written(streamId, { start, data });
  }

  putProducer(streamId: number, record: ProducerRecord): void {
    this.producers.remember(streamId, record);
    this.held.producers.put(streamId, record);
  }

  /**
   * Deletions are written at once (the producer summary's queries read the table) and
   * held too, so that their batch row logs them for replay.
   */
  deleteProducers(streamId: number, ids: string[]): void {
    this.producers.forget(streamId, ids);
    for (const id of ids) {
      this.sql.deleteProducer.run(streamId, id);
      this.held.producers.delete(streamId, id);
    }
  }

  forgetProducers(streamId: number, seenAtOrBeforeMs: number): void {
    this.producers.forgetSeenAtOrBefore(streamId, seenAtOrBeforeMs);
    this.held.writeStreamProducers(streamId);
    for (const id of this.sql.forgetProducers.all(streamId, seenAtOrBeforeMs)) this.held.producers.delete(streamId, id);
  }
}

