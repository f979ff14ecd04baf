/**
 * The load-decide-apply step every engine runs inside its transaction. It holds no
 * protocol rule: it loads what `core/` needs, calls the decision, and writes back
 * exactly the changes the decision returned. Engines implement `Txn`.
 */
import { randomBytes } from 'node:crypto';
import { decideAppend } from '../core/append.js';
import { decidePutAttrs } from '../core/attrs.js';
import {
  decidePublishSnapshot,
  decideRetention,
  physicalTrimPosition,
  type PublishSnapshotRequest,
  type RetentionRequest,
} from '../core/snapshot.js';
import { decideBucketSettings, decideCreateBucket, decideDeleteBucket, type BucketState } from '../core/bucket.js';
import type { BucketSettingsChange } from '../core/bucket-settings.js';
import { decideCreate, type ChunkView } from '../core/create.js';
import { applyPolicy, physicalTrimDue, policyInForce, type RetentionPolicy } from '../core/retention-policy.js';
import { forgetCutoffMs } from '../core/producer.js';
import { appendOrdinalFromCount, countMessagesIn, hasRecords, recordCountAt, recordFromCount } from '../core/records.js';
import { decideDelete, decideExpire, decideRelease, touched } from '../core/stream.js';
import { decideTransaction, refusalAt, type CommittedOperation } from '../core/transaction.js';
import type { AppendChanges, ProducerRecord, ProducerSettings, ProducerView, StreamState } from '../core/types.js';
import type { LinkView, SubscriptionLink, SubscriptionState } from '../core/subscription-types.js';
import type { CommandName, CommitEvent, StoreCommands } from './store.js';
import { SubscriptionSteps } from './subscription-steps.js';

/**
 * Synchronous access to one engine's state inside an open transaction: streams, buckets
 * and producers here, subscriptions and their links in `subscriptions`.
 */
export interface Txn {
  readonly subscriptions: SubscriptionTxn;

  getStream(name: string): StreamState | undefined;
  getStreamById(id: number): StreamState | undefined;
  getBucket(id: string): BucketState | undefined;
  /** Streams in the bucket not deleted (those past their expiry included); not rows kept only for forks. */
  countUndeletedStreams(bucket: string): number;
  /** The bucket's streams past their expiry that are not yet deleted. */
  expiredBucketStreams(bucket: string, nowMs: number): StreamState[];
  getProducer(streamId: number, producerId: string): ProducerRecord | undefined;
  producerSummary(streamId: number, cutoffMs: number, excludeId: string): NonNullable<ProducerView['others']>;
  chunkAt(stream: StreamState, position: number): ChunkView | null;
  /** The stream's stored appends covering `[from, before)` (through its fork source), cut to that range. */
  chunksBetween(stream: StreamState, from: number, before: number): ChunkView[];
  nextStreamId(): number;
  /** Streams past their expiry that are not yet deleted. */
  expiredStreams(nowMs: number, limit: number): StreamState[];
  /** Streams not deleted whose `ageDueMs` is at or before `nowMs`, the earliest due first. */
  ageDueStreams(nowMs: number, limit: number): StreamState[];

  putBucket(bucket: BucketState): void;
  dropBucket(id: string): void;
  insertStream(stream: StreamState): void;
  updateStream(stream: StreamState): void;
  /** Removes the stream row with its data and producers. */
  dropStream(stream: StreamState): void;
  appendChunk(streamId: number, start: number, data: Buffer): void;
  putProducer(streamId: number, record: ProducerRecord): void;
  deleteProducers(streamId: number, ids: string[]): void;
  forgetProducers(streamId: number, seenAtOrBeforeMs: number): void;
  putSnapshotBody(streamId: number, body: Buffer): void;
  /** Deletes the stream's own bytes before `position` (a message boundary). */
  trimBefore(stream: StreamState, position: number): void;
  /** The lowest earliest offset among every stream forked, directly or not, from this one. */
  descendantsEarliest(streamId: number): number | null;

  /**
   * For engines whose reads may throw MissingState (missing.ts): a step (one command, or
   * the reads' TTL renewals) begins, and `rewindStep` undoes its changes so far.
   */
  beginStep?(): void;
  rewindStep?(): void;
}

