/**
 * The PostgreSQL engine's Txn: one batch's view of the database inside its transaction.
 *
 * Every answer comes from rows loaded in this transaction (streams under a row lock, so
 * another node's batch on the same stream waits for this one to commit) and from the
 * batch's own changes, which are kept here and sent in bulk. A question about rows not
 * loaded stops the step with MissingState (missing.ts): point lookups load one row;
 * questions over many rows (counts, producer summaries, expired streams, fork
 * descendants) first send the changes of the steps already run, then ask PostgreSQL, so
 * that their answer includes them. The step under way is undone and runs again.
 */
import type { BucketState } from '../../core/bucket.js';
import type { ChunkView } from '../../core/create.js';
import type { ProducerRecord, StreamState } from '../../core/types.js';
import { chunkFromChain, chunksFromChain, type ChunkSource, type StoredChunk } from '../chain.js';
import type { Txn } from '../executor.js';
import { MissingState } from '../missing.js';
import { summarizeProducers } from '../../core/producer.js';
import type { Command } from '../store.js';
import type { ColdSegmentRow } from '../cold/host.js';
import { ChunkWindows, type Queryable } from './chunks.js';
import { PgSubscriptions } from './subscriptions.js';
import { PendingWrites, sendAll, UndoLog, writeStatements } from './writes.js';
import { segmentOf, type SegmentColumns } from '../cold/segment-columns.js';
import { SEGMENTS_SQL } from './cold-rows.js';
import { loadBuckets, loadProducer, loadProducers, loadProducersWithin, loadProducerSummary, loadStreamRows, selectStreams, type ProducerSummary } from './batch-loads.js';
import { asStored, KNOWN_PRODUCERS_MAX, producerAsStored, type KnownProducers, type KnownRow } from './known-rows.js';

/**
 * A stream with at most this many producers has them all loaded when a new one writes (see
 * preload): as many as the node keeps with a known row, so that it keeps them all.
 */
const ALL_PRODUCERS_LOADED = KNOWN_PRODUCERS_MAX;

/** Stream ids taken from the sequence at a time. */
const ID_BLOCK = 16;

/**
 * The cold tier's history as a batch reads it (storage/cold/cold-reads.ts): from segments
 * in memory, or ColdSegmentNeeded, which fails the command until the tier fetched the
 * segment and runs it again (tiered-store.ts).
 */
export interface PgColdChunks {
  /** The cold append with the greatest start at or before `position`, in the segments given, or null. */
  containing(streamId: number, segments: readonly ColdSegmentRow[], position: number): StoredChunk | null;
  /** The cold appends with `from <= start < before`, in the segments given, in order. */
  from(streamId: number, segments: readonly ColdSegmentRow[], from: number, before: number): StoredChunk[];
}

// Declares the subscription methods forwarded at the end of this file.

export class PgBatch implements Txn {
  private readonly byName = new Map<string, StreamState | null>();
  private readonly byId = new Map<number, StreamState | null>();
  private readonly buckets = new Map<string, BucketState | null>();
  /** Producer records by stream, then id; null when known absent. */
  private readonly producers = new Map<number, Map<string, ProducerRecord | null>>();
  /** Streams whose every producer record is in `producers`: their summaries need no query. */
  private readonly allProducersKnown = new Set<number>();
  /** Producers seen at or before this time were forgotten by this batch, by stream. */
  private readonly forgotten = new Map<number, number>();
  private readonly windows: ChunkWindows;
  /** Appends of this batch, by stream, in position order. */
  private readonly batchChunks = new Map<number, StoredChunk[]>();
  /** Trims of this batch, by stream. */
  private readonly trims = new Map<number, number>();
  /** Answers over many rows, valid until the next step begins. */
  private derived = new Map<string, unknown>();
  private readonly freeIds: number[] = [];
  private readonly undo = new UndoLog();
  private writes = new PendingWrites();
  /** Stream rows as this transaction holds them in the database (loaded, or as last sent), each as a load gives it (asStored). */
  private readonly stored = new Map<number, StreamState>();
  /** The version (xmin) of each stream row loaded, as loaded (known-rows.ts). */
  private readonly versions = new Map<number, string>();
  /**
   * This transaction's id, as its first load that locked a row gave it (locking a row gives
   * a transaction its id): the version of every row it writes. Null while it locked none.
   */
  transactionId: string | null = null;
  /** Stream rows this batch sent writes for (rows of this transaction's version). */
  private readonly written = new Set<number>();
  /** Streams this batch wrote, for the commit notification. */
  readonly touched = new Set<string>();
  /** Round trips made (statements sent together count once), for the bench. */
  roundTrips = 0;
  /** Some of the batch's writes were sent before its end (to answer a question over many rows). */
  sentWrites = false;
  /** Times the batch's writes were sent. */
  private flushes = 0;
  readonly subscriptions: PgSubscriptions;
  /** Where each stream's cold history ends, as loaded in this transaction (under the stream's row lock, so it stays). */
  private readonly coldEnds = new Map<number, number>();
  /** Segment rows loaded, by stream: each load the segments overlapping `[from, before)`. */
  private readonly coldLoads = new Map<number, Array<{ from: number; before: number; segments: ColdSegmentRow[] }>>();

