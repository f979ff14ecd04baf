/**
 * The newest appends, kept in memory and in an unindexed table (one row per committed
 * batch, see recent-batches.ts) until they are indexed in bulk.
 *
 * Inserting each append into the (stream, start) index of `chunks` dirties one index
 * page per stream written in a commit, and every dirty page is a frame written to the
 * WAL: with hundreds of streams a batch of appends spreads over as many pages. Appends
 * therefore go to `recent_batches`, whose rowid only grows, so a commit writes one or two
 * pages of it. Once enough have gathered they are sealed and moved into `chunks` a slice
 * at a time, stream after stream in id order, so that each index page is written once
 * for many appends and no single move stalls the server for long. When every sealed
 * append is indexed, their rows leave `recent_batches` as one contiguous range of ids.
 *
 * Only a stream's oldest recent appends are ever moved, so every recent append of a
 * stream lies after every indexed one: a read takes the indexed part from SQLite and the
 * rest from here. Changes made inside a transaction are undone if it rolls back, like
 * the stream cache's.
 */
import type { StoredChunk } from '../chain.js';
import type { PackedAppend } from './recent-batches.js';

/**
 * Appends at least this large count toward the seal's mark for large appends. A row of
 * the index costs one page per stream whatever it holds, so holding a 100-byte append
 * saves much (that page is 40 times its size) and a large one next to nothing, while
 * holding large ones is what fills memory.
 */
export const LARGE_APPEND_BYTES = 4096;

/** When what is held gets sealed: any one of these reached. */
export interface SealMarks {
  rows: number;
  bytes: number;
  /** Bytes of appends of LARGE_APPEND_BYTES or more. */
  largeBytes: number;
}

/** What an append of `length` bytes adds to the bytes of large appends. */
function largePart(length: number): number {
  return length >= LARGE_APPEND_BYTES ? length : 0;
}

/** Bytes of a list of appends, all and of the large ones. */
function sizesOf(chunks: readonly StoredChunk[]): { bytes: number; largeBytes: number } {
  let bytes = 0;
  let largeBytes = 0;
  for (const { data } of chunks) {
    bytes += data.length;
    largeBytes += largePart(data.length);
  }
  return { bytes, largeBytes };
}

export interface RecentChunk extends StoredChunk {
  /** The id of its batch's row in `recent_batches`, shared by the appends of one batch. */
  id: number;
}

interface Seal {
  /** Appends with ids up to this one are sealed. */
  upToId: number;
  /** Streams that may still hold sealed rows, in id order, and the next one to take. */
  streams: number[];
  next: number;
}

export class RecentChunks {
  private byStream = new Map<number, RecentChunk[]>();
  private rows = 0;
  private bytes = 0;
  private largeBytes = 0;
  private lastId = 0;
  private seal: Seal | null = null;
  /** Rows added since `takeAddedCount` last ran. */
  private added = 0;
  private undo: Array<() => void> | null = null;

  get size(): number {
    return this.rows;
  }

  /** Streams with appends held. */
  get streamCount(): number {
    return this.byStream.size;
  }

  /** Rows added since the last call (rolled-back additions excluded). */
  takeAddedCount(): number {
    const added = this.added;
    this.added = 0;
    return added;
  }

  /** The id up to which every append is sealed, while sealed appends are being indexed. */
  get sealedUpToId(): number | null {
    return this.seal?.upToId ?? null;
  }

  /** Seals what is here when enough has gathered and nothing sealed is left. */
  sealIfFull(marks: SealMarks): void {
    if (this.seal !== null) return;
    if (this.rows < marks.rows && this.bytes < marks.bytes && this.largeBytes < marks.largeBytes) return;
    const streams = [...this.byStream.keys()].sort((a, b) => a - b);
    this.setSeal({ upToId: this.lastId, streams, next: 0 });
  }

  /**
   * Takes up to `maxRows` sealed appends, stream after stream, the oldest of each stream
   * first, in that order ([] when nothing sealed is left).
   */
  takeSealed(maxRows: number): PackedAppend[] {
    const seal = this.seal;
    if (!seal) return [];
    const taken: PackedAppend[] = [];
    const startNext = seal.next;
    while (taken.length < maxRows && seal.next < seal.streams.length) {
      const streamId = seal.streams[seal.next]!;
      for (const { start, data } of this.takePrefix(streamId, seal.upToId, maxRows - taken.length)) taken.push({ streamId, start, data });
      if (taken.length < maxRows) seal.next++;
    }
    this.undo?.push(() => {
      seal.next = startNext;
    });
    return taken;
  }

  /** Whether every sealed row has been taken. */
  get sealDone(): boolean {
    return this.seal !== null && this.seal.next >= this.seal.streams.length;
  }

  /** The sealed rows are indexed and gone from the table. */
  endSeal(): void {
    this.setSeal(null);
  }

  /** Takes every append held of one stream, sealed or not, oldest first (to index them now). */
  takeStream(streamId: number): RecentChunk[] {
    return this.takePrefix(streamId, Infinity, Infinity);
  }