/** A transaction's subscriptions and links (core/subscription-types.ts), each engine's in a file of its own. */
export interface SubscriptionTxn {
  getSubscription(key: string): SubscriptionState | undefined;
  putSubscription(subscription: SubscriptionState): void;
  /** Removes the subscription with all its links. */
  dropSubscription(key: string): void;
  countSubscriptions(): number;
  /** The scope's subscriptions that have a pattern (at most maxSubscriptions exist). */
  patternSubscriptions(scope: string): SubscriptionState[];
  /** Keys of every subscription of the scope (a bucket being deleted drops them). */
  scopeSubscriptionKeys(scope: string): string[];
  getLink(subKey: string, stream: string): SubscriptionLink | undefined;
  putLink(link: SubscriptionLink): void;
  dropLink(subKey: string, stream: string): void;
  /** Removes every link to the stream: it was deleted or expired. */
  dropStreamLinks(stream: string): void;
  countLinks(subKey: string): number;
  /** The subscription's links in path order (bytewise) after `afterPath`, with their streams' tails. */
  links(subKey: string, afterPath: string | null, limit: number): LinkView[];
  /** Links whose stream (undeleted) has a tail beyond the acked offset, in path order, at most `limit`. */
  pendingLinks(subKey: string, limit: number): LinkView[];
  /**
   * Undeleted streams whose storage key starts with `keyPrefix` (a scope and a literal path
   * prefix), in key order, at most `limit`: the candidates for a new pattern.
   */
  streamsByPrefix(keyPrefix: string, limit: number): Array<{ name: string; tail: number }>;
}

/**
 * Thrown by a step that has applied changes and must now refuse: the batch's transaction
 * is rolled back and runs again without the command, which is answered `outcome`
 * (batched.ts). A refused group transaction leaves nothing behind this way, on every engine.
 */
export class CommandRefused extends Error {
  constructor(readonly outcome: unknown) {
    super('command refused after applying changes');
  }
}

export function newIncarnation(): string {
  return randomBytes(12).toString('base64url');
}

/** Runs commands against one transaction and collects what changed. */
export class Executor {
  readonly events = new Map<string, CommitEvent>();

  private readonly subs: SubscriptionSteps;

  constructor(
    private readonly txn: Txn,
    private readonly settings: ProducerSettings,
    private readonly nowMs: number,
  ) {
    this.subs = new SubscriptionSteps(txn, nowMs, (name, request) => this.append(name, request));
  }

  /** Each command's step, built once: a table made per call cost a closure per command (hot on appends). */
  private static readonly steps: { [N in CommandName]: (e: Executor, i: StoreCommands[N]['input']) => StoreCommands[N]['output'] } = {
    createBucket: (e, i) => e.createBucket(i.id),
    deleteBucket: (e, i) => e.deleteBucket(i.id),
    setBucketSettings: (e, i) => e.setBucketSettings(i.id, i.change),
    createStream: (e, i) => e.createStream(i),
    append: (e, i) => e.append(i.name, i.request, i.bucketRetention),
    appendTransaction: (e, i) => e.appendTransaction(i.operations),
    deleteStream: (e, i) => e.deleteStream(i.name, i.incarnation),
    expireStreams: (e, i) => e.expireStreams(i.limit),
    trimAged: (e, i) => e.trimAged(i.limit),
    publishSnapshot: (e, i) => e.publishSnapshot(i.name, i.request, i.body),
    setRetention: (e, i) => e.setRetention(i.name, i.request),
    putAttrs: (e, i) => e.putAttrs(i.name, i.attrs, i.incarnation),
    createSubscription: (e, i) => e.subs.create(i),
    deleteSubscription: (e, i) => e.subs.delete(i),
    addSubscriptionStreams: (e, i) => e.subs.addStreams(i),
    removeSubscriptionStream: (e, i) => e.subs.removeStream(i),
    wakeSubscription: (e, i) => e.subs.wake(i),
    claimSubscription: (e, i) => e.subs.claim(i),
    ackSubscription: (e, i) => e.subs.ack(i),
    releaseSubscription: (e, i) => e.subs.release(i),
    recordDelivery: (e, i) => e.subs.recordDelivery(i),
  };

