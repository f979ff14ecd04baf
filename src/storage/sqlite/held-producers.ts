/**
 * Producer records changed by recent commits and not yet written to `producers`.
 *
 * Every applied producer append changes its record. Written to `producers` at once, each
 * change dirtied a page of the table and one of its `producers_seen` index for every
 * producer a batch touched, in places of their own: 5.5-7.3 KB written to storage per
 * 100-byte producer append at 500 streams, against 1.7-1.9 KB for a plain one. So the
 * changes of a commit are stored with its appends, in the `producers` column of its
 * `recent_batches` row (the row is durable with the commit), kept here, and written to
 * `producers` in bulk while the held appends are indexed: once per record per seal, not
 * once per commit.
 *
 * Recovery replays the changes of every remaining row in row order (last change of a
 * record wins). That gives the right records whatever the table already holds, so a
 * record may be written to the table early (before a query that reads the table) as long
 * as every change stays logged in the row of the commit that made it, and rows leave the
 * table only after every change they hold has been written there. Deletions are changes
 * too (logged, and written at once); a deleted stream's changes are skipped on replay
 * (stream ids are never reused).
 *
 * Changes made inside a transaction are undone if it rolls back.
 */
import type { ProducerRecord } from '../../core/types.js';

/** A record's new value, or null when it was deleted. */
export type ProducerChange = ProducerRecord | null;

export interface HeldChange {
  streamId: number;
  producerId: string;
  change: ProducerChange;
}

type ByStream = Map<number, Map<string, ProducerChange>>;

export class HeldProducers {
  /** Changes since the current seal began (or since the last one ended). */
  private held: ByStream = new Map();
  /** Changes from before the current seal began, written to the table as it proceeds. */
  private sealed: ByStream = new Map();
  private heldCount = 0;
  private sealedCount = 0;
  /** The open transaction's changes, in order, for its batch row. */
  private txnChanges: HeldChange[] = [];
  private undo: Array<() => void> | null = null;

  /** Records held, sealed or not. */
  get size(): number {
    return this.heldCount + this.sealedCount;
  }

  /** Whether every change from before the seal has been taken. */
  get sealDone(): boolean {
    return this.sealedCount === 0;
  }

  /** The record's newest change not yet written to the table; undefined when there is none. */
  get(streamId: number, producerId: string): ProducerChange | undefined {
    const change = this.held.get(streamId)?.get(producerId);
    return change !== undefined ? change : this.sealed.get(streamId)?.get(producerId);
  }

  put(streamId: number, record: ProducerRecord): void {
    this.change(streamId, record.id, record);
  }

  delete(streamId: number, producerId: string): void {
    this.change(streamId, producerId, null);
  }

  /** Drops what is held of a stream being deleted: its rows in `producers` go with it. */
  dropStream(streamId: number): void {
    this.takeStreamFrom('held', streamId);
    this.takeStreamFrom('sealed', streamId);
  }

  /**
   * Takes the stream's held changes, oldest first, for writing to the table now (so that
   * a query over the stream's records sees them).
   */
  takeStream(streamId: number): HeldChange[] {
    return [...this.takeStreamFrom('sealed', streamId), ...this.takeStreamFrom('held', streamId)];
  }

  /** A seal began: what is held now must be written before the sealed rows go. */
  seal(): void {
    if (this.sealedCount !== 0) throw new Error(`invariant: a seal began with ${this.sealedCount} producer changes of the last one unwritten`);
    const [held, heldCount] = [this.held, this.heldCount];
    this.sealed = held;
    this.sealedCount = heldCount;
    this.held = new Map();
    this.heldCount = 0;
    this.undo?.push(() => {
      this.held = held;
      this.heldCount = heldCount;
      this.sealed = new Map();
      this.sealedCount = 0;
    });
  }

  /** Takes sealed changes a whole stream at a time, for writing to the table, until `max` or more are taken or none are left. */
  takeSealed(max: number): HeldChange[] {
    const taken: HeldChange[] = [];
    for (const streamId of this.sealed.keys()) {
      if (taken.length >= max) break;
      taken.push(...this.takeStreamFrom('sealed', streamId));
    }
    return taken;
  }