  constructor(
    private readonly db: Queryable,
    private readonly cold: PgColdChunks | null = null,
  ) {
    this.windows = new ChunkWindows(db);
    this.subscriptions = new PgSubscriptions({
      undo: this.undo,
      writes: () => this.writes,
      flushes: () => this.flushes,
      knownStream: (name) => this.byName.get(name),
      knownStreamNames: () => [...this.byName.keys()],
      ask: (key, load) => this.ask(key, load),
      missing: (flushFirst, load) => this.missing(flushFirst, load),
      db,
    });
  }

  /**
   * Loads, in a few round trips, the streams, producers and buckets the commands name.
   * `knownAt` gives the producer records this node knows of a stream at the version its
   * row was loaded at, if any (known-rows.ts): they are as stored, so they join the loaded.
   */
  async preload(commands: readonly Command[], streamIds: Iterable<number>, knownAt?: (id: number, version: string) => KnownProducers | undefined): Promise<void> {
    const names = new Set<string>();
    const producerKeys: Array<[string, string]> = [];
    const buckets = new Set<string>();
    for (const c of commands) {
      if (c.kind === 'createBucket' || c.kind === 'deleteBucket' || c.kind === 'setBucketSettings') buckets.add(c.input.id);
      else if (c.kind === 'createStream') {
        names.add(c.input.name);
        if (c.input.fork) names.add(c.input.fork.sourceName);
        if (c.input.bucket !== null) buckets.add(c.input.bucket);
      } else if (c.kind === 'append' || c.kind === 'appendTransaction') {
        for (const { name, request } of c.kind === 'append' ? [c.input] : c.input.operations) {
          names.add(name);
          if (request.producer) producerKeys.push([name, request.producer.id]);
        }
      } else if ('name' in c.input) names.add(c.input.name);
    }
    // Sent together, run in this order: producers are read once their streams are locked.
    this.roundTrips++;
    await Promise.all([
      this.loadStreams([...names], [...streamIds]),
      producerKeys.length > 0 ? this.loadProducers(producerKeys) : null,
      buckets.size > 0 ? this.loadBuckets([...buckets]) : null,
    ]);
    if (knownAt) this.adoptKnownProducers(knownAt);
    // A producer new to its stream asks about the others: for streams with few, load them
    // all now (one round trip), rather than ask PostgreSQL per new producer mid-batch.
    const newcomers = new Set<number>();
    for (const [name, pid] of producerKeys) {
      const stream = this.byName.get(name);
      if (stream && !this.allProducersKnown.has(stream.id) && this.producers.get(stream.id)?.get(pid) === null) newcomers.add(stream.id);
    }
    if (newcomers.size > 0) await this.loadAllProducers([...newcomers]);
  }

  /**
   * Takes rows known committed (known-rows.ts) instead of loading them: an optimistic
   * batch (optimistic.ts), whose guard checks at its commit that they are still so.
   */
  preloadKnown(rows: readonly KnownRow[]): void {
    for (const { stream, version, producers } of rows) {
      this.rememberStream(stream);
      this.versions.set(stream.id, version);
      if (producers) this.takeKnownProducers(stream.id, producers);
    }
  }

  /**
   * The stream rows this transaction holds, as committed by `xid` (this transaction's id,
   * null when not known): each row it wrote has that version (left out without it), each
   * it only loaded keeps the version it had (rows are locked once loaded). `gone`: ids it
   * deleted, or looked for and did not find.
   */
  committedRows(xid: string | null): { rows: KnownRow[]; gone: number[] } {
    const rows: KnownRow[] = [];
    const gone: number[] = [];
    for (const [id, stream] of this.stored) {
      const version = this.written.has(id) ? xid : this.versions.get(id);
      if (version !== undefined && version !== null) rows.push({ stream, version, producers: this.producersKnown(id) });
    }
    for (const [id, stream] of this.byId) if (stream === null) gone.push(id);
    return { rows, gone };
  }