  run<K extends CommandName>(kind: K, input: StoreCommands[K]['input']): StoreCommands[K]['output'] {
    const step = Executor.steps[kind] as (e: Executor, i: StoreCommands[K]['input']) => StoreCommands[K]['output'];
    return step(this, input);
  }

  /** Stores reads' renewals of sliding TTLs (stream id -> read time); core decides each. */
  storeTouches(touches: ReadonlyMap<number, number>): void {
    for (const [id, atMs] of touches) {
      const stream = this.txn.getStreamById(id);
      if (!stream) continue;
      const next = touched(stream, atMs);
      if (next !== stream) this.txn.updateStream(next);
    }
  }

  private changed(stream: StreamState): void {
    this.events.set(stream.name, { name: stream.name, streamId: stream.id, stream });
  }

  private dropped(stream: StreamState): void {
    this.events.set(stream.name, { name: stream.name, streamId: stream.id, stream: undefined });
  }

  private createBucket(id: string): StoreCommands['createBucket']['output'] {
    const outcome = decideCreateBucket(this.txn.getBucket(id), id, this.nowMs);
    if (outcome.kind === 'created') this.txn.putBucket(outcome.bucket);
    return outcome;
  }

  /** putBucket of a bucket that exists rewrites its row: every engine's putBucket is an upsert. */
  private setBucketSettings(id: string, change: BucketSettingsChange): StoreCommands['setBucketSettings']['output'] {
    const outcome = decideBucketSettings(this.txn.getBucket(id), change);
    if (outcome.kind === 'set') this.txn.putBucket(outcome.bucket);
    return outcome;
  }

  private deleteBucket(id: string): StoreCommands['deleteBucket']['output'] {
    const { outcome, expire } = decideDeleteBucket(
      this.txn.getBucket(id),
      this.txn.countUndeletedStreams(id),
      this.txn.expiredBucketStreams(id, this.nowMs),
      this.nowMs,
    );
    if (outcome.kind !== 'deleted') return outcome;
    for (const stream of expire) this.expire(stream);
    this.subs.bucketGone(id);
    this.txn.dropBucket(id);
    return outcome;
  }

  private createStream(request: StoreCommands['createStream']['input']): StoreCommands['createStream']['output'] {
    const existing = this.txn.getStream(request.name);
    const forkSource = request.fork ? this.txn.getStream(request.fork.sourceName) : undefined;
    const forkPosition = request.fork && forkSource ? (request.fork.offset ?? forkSource.tail) : null;
    const forkAnchor = forkSource && forkPosition !== null && forkPosition <= forkSource.tail ? this.txn.chunkAt(forkSource, forkPosition) : null;
    const { outcome, changes } = decideCreate({
      existing,
      request,
      bucketExists: request.bucket === null || this.txn.getBucket(request.bucket) !== undefined,
      forkSource,
      forkAnchor,
      forkRecord: forkSource && forkPosition !== null ? this.recordAt(forkSource, forkPosition) : null,
      newId: this.txn.nextStreamId(),
      newIncarnation: newIncarnation(),
      nowMs: this.nowMs,
    });
    if (!changes) return outcome;
    if (changes.collect) this.drop(changes.collect);
    if (changes.source) {
      this.txn.updateStream(changes.source);
      this.changed(changes.source);
    }
    this.txn.insertStream(changes.stream);
    let ownDataFrom = changes.stream.tail;
    for (const chunk of changes.chunks) {
      this.txn.appendChunk(changes.stream.id, chunk.start, chunk.data);
      ownDataFrom = Math.min(ownDataFrom, chunk.start);
    }
    this.subs.streamCreated(changes.stream, ownDataFrom);
    this.changed(changes.stream);
    // Initial bytes are held to the stream's own policy like an append's.
    if (changes.chunks.length > 0) this.enforcePolicy(changes.stream, undefined);
    return outcome;
  }

  private append(name: string, request: StoreCommands['append']['input']['request'], bucketRetention?: RetentionPolicy): StoreCommands['append']['output'] {
    const stream = this.txn.getStream(name);
    const producers = stream && request.producer ? this.producerView(stream, request.producer.id) : null;
    const { outcome, changes } = decideAppend({ stream, request, producers, settings: this.settings, nowMs: this.nowMs });
    if (changes) {
      this.applyAppend(changes);
      if (changes.chunk) this.enforcePolicy(changes.stream, bucketRetention);
    }
    return outcome;
  }

