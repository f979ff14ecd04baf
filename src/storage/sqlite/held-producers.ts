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
import { PRODUCER_COLUMNS, producerFromValues, producerRow, type ProducerRow, type ProducerValues } from '../producer-columns.js';

/** A record's new value, or null when it was deleted. */
export type ProducerChange = ProducerRecord | null;

export interface HeldChange {
  streamId: number;
  producerId: string;
  change: ProducerChange;
}

/** Changes by stream and producer, with their count; every edit is undone with the open transaction. */
class ChangeSet {
  private readonly byStream = new Map<number, Map<string, ProducerChange>>();
  size = 0;

  constructor(private readonly undo: () => Array<() => void> | null) {}

  get(streamId: number, producerId: string): ProducerChange | undefined {
    return this.byStream.get(streamId)?.get(producerId);
  }

  set(streamId: number, producerId: string, change: ProducerChange): void {
    let records = this.byStream.get(streamId);
    if (!records) {
      records = new Map();
      this.byStream.set(streamId, records);
    }
    const list = records;
    const before = list.get(producerId);
    list.set(producerId, change);
    if (before === undefined) this.size++;
    this.undo()?.push(() => {
      if (before !== undefined) return void list.set(producerId, before);
      list.delete(producerId);
      this.size--;
      if (list.size === 0 && this.byStream.get(streamId) === list) this.byStream.delete(streamId);
    });
  }

  /** Takes the stream's changes out, in the order they were first made. */
  takeStream(streamId: number): HeldChange[] {
    const records = this.byStream.get(streamId);
    if (!records) return [];
    this.byStream.delete(streamId);
    this.size -= records.size;
    this.undo()?.push(() => {
      this.byStream.set(streamId, records);
      this.size += records.size;
    });
    return [...records].map(([producerId, change]) => ({ streamId, producerId, change }));
  }

  streamIds(): number[] {
    return [...this.byStream.keys()];
  }
}

export class HeldProducers {
  private undo: Array<() => void> | null = null;
  private readonly undoLog = () => this.undo;
  /** Changes since the current seal began (or since the last one ended). */
  private held = new ChangeSet(this.undoLog);
  /** Changes from before the current seal began, written to the table as it proceeds. */
  private sealed = new ChangeSet(this.undoLog);
  /** The open transaction's changes, in order, for its batch row. */
  private txnChanges: HeldChange[] = [];

  /** Records held, sealed or not. */
  get size(): number {
    return this.held.size + this.sealed.size;
  }

  /** Whether every change from before the seal has been taken. */
  get sealDone(): boolean {
    return this.sealed.size === 0;
  }

  /** The record's newest change not yet written to the table; undefined when there is none. */
  get(streamId: number, producerId: string): ProducerChange | undefined {
    const change = this.held.get(streamId, producerId);
    return change !== undefined ? change : this.sealed.get(streamId, producerId);
  }

  put(streamId: number, record: ProducerRecord): void {
    this.change(streamId, record.id, record);
  }

  delete(streamId: number, producerId: string): void {
    this.change(streamId, producerId, null);
  }

  /** Streams with changes held, sealed or not. */
  streamIds(): number[] {
    return [...new Set([...this.sealed.streamIds(), ...this.held.streamIds()])];
  }

  /** Drops what is held of a stream being deleted: its rows in `producers` go with it. */
  dropStream(streamId: number): void {
    this.takeStream(streamId);
  }

  /**
   * Takes the stream's held changes, oldest first, for writing to the table now (so that
   * a query over the stream's records sees them).
   */
  takeStream(streamId: number): HeldChange[] {
    return [...this.sealed.takeStream(streamId), ...this.held.takeStream(streamId)];
  }

  /** A seal began: what is held now must be written before the sealed rows go. */
  seal(): void {
    if (this.sealed.size !== 0) throw new Error(`invariant: a seal began with ${this.sealed.size} producer changes of the last one unwritten`);
    const [held, sealed] = [this.held, this.sealed];
    this.sealed = held;
    this.held = new ChangeSet(this.undoLog);
    this.undo?.push(() => {
      this.held = held;
      this.sealed = sealed;
    });
  }

  /** Takes sealed changes a whole stream at a time, for writing to the table, until `max` or more are taken or none are left. */
  takeSealed(max: number): HeldChange[] {
    const taken: HeldChange[] = [];
    for (const streamId of this.sealed.streamIds()) {
      if (taken.length >= max) break;
      taken.push(...this.sealed.takeStream(streamId));
    }
    return taken;
  }

  /** Takes every change, sealed first, for writing to the table (everything recent is indexed). */
  takeAll(): HeldChange[] {
    const taken: HeldChange[] = [];
    for (const set of [this.sealed, this.held]) for (const streamId of set.streamIds()) taken.push(...set.takeStream(streamId));
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
    this.held.set(streamId, producerId, change);
    this.txnChanges.push({ streamId, producerId, change });
  }
}

/**
 * Stored form of a commit's changes: a JSON array, one entry per change in order,
 * `[streamId, producerId]` for a deletion and `[streamId, ...producerValues(record)]` (producerRow) for
 * a new value (every number an integer below 2^53, which JSON carries exactly). The same
 * text built value by value (template strings, no stringifier) cost as many instructions,
 * in string joins and their flattening.
 */
export function packProducerChanges(changes: readonly HeldChange[]): string {
  const entries: Array<[number, string] | ProducerRow> = new Array(changes.length);
  for (let i = 0; i < changes.length; i++) {
    const { streamId, producerId, change } = changes[i]!;
    entries[i] = change === null ? [streamId, producerId] : producerRow(streamId, change);
  }
  return JSON.stringify(entries);
}

const RECORD_ENTRY_LENGTH = 1 + PRODUCER_COLUMNS.length;

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
    return { streamId, producerId, change: producerFromValues(entry.slice(1) as ProducerValues) };
  });
}