  // ---- reads -------------------------------------------------------------------------

  getStream(name: string): StreamState | undefined {
    const known = this.byName.get(name);
    if (known !== undefined) return known ?? undefined;
    throw this.missing(false, () => this.loadStreams([name], []));
  }

  getStreamById(id: number): StreamState | undefined {
    const known = this.byId.get(id);
    if (known !== undefined) return known ?? undefined;
    throw this.missing(false, () => this.loadStreams([], [id]));
  }

  getBucket(id: string): BucketState | undefined {
    const known = this.buckets.get(id);
    if (known !== undefined) return known ?? undefined;
    throw this.missing(false, () => this.loadBuckets([id]));
  }

  countUndeletedStreams(bucket: string): number {
    return this.ask(`count ${bucket}`, async () => {
      const { rows } = await this.query<{ n: number }>('SELECT count(*)::bigint AS n FROM streams WHERE bucket = $1 AND deleted = 0', [bucket]);
      return rows[0]!.n;
    });
  }

  expiredBucketStreams(bucket: string, nowMs: number): StreamState[] {
    return this.ask(`expired ${bucket} ${nowMs}`, () =>
      // isCollectable (core/stream.ts) over `deleted` and `expiry_ms` (expiryMs).
      this.lockedStreams('SELECT * FROM streams WHERE bucket = $1 AND deleted = 0 AND expiry_ms <= $2 ORDER BY name FOR UPDATE', [bucket, nowMs]),
    );
  }

  expiredStreams(nowMs: number, limit: number): StreamState[] {
    // Every node sweeps: rows another node is collecting are left to it.
    return this.ask(`expired ${nowMs} ${limit}`, () =>
      // isCollectable (core/stream.ts), the oldest first.
      this.lockedStreams('SELECT * FROM streams WHERE deleted = 0 AND expiry_ms <= $1 ORDER BY expiry_ms LIMIT $2 FOR UPDATE SKIP LOCKED', [nowMs, limit]),
    );
  }

  ageDueStreams(nowMs: number, limit: number): StreamState[] {
    // As expiredStreams: every node sweeps, and rows another node is trimming are left to it.
    return this.ask(`age ${nowMs} ${limit}`, () =>
      this.lockedStreams('SELECT * FROM streams WHERE deleted = 0 AND age_due_ms <= $1 ORDER BY age_due_ms LIMIT $2 FOR UPDATE SKIP LOCKED', [nowMs, limit]),
    );
  }

  descendantsEarliest(streamId: number): number | null {
    return this.ask(`descendants ${streamId}`, async () => {
      // descendantsEarliest (core/snapshot.ts), as a recursive query.
      const { rows } = await this.query<{ e: number | null }>(
        `WITH RECURSIVE d(id, earliest) AS (
           SELECT id, earliest_offset FROM streams WHERE fork_source_id = $1
           UNION ALL SELECT s.id, s.earliest_offset FROM streams s JOIN d ON s.fork_source_id = d.id)
         SELECT min(earliest) AS e FROM d`,
        [streamId],
      );
      return rows[0]!.e;
    });
  }

  getProducer(streamId: number, producerId: string): ProducerRecord | undefined {
    const known = this.producers.get(streamId)?.get(producerId);
    if (known !== undefined) return known ?? undefined;
    if (this.allProducersKnown.has(streamId)) return undefined;
    throw this.missing(false, async () => this.rememberProducer(streamId, producerId, await loadProducer(this.db, streamId, producerId)));
  }

  producerSummary(streamId: number, cutoffMs: number, excludeId: string): ProducerSummary {
    if (this.allProducersKnown.has(streamId)) {
      const records = [...(this.producers.get(streamId)?.values() ?? [])].filter((r): r is ProducerRecord => r !== null);
      return summarizeProducers(records, cutoffMs, excludeId);
    }
    return this.ask(`producers ${streamId} ${cutoffMs} ${excludeId}`, () => loadProducerSummary(this.db, streamId, cutoffMs, excludeId));
  }

  chunkAt(stream: StreamState, position: number): ChunkView | null {
    return chunkFromChain(this.chunkSource, stream, position);
  }

  chunksBetween(stream: StreamState, from: number, before: number): ChunkView[] {
    return chunksFromChain(this.chunkSource, stream, from, before - from);
  }