  /** Takes every change, sealed first, for writing to the table (everything recent is indexed). */
  takeAll(): HeldChange[] {
    const taken: HeldChange[] = [];
    for (const streamId of [...this.sealed.keys()]) taken.push(...this.takeStreamFrom('sealed', streamId));
    for (const streamId of [...this.held.keys()]) taken.push(...this.takeStreamFrom('held', streamId));
    return taken;
  }

  /** The open transaction's changes in their stored form (null when it made none). */
  txnChangesPacked(): string | null {
    return this.txnChanges.length === 0 ? null : packProducerChanges(this.txnChanges);
  }

  begin(): void {
    this.undo = [];
    this.txnChanges = [];
  }

  commit(): void {
    this.undo = null;
    this.txnChanges = [];
  }

  rollback(): void {
    const steps = this.undo ?? [];
    this.undo = null;
    this.txnChanges = [];
    for (const step of steps.reverse()) step();
  }

  private change(streamId: number, producerId: string, change: ProducerChange): void {
    let records = this.held.get(streamId);
    if (!records) {
      records = new Map();
      this.held.set(streamId, records);
    }
    const before = records.get(producerId);
    records.set(producerId, change);
    if (before === undefined) this.heldCount++;
    this.txnChanges.push({ streamId, producerId, change });
    const list = records;
    this.undo?.push(() => {
      if (before !== undefined) return void list.set(producerId, before);
      list.delete(producerId);
      this.heldCount--;
      if (list.size === 0 && this.held.get(streamId) === list) this.held.delete(streamId);
    });
  }

  private takeStreamFrom(which: 'held' | 'sealed', streamId: number): HeldChange[] {
    const map = which === 'held' ? this.held : this.sealed;
    const records = map.get(streamId);
    if (!records) return [];
    map.delete(streamId);
    this.count(which, -records.size);
    this.undo?.push(() => {
      map.set(streamId, records);
      this.count(which, records.size);
    });
    return [...records].map(([producerId, change]) => ({ streamId, producerId, change }));
  }

  private count(which: 'held' | 'sealed', delta: number): void {
    if (which === 'held') this.heldCount += delta;
    else this.sealedCount += delta;
  }
}

/**
 * Stored form of a commit's changes: a JSON array, one entry per change in order,
 * `[streamId, producerId]` for a deletion and the record's fields after them for a new
 * value (every number an integer below 2^53, which JSON carries exactly).
 */
export function packProducerChanges(changes: readonly HeldChange[]): string {
  return JSON.stringify(changes.map(({ streamId, producerId, change: r }) =>
    r === null
      ? [streamId, producerId]
      : [streamId, producerId, r.epoch, r.lastSeq, r.receipt.start, r.receipt.next, r.receipt.closed ? 1 : 0, r.digest, r.claim.closedEpoch, r.claim.closedSeq, r.claim.digest, r.lastSeenMs],
  ));
}

const RECORD_ENTRY_LENGTH = 12;

/** The changes of one stored row; throws on a form packProducerChanges never writes (a broken invariant). */
export function unpackProducerChanges(packed: string): HeldChange[] {
  const entries: unknown = JSON.parse(packed);
  if (!Array.isArray(entries)) throw new Error('invariant: stored producer changes are not a list');
  return entries.map((entry: unknown) => {
    if (!Array.isArray(entry) || typeof entry[0] !== 'number' || typeof entry[1] !== 'string') {
      throw new Error(`invariant: a stored producer change is malformed: ${JSON.stringify(entry)}`);
    }
    const [streamId, producerId] = entry as [number, string];
    if (entry.length === 2) return { streamId, producerId, change: null };
    if (entry.length !== RECORD_ENTRY_LENGTH) throw new Error(`invariant: a stored producer record has ${entry.length} fields`);
    const [, , epoch, lastSeq, start, next, closed, digest, closedEpoch, closedSeq, claimDigest, lastSeenMs] = entry;
    const record: ProducerRecord = {
      id: producerId,
      epoch,
      lastSeq,
      receipt: { start, next, closed: closed === 1 },
      digest,
      claim: { closedEpoch, closedSeq, digest: claimDigest },
      lastSeenMs,
    };
    return { streamId, producerId, change: record };
  });
}