  /** Takes everything, sealed or not, for indexing all at once, stream after stream. */
  takeAll(): PackedAppend[] {
    const taken = [...this.byStream]
      .sort(([a], [b]) => a - b)
      .flatMap(([streamId, list]) => list.map(({ start, data }): PackedAppend => ({ streamId, start, data })));
    const [byStream, rows, bytes, largeBytes] = [this.byStream, this.rows, this.bytes, this.largeBytes];
    this.byStream = new Map();
    this.rows = 0;
    this.bytes = 0;
    this.largeBytes = 0;
    this.undo?.push(() => {
      this.byStream = byStream;
      this.rows = rows;
      this.bytes = bytes;
      this.largeBytes = largeBytes;
    });
    this.setSeal(null);
    return taken;
  }

  add(streamId: number, chunk: RecentChunk): void {
    if (chunk.id < this.lastId) throw new Error(`invariant: recent batch id ${chunk.id} after ${this.lastId}`);
    let list = this.byStream.get(streamId);
    if (!list) {
      list = [];
      this.byStream.set(streamId, list);
    }
    const last = list[list.length - 1];
    if (last && last.start + last.data.length > chunk.start) {
      throw new Error(`invariant: stream ${streamId} append at ${chunk.start} overlaps the one at ${last.start}`);
    }
    list.push(chunk);
    const lastId = this.lastId;
    this.lastId = chunk.id;
    const largeBytes = largePart(chunk.data.length);
    this.count(1, chunk.data.length, largeBytes);
    this.added++;
    this.undo?.push(() => {
      this.added--;
      list.pop();
      if (list.length === 0 && this.byStream.get(streamId) === list) this.byStream.delete(streamId);
      this.lastId = lastId;
      this.uncount(1, chunk.data.length, largeBytes);
    });
  }

  /** Where the stream's last recent append ends, if it has one. */
  lastEnd(streamId: number): number | undefined {
    const list = this.byStream.get(streamId);
    const last = list?.[list.length - 1];
    return last === undefined ? undefined : last.start + last.data.length;
  }

  /** Where the stream's first recent append starts, if it has one. */
  firstStart(streamId: number): number | undefined {
    return this.byStream.get(streamId)?.[0]!.start;
  }

  /** The recent append with the greatest start at or before `position`, if any. */
  containing(streamId: number, position: number): StoredChunk | null {
    const list = this.byStream.get(streamId);
    if (!list || list[0]!.start > position) return null;
    let low = 0;
    let high = list.length - 1;
    while (low < high) {
      const mid = (low + high + 1) >> 1;
      if (list[mid]!.start <= position) low = mid;
      else high = mid - 1;
    }
    // A plain chunk: the batch id is this table's business, not the reader's.
    const { start, data } = list[low]!;
    return { start, data };
  }

  /** The recent appends with `from <= start < before`, in order. */
  *from(streamId: number, from: number, before: number): Iterable<StoredChunk> {
    const list = this.byStream.get(streamId);
    if (!list) return;
    for (const chunk of list) {
      if (chunk.start >= before) return;
      if (chunk.start >= from) yield chunk;
    }
  }

  /** Removes a stream's recent appends: it is being deleted. */
  forget(streamId: number): void {
    const list = this.byStream.get(streamId);
    if (!list) return;
    this.byStream.delete(streamId);
    const { bytes, largeBytes } = sizesOf(list);
    this.uncount(list.length, bytes, largeBytes);
    this.undo?.push(() => {
      this.byStream.set(streamId, list);
      this.count(list.length, bytes, largeBytes);
    });
  }

  begin(): void {
    this.undo = [];
  }

  commit(): void {
    this.undo = null;
  }

  rollback(): void {
    const steps = this.undo ?? [];
    this.undo = null;
    for (const step of steps.reverse()) step();
  }

  /** Removes up to `max` of the stream's oldest appends with batch ids up to `upToId`. */
  private takePrefix(streamId: number, upToId: number, max: number): RecentChunk[] {
    const list = this.byStream.get(streamId);
    if (!list) return [];
    let n = 0;
    while (n < list.length && n < max && list[n]!.id <= upToId) n++;
    if (n === 0) return [];
    const taken = list.splice(0, n);
    if (list.length === 0) this.byStream.delete(streamId);
    const { bytes, largeBytes } = sizesOf(taken);
    this.uncount(n, bytes, largeBytes);
    this.undo?.push(() => {
      list.unshift(...taken);
      if (!this.byStream.has(streamId)) this.byStream.set(streamId, list);
      this.count(n, bytes, largeBytes);
    });
    return taken;
  }

  private setSeal(seal: Seal | null): void {
    const previous = this.seal;
    this.seal = seal;
    this.undo?.push(() => {
      this.seal = previous;
    });
  }

  private count(rows: number, bytes: number, largeBytes: number): void {
    this.rows += rows;
    this.bytes += bytes;
    this.largeBytes += largeBytes;
  }

  /**
   * count's inverse, by subtraction: `count(-n, -bytes, -largeBytes)` passed -0 for no
   * large bytes, a double, which turned the counters into doubles on the first indexing
   * slice and deoptimized `add` and `HeldWrites.addAppend` (run unoptimized for the
   * next few thousand appends: about 2,000 instructions an append in that stretch).
   */
  private uncount(rows: number, bytes: number, largeBytes: number): void {
    this.rows -= rows;
    this.bytes -= bytes;
    this.largeBytes -= largeBytes;
  }
}
