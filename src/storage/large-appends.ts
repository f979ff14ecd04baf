/**
 * Large appends lately written or read from the database, kept in memory so that a reader
 * going through one in several responses loads it once, or not at all. An engine stores an
 * append as one row and hands out whole appends, so each response of a catch-up through a
 * 32 MiB append loaded all 32 MiB again (about 250 ms of the event loop here) to send 4
 * MiB of it: eight loads for one pass at the default window, and one per request for a
 * client asking for a small `max_bytes`.
 *
 * An engine keeps an append a read cut at its end (its reader comes back for the rest),
 * and an append larger than a default read window once the transaction writing it
 * commits (`begin`, `written`, `commit`), when its buffer is its own: a view would hold on
 * to memory the bound does not count. It drops one a read takes to its end, so that what
 * stays is what a reader is in the middle of (live readers of 1 MiB appends read in 64 KiB
 * windows left 64 MiB kept, none of it read again).
 *
 * Entries are immutable: the bytes at a position of a stream never change while the
 * stream exists. An engine forgets a stream's entries when it trims it, as a trimmed
 * append is stored again from its cut, and when it drops it, to free the memory.
 * Bounded by bytes, least recently used out first.
 */
import type { StoredChunk } from './chain.js';

/** Appends smaller than this load in a few milliseconds and are not kept. */
export const LARGE_APPEND_MIN_BYTES = 1024 * 1024;
/**
 * Appends written are kept from this size: larger than a read at the default window (4
 * MiB), so that every reader of one comes back for the rest. A stream of 1 MiB appends
 * read live would otherwise fill the memory with appends each read once.
 */
export const WRITTEN_MIN_BYTES = 4 * 1024 * 1024 + 1;
/** Room for two appends of the largest body a server takes by default (32 MiB). */
export const DEFAULT_LARGE_APPENDS_BYTES = 64 * 1024 * 1024;

interface Entry {
  streamId: number;
  append: StoredChunk;
}

export class LargeAppendCache {
  /** Entries by stream, for the lookup every indexed read makes. */
  private readonly byStream = new Map<number, Entry[]>();
  /** Every entry, least recently used first (a Map keeps insertion order). */
  private readonly byUse = new Map<Entry, true>();
  private bytes = 0;
  /** Appends the open transaction wrote, kept if it commits. */
  private pending: Entry[] = [];
  /** Lookups answered here. */
  hits = 0;

  constructor(private readonly maxBytes: number = DEFAULT_LARGE_APPENDS_BYTES) {}

  /** The kept append of `streamId` that holds `position`, if any. */
  containing(streamId: number, position: number): StoredChunk | undefined {
    const entry = this.find(streamId, position);
    if (entry === undefined) return undefined;
    this.byUse.delete(entry);
    this.byUse.set(entry, true);
    this.hits++;
    return entry.append;
  }

  /** Keeps an append loaded whole from the database, or committed, when it is large enough to be worth it. */
  keep(streamId: number, append: StoredChunk): void {
    const size = append.data.length;
    if (size < LARGE_APPEND_MIN_BYTES || size > this.maxBytes) return;
    if (this.find(streamId, append.start) !== undefined) return;
    while (this.bytes + size > this.maxBytes) this.remove(this.byUse.keys().next().value!);
    const entry: Entry = { streamId, append };
    const entries = this.byStream.get(streamId);
    if (entries === undefined) this.byStream.set(streamId, [entry]);
    else entries.push(entry);
    this.byUse.set(entry, true);
    this.bytes += size;
  }

  /** A transaction begins: what it writes waits for its commit. */
  begin(): void {
    this.pending = [];
  }

  /** An append the open transaction wrote. */
  written(streamId: number, append: StoredChunk): void {
    const { data } = append;
    const ownsItsMemory = data.byteOffset === 0 && data.buffer.byteLength === data.length;
    if (data.length >= WRITTEN_MIN_BYTES && ownsItsMemory) this.pending.push({ streamId, append });
  }

  commit(): void {
    for (const { streamId, append } of this.pending) this.keep(streamId, append);
    this.pending = [];
  }

  rollback(): void {
    this.pending = [];
  }

  /** Forgets one kept append: a read took it to its end. */
  drop(streamId: number, append: StoredChunk): void {
    const entry = this.byStream.get(streamId)?.find((e) => e.append === append);
    if (entry !== undefined) this.remove(entry);
  }

  /** Forgets every append of a stream, written in the open transaction too: it was trimmed or dropped. */
  forget(streamId: number): void {
    for (const entry of this.byStream.get(streamId) ?? []) this.remove(entry);
    if (this.pending.length > 0) this.pending = this.pending.filter((entry) => entry.streamId !== streamId);
  }

  /** Bytes held. */
  get size(): number {
    return this.bytes;
  }

  private find(streamId: number, position: number): Entry | undefined {
    if (this.bytes === 0) return undefined;
    return this.byStream.get(streamId)?.find(({ append }) => append.start <= position && position < append.start + append.data.length);
  }

  private remove(entry: Entry): void {
    this.byUse.delete(entry);
    this.bytes -= entry.append.data.length;
    const entries = this.byStream.get(entry.streamId)!;
    const left = entries.filter((e) => e !== entry);
    if (left.length === 0) this.byStream.delete(entry.streamId);
    else this.byStream.set(entry.streamId, left);
  }
}