  nextStreamId(): number {
    const id = this.freeIds.pop();
    if (id !== undefined) return id;
    // Ids are never reused: one taken by a step that is undone is simply skipped.
    throw this.missing(false, async () => {
      const { rows } = await this.query<{ id: number }>(`SELECT nextval('rill_stream_ids') AS id FROM generate_series(1, ${ID_BLOCK})`);
      this.freeIds.push(...rows.map((r) => r.id).reverse());
    });
  }

  // ---- writes ------------------------------------------------------------------------

  putBucket(bucket: BucketState): void {
    this.undo.set(this.buckets, bucket.id, bucket);
    this.undo.set(this.writes.buckets, bucket.id, bucket);
  }

  dropBucket(id: string): void {
    this.undo.set(this.buckets, id, null);
    this.undo.set(this.writes.buckets, id, null);
  }

  insertStream(stream: StreamState): void {
    this.putStream(stream);
  }

  updateStream(stream: StreamState): void {
    this.putStream(stream);
  }

  dropStream(stream: StreamState): void {
    if (this.byName.get(stream.name)?.id === stream.id) this.undo.set(this.byName, stream.name, null);
    this.undo.set(this.byId, stream.id, null);
    this.undo.set(this.writes.streams, stream.id, null);
    this.undo.set(this.batchChunks, stream.id, []);
    this.markTouched(stream.name);
  }

  appendChunk(streamId: number, start: number, data: Buffer): void {
    let mine = this.batchChunks.get(streamId);
    if (!mine) {
      mine = [];
      this.undo.set(this.batchChunks, streamId, mine);
    }
    this.undo.push(mine, { start, data });
    this.undo.push(this.writes.chunks, { streamId, start, data });
  }

  putProducer(streamId: number, record: ProducerRecord): void {
    // As a load would give it back: the batch's records are what the node knows after it (producersKnown).
    this.setProducer(streamId, record.id, producerAsStored(record));
  }

  deleteProducers(streamId: number, ids: string[]): void {
    for (const id of ids) this.setProducer(streamId, id, null);
  }

  forgetProducers(streamId: number, seenAtOrBeforeMs: number): void {
    const cutoff = Math.max(seenAtOrBeforeMs, this.forgotten.get(streamId) ?? -Infinity);
    this.undo.set(this.forgotten, streamId, cutoff);
    this.undo.set(this.writes.forgets, streamId, cutoff);
    const known = this.producers.get(streamId);
    for (const [id, record] of known ?? []) if (record && record.lastSeenMs <= cutoff) this.undo.set(known!, id, null);
  }

  putSnapshotBody(streamId: number, body: Buffer): void {
    this.undo.set(this.writes.snapshots, streamId, body);
  }

  trimBefore(stream: StreamState, position: number): void {
    const at = Math.max(position, this.trims.get(stream.id) ?? 0);
    this.undo.set(this.trims, stream.id, at);
    this.undo.set(this.writes.trims, stream.id, at);
  }

  beginStep(): void {
    this.undo.clear();
    this.derived = new Map();
  }

  rewindStep(): void {
    this.undo.rewind();
  }

  /** Sends what the batch changed and has not sent yet, and the commit hints when given. */
  async flush(hints: string[] = []): Promise<void> {
    if (this.writes.empty && hints.length === 0) return;
    const { statements, appended } = writeStatements(this.writes, this.stored, hints);
    for (const [id, stream] of this.writes.streams) {
      // An appended stream differs from its stored row only in numbers it stores as they are: it is in stored form already.
      if (stream) this.stored.set(id, appended.has(id) ? stream : asStored(stream));
      else this.stored.delete(id);
      this.written.add(id);
    }
    this.subscriptions.sent(this.writes);
    this.writes = new PendingWrites();
    this.flushes++;
    this.roundTrips++;
    await sendAll(this.db, statements);
  }

  // ---- helpers -----------------------------------------------------------------------

  private query<R extends object>(text: string, values?: unknown[]) {
    return this.db.query<R>(text, values);
  }

  private missing(flushFirst: boolean, load: () => Promise<void>): MissingState {
    return new MissingState(async () => {
      if (flushFirst && !this.writes.empty) {
        this.sentWrites = true;
        await this.flush();
      }
      this.roundTrips++;
      await load();
    });
  }

  /** A question over many rows: asked of PostgreSQL after the changes so far are sent. */
  private ask<T>(key: string, load: () => Promise<T>): T {
    if (this.derived.has(key)) return this.derived.get(key) as T;
    throw this.missing(true, async () => {
      this.derived.set(key, await load());
    });
  }