  /**
   * Trims a stream its retention policy (its own, else its bucket's) says holds too much,
   * in the transaction that made it so: readers never see more than the policy keeps, and
   * any node may do it (raising the earliest offset to a boundary is idempotent). The
   * bytes go at PHYSICAL_TRIM_STEP_BYTES steps, never those a fork still reads.
   */
  private enforcePolicy(stream: StreamState, bucketRetention: RetentionPolicy | undefined, appended = true): void {
    const policy = policyInForce(stream, bucketRetention);
    if (policy === undefined && stream.timeMarks === undefined) return;
    const recordAt = (offset: number) => {
      const record = this.recordAt(stream, offset);
      if (record === null) throw new Error('invariant: a policy trim needs the ordinal at the new earliest offset');
      return record;
    };
    const next = applyPolicy(stream, policy, (position) => this.txn.chunkAt(stream, position), recordAt, this.nowMs, appended);
    if (next === null) return;
    this.txn.updateStream(next);
    if (physicalTrimDue(stream.earliestOffset, next.earliestOffset)) {
      this.txn.trimBefore(next, physicalTrimPosition(next, this.txn.descendantsEarliest(next.id)));
    }
    this.changed(next);
  }

  /** The sweep's part of an age limit: streams whose oldest time mark is due, trimmed without an append. */
  private trimAged(limit: number): StoreCommands['trimAged']['output'] {
    let trimmed = 0;
    for (const stream of this.txn.ageDueStreams(this.nowMs, limit)) {
      const bucket = stream.bucket === null ? undefined : this.txn.getBucket(stream.bucket);
      const before = stream.earliestOffset;
      this.enforcePolicy(stream, bucket?.settings?.retention, false);
      if ((this.txn.getStreamById(stream.id)?.earliestOffset ?? before) > before) trimmed++;
    }
    return { trimmed };
  }


  /**
   * Applies the operations in order, each seeing the ones before it. A refusal after the
   * first operation throws CommandRefused, so that what the earlier ones applied is undone.
   */
  private appendTransaction(operations: StoreCommands['appendTransaction']['input']['operations']): StoreCommands['appendTransaction']['output'] {
    const outcomes: CommittedOperation[] = [];
    for (const [index, { name, request, bucketRetention }] of operations.entries()) {
      const outcome = this.append(name, request, bucketRetention);
      const refusal = refusalAt(outcome, index);
      if (refusal && index === 0) return refusal;
      if (refusal) throw new CommandRefused(refusal);
      outcomes.push(outcome as CommittedOperation);
    }
    const decided = decideTransaction(outcomes);
    if (decided.kind === 'rejected') throw new CommandRefused(decided);
    return decided;
  }

  private producerView(stream: StreamState, producerId: string): ProducerView {
    const record = this.txn.getProducer(stream.id, producerId) ?? null;
    const cutoff = forgetCutoffMs(this.settings, this.nowMs);
    if (record && record.lastSeenMs > cutoff) return { record };
    return { record, others: this.txn.producerSummary(stream.id, cutoff, producerId) };
  }

  private applyAppend(changes: AppendChanges): void {
    const id = changes.stream.id;
    if (changes.forgetProducersSeenAtOrBeforeMs !== null) this.txn.forgetProducers(id, changes.forgetProducersSeenAtOrBeforeMs);
    if (changes.evictProducerIds.length > 0) this.txn.deleteProducers(id, changes.evictProducerIds);
    if (changes.chunk) this.txn.appendChunk(id, changes.chunk.start, changes.chunk.data);
    if (changes.producer) this.txn.putProducer(id, changes.producer);
    this.txn.updateStream(changes.stream);
    this.changed(changes.stream);
  }

  private deleteStream(name: string, incarnation: string | null): StoreCommands['deleteStream']['output'] {
    const decision = decideDelete(this.txn.getStream(name), incarnation, this.nowMs);
    if (decision.kind === 'soft-deleted') {
      this.txn.updateStream(decision.next);
      this.subs.streamGone(decision.next);
      this.changed(decision.next);
      return decision;
    }
    if (decision.kind === 'dropped') {
      this.drop(decision.dropped);
      return { kind: 'dropped' };
    }
    return decision;
  }