  private putStream(stream: StreamState): void {
    this.undo.set(this.byName, stream.name, stream);
    this.undo.set(this.byId, stream.id, stream);
    this.undo.set(this.writes.streams, stream.id, stream);
    this.markTouched(stream.name);
  }

  private markTouched(name: string): void {
    if (this.touched.has(name)) return;
    this.touched.add(name);
    this.undo.onRewind(() => this.touched.delete(name));
  }

  /** The stream's map in `producers`, made empty when it has none. */
  private recordsOf(streamId: number): Map<string, ProducerRecord | null> {
    let records = this.producers.get(streamId);
    if (!records) this.producers.set(streamId, (records = new Map()));
    return records;
  }

  private setProducer(streamId: number, producerId: string, record: ProducerRecord | null): void {
    this.undo.set(this.recordsOf(streamId), producerId, record);
    this.undo.set(this.writes.producers, `${streamId}/${producerId}`, { streamId, producerId, record });
  }

  /** Records known at the version a stream row was loaded at join those loaded (see preload). */
  private adoptKnownProducers(knownAt: (id: number, version: string) => KnownProducers | undefined): void {
    for (const [id, version] of this.versions) {
      const known = knownAt(id, version);
      if (known) this.takeKnownProducers(id, known);
    }
  }

  private takeKnownProducers(streamId: number, known: KnownProducers): void {
    const records = this.recordsOf(streamId);
    for (const [id, record] of known.records) if (!records.has(id)) records.set(id, record);
    if (known.all) this.allProducersKnown.add(streamId);
  }

  /**
   * The stream's producer records as this transaction leaves them, each as stored (loaded,
   * or put as a load gives it), for the node to know; none past KNOWN_PRODUCERS_MAX. The
   * map itself is handed over: the batch is done with it once committed.
   */
  private producersKnown(streamId: number): KnownProducers | undefined {
    const records = this.producers.get(streamId);
    const all = this.allProducersKnown.has(streamId);
    if (!records || (records.size === 0 && !all) || records.size > KNOWN_PRODUCERS_MAX) return undefined;
    return { records, all };
  }

  /** A record loaded from the table, unless this batch forgot it meanwhile. */
  private rememberProducer(streamId: number, producerId: string, record: ProducerRecord | null): void {
    const forgotten = record !== null && record.lastSeenMs <= (this.forgotten.get(streamId) ?? -Infinity);
    this.recordsOf(streamId).set(producerId, forgotten ? null : record);
  }

  /** Loaded rows become known unless this batch changed them (its changes are newer). */
  private rememberStream(stream: StreamState, version?: string): void {
    if (this.writes.streams.has(stream.id)) return;
    if (version !== undefined) this.versions.set(stream.id, version);
    this.stored.set(stream.id, stream);
    this.byId.set(stream.id, stream);
    this.byName.set(stream.name, stream);
  }

  private async loadStreams(names: string[], ids: number[]): Promise<void> {
    if (names.length === 0 && ids.length === 0) return;
    // Locked in name order, the same in every node, so two batches never wait on each other in a cycle.
    const { rows, transactionId } = await loadStreamRows(this.db, names, ids);
    if (transactionId !== null) this.transactionId = transactionId;
    for (const name of names) if (!this.byName.has(name)) this.byName.set(name, null);
    for (const id of ids) if (!this.byId.has(id)) this.byId.set(id, null);
    for (const { stream, version } of rows) this.rememberStream(stream, version);
  }

  private async lockedStreams(sql: string, values: unknown[]): Promise<StreamState[]> {
    const streams = await selectStreams(this.db, sql, values);
    for (const stream of streams) this.rememberStream(stream);
    return streams;
  }

  private async loadProducers(keys: Array<[string, string]>): Promise<void> {
    for (const { streamId, producerId, record } of await loadProducers(this.db, keys)) this.rememberProducer(streamId, producerId, record);
  }

  /** Every producer record of the streams that have at most ALL_PRODUCERS_LOADED of them. */
  private async loadAllProducers(streamIds: number[]): Promise<void> {
    this.roundTrips++;
    const { records, crowded } = await loadProducersWithin(this.db, streamIds, ALL_PRODUCERS_LOADED);
    for (const { streamId, producerId, record } of records) this.rememberProducer(streamId, producerId, record);
    for (const id of streamIds) if (!crowded.has(id)) this.allProducersKnown.add(id);
  }