  private expireStreams(limit: number): StoreCommands['expireStreams']['output'] {
    let expired = 0;
    for (const stream of this.txn.expiredStreams(this.nowMs, limit)) if (this.expire(stream)) expired++;
    return { expired };
  }

  /** Applies core's expiry to a stream: dropped, or soft-deleted while forks read it. False when it was not due. */
  private expire(stream: StreamState): boolean {
    const decision = decideExpire(stream, this.nowMs);
    if (decision.kind === 'soft-deleted') {
      this.txn.updateStream(decision.next);
      this.subs.streamGone(decision.next);
      this.changed(decision.next);
    } else if (decision.kind === 'dropped') {
      this.drop(decision.dropped);
    }
    return decision.kind !== 'none';
  }

  /**
   * The message ordinal at `position`, counted over the stored bytes as core/records.ts
   * says (records, or appends on a stream without records); null when the position lies
   * outside the retained range (the decision then refuses the request).
   */
  private recordAt(stream: StreamState, position: number): number | null {
    if (position < stream.earliestOffset || position > stream.tail) return null;
    const count = recordCountAt(stream, position);
    const messages = count.from < count.to ? countMessagesIn(stream, this.txn.chunksBetween(stream, count.from, count.to)) : 0;
    if (hasRecords(stream)) return recordFromCount(count, messages);
    return appendOrdinalFromCount(count, messages, count.sign === 1 || this.txn.chunkAt(stream, position)?.start === position);
  }

  private anchorFor(stream: StreamState | undefined, position: number): ChunkView | null {
    return stream && position <= stream.tail ? this.txn.chunkAt(stream, position) : null;
  }

  private publishSnapshot(name: string, request: PublishSnapshotRequest, body: Buffer): StoreCommands['publishSnapshot']['output'] {
    const stream = this.txn.getStream(name);
    const outcome = decidePublishSnapshot({ stream, request, anchor: this.anchorFor(stream, request.offset), nowMs: this.nowMs });
    if (outcome.kind === 'published' && outcome.replaced) {
      this.txn.putSnapshotBody(outcome.stream.id, body);
      this.txn.updateStream(outcome.stream);
      this.changed(outcome.stream);
    }
    return outcome;
  }

  private setRetention(name: string, request: RetentionRequest): StoreCommands['setRetention']['output'] {
    const stream = this.txn.getStream(name);
    const recordAtOffset = stream ? this.recordAt(stream, request.offset) : null;
    const outcome = decideRetention(stream, request, this.anchorFor(stream, request.offset), recordAtOffset, this.nowMs);
    if (outcome.kind === 'retained' && outcome.changed) {
      this.txn.updateStream(outcome.stream);
      this.txn.trimBefore(outcome.stream, physicalTrimPosition(outcome.stream, this.txn.descendantsEarliest(outcome.stream.id)));
      this.changed(outcome.stream);
    }
    return outcome;
  }

  private putAttrs(name: string, attrs: string | null, incarnation: string | null): StoreCommands['putAttrs']['output'] {
    const outcome = decidePutAttrs(this.txn.getStream(name), attrs, incarnation, this.nowMs);
    if (outcome.kind === 'replaced' && outcome.changed) this.txn.updateStream(outcome.stream);
    return outcome;
  }

  /** Drops a stream and releases the fork sources it held, collecting those left unused. */
  private drop(stream: StreamState): void {
    let current: StreamState | undefined = stream;
    while (current) {
      this.txn.dropStream(current);
      this.subs.streamGone(current);
      this.dropped(current);
      const sourceId: number | undefined = current.fork?.sourceId;
      const source = sourceId === undefined ? undefined : this.txn.getStreamById(sourceId);
      current = undefined;
      if (!source) break;
      const release = decideRelease(source, this.nowMs);
      if (release.kind === 'kept') {
        this.txn.updateStream(release.next);
        this.changed(release.next);
      } else {
        current = release.dropped;
      }
    }
  }
}