  private async loadBuckets(ids: string[]): Promise<void> {
    const loaded = await loadBuckets(this.db, ids);
    for (const id of ids) if (!this.buckets.has(id)) this.buckets.set(id, null);
    for (const bucket of loaded) this.buckets.set(bucket.id, bucket);
  }

  /** Chunks as this batch sees them: the cold tier's below its boundary, its own appends, the table's rows, and its trims. */
  private readonly chunkSource: ChunkSource = {
    streamById: (id) => this.getStreamById(id),
    chunkContaining: (streamId, position) => this.trimmed(streamId, position, this.containingInTiers(streamId, position)),
    chunksFrom: (streamId, from, before) => this.chunksFromTiers(streamId, from, before),
  };

  private containingInTiers(streamId: number, position: number): StoredChunk | null {
    if (this.cold !== null && position < this.coldEnd(streamId)) return this.cold.containing(streamId, this.coldSegments(streamId, position, position + 1), position);
    return this.chunkContaining(streamId, position);
  }

  private chunksFromTiers(streamId: number, from: number, before: number): StoredChunk[] {
    const coldEnd = this.cold === null ? 0 : this.coldEnd(streamId);
    if (from >= coldEnd) return this.chunksFrom(streamId, from, before);
    const coldBefore = Math.min(before, coldEnd);
    const cold = this.withTrims(streamId, this.cold!.from(streamId, this.coldSegments(streamId, from, coldBefore), from, coldBefore));
    return coldBefore < before ? [...cold, ...this.chunksFrom(streamId, coldBefore, before)] : cold;
  }

  /** Where the stream's cold history ends; loaded once per batch, the stream being locked. */
  private coldEnd(streamId: number): number {
    const known = this.coldEnds.get(streamId);
    if (known !== undefined) return known;
    throw this.missing(false, async () => {
      const { rows } = await this.query<{ end: number }>('SELECT coalesce(max(end_offset), 0)::bigint AS end FROM cold_segments WHERE stream_id = $1', [streamId]);
      this.coldEnds.set(streamId, rows[0]!.end);
    });
  }

  private coldSegments(streamId: number, from: number, before: number): ColdSegmentRow[] {
    const found = this.coldLoads.get(streamId)?.find((load) => load.from <= from && before <= load.before);
    if (found !== undefined) return found.segments;
    throw this.missing(false, async () => {
      const { rows } = await this.query<SegmentColumns>(SEGMENTS_SQL, [streamId, from, before]);
      let loads = this.coldLoads.get(streamId);
      if (!loads) this.coldLoads.set(streamId, (loads = []));
      loads.push({ from, before, segments: rows.map(segmentOf) });
    });
  }

  /** The stream's chunks with `from <= start < before` as this batch sees them: stored rows, then its own appends, less its trims. */
  private chunksFrom(streamId: number, from: number, before: number): StoredChunk[] {
    const mine = (this.batchChunks.get(streamId) ?? []).filter((c) => c.start >= from && c.start < before);
    const stored = mine.length > 0 && mine[0]!.start <= from ? [] : this.windows.from(streamId, from, mine[0]?.start ?? before);
    return this.withTrims(streamId, [...stored, ...mine]);
  }

  /** The chunks less this batch's trim of the stream. */
  private withTrims(streamId: number, chunks: StoredChunk[]): StoredChunk[] {
    const trimAt = this.trims.get(streamId);
    if (trimAt === undefined) return chunks;
    const seen: StoredChunk[] = [];
    for (const chunk of chunks) {
      if (chunk.start >= trimAt) seen.push(chunk);
      else if (chunk.start + chunk.data.length > trimAt) seen.push({ start: trimAt, data: chunk.data.subarray(trimAt - chunk.start) });
    }
    return seen;
  }

  private chunkContaining(streamId: number, position: number): StoredChunk | null {
    const mine = this.batchChunks.get(streamId);
    if (mine && mine.length > 0 && mine[0]!.start <= position) {
      for (let i = mine.length - 1; i >= 0; i--) if (mine[i]!.start <= position) return mine[i]!;
    }
    return this.windows.containing(streamId, position, position + 1);
  }

  private trimmed(streamId: number, position: number, chunk: StoredChunk | null): StoredChunk | null {
    const at = this.trims.get(streamId);
    if (chunk === null || at === undefined || chunk.start >= at) return chunk;
    if (position < at) return null;
    return { start: at, data: chunk.data.subarray(at - chunk.start) };
  }
}

