/**
 * Reads of the cold tier: a stream's segments fetched whole (their digest covers the
 * whole object), checked, decoded, and kept in an LRU cache bounded by bytes. A read of
 * one segment starts fetching the next in the background, so that a catch-up reading a
 * stream from its start finds the next segment on its way or already here.
 */
import type { StreamState } from '../../core/types.js';
import type { StoredChunk } from '../chain.js';
import { ColdObjectInvalidError, ColdStoreUnavailableError } from '../errors.js';
import { andThen, type Answer, type ColdHost, type ColdSegmentRow } from './host.js';
import type { ObjectStore } from './object-store.js';
import { decodeSegment, SegmentInvalid } from './segment.js';

export interface ColdReadCounters {
  cacheHits: number;
  cacheMisses: number;
  fetches: number;
  /** Seconds the fetches took, added up (with `fetches`, the mean latency). */
  fetchSeconds: number;
  /** Told of each fetch's time, for a histogram. */
  onFetch?: (seconds: number) => void;
}

/**
 * Thrown by a synchronous read (an engine's transaction) that needs a segment not in
 * memory: the command fails, and the tier fetches `segment` and runs it again.
 */
export class ColdSegmentNeeded extends Error {
  constructor(
    readonly streamId: number,
    readonly segment: ColdSegmentRow,
  ) {
    super(`cold segment ${segment.key} of stream id ${streamId} is not in memory`);
  }
}

function syncAnswer<T>(answer: Answer<T>): T {
  if (answer instanceof Promise) throw new Error('invariant: a synchronous cold read on an asynchronous host');
  return answer;
}

interface Cached {
  appends: StoredChunk[];
  bytes: number;
}

export class ColdReads {
  /** Decoded segments by key, least recently used first (a Map keeps insertion order). */
  private readonly cache = new Map<string, Cached>();
  private cachedBytes = 0;
  /** Fetches under way, shared by every reader of one segment. */
  private readonly fetching = new Map<string, Promise<Cached>>();
  readonly counters: ColdReadCounters = { cacheHits: 0, cacheMisses: 0, fetches: 0, fetchSeconds: 0 };

  constructor(
    private readonly host: ColdHost,
    private readonly objects: ObjectStore,
    private readonly cacheBytes: number,
  ) {}

  /** The stream's own appends `[from, before)` held in its segments, cut to that range. */
  async read(stream: StreamState, from: number, before: number): Promise<StoredChunk[]> {
    const found = this.host.segments(stream.id, from, before);
    const segments = found instanceof Promise ? await found : found;
    const parts: StoredChunk[] = [];
    let at = from;
    for (const segment of segments) {
      if (segment.start > at) throw new ColdObjectInvalidError(stream.name, at, segment.start, '(none)', 'is missing: no segment holds this range');
      const appends = await this.segment(stream, segment);
      for (const a of appends) {
        const end = a.start + a.data.length;
        if (end <= at || a.start >= before) continue;
        parts.push({ start: Math.max(a.start, at), data: a.data.subarray(Math.max(0, at - a.start), Math.min(a.data.length, before - a.start)) });
      }
      at = Math.min(before, segment.end);
    }
    if (at < before) throw new ColdObjectInvalidError(stream.name, at, before, '(none)', 'is missing: no segment holds this range');
    this.readAhead(stream, segments.at(-1));
    return parts;
  }

  /** The appends of the segment holding `position`, or null when none does. */
  async appendsAt(stream: StreamState, position: number): Promise<StoredChunk[] | null> {
    const segment = (await this.host.segments(stream.id, position, position + 1))[0];
    return segment === undefined ? null : this.segment(stream, segment);
  }

  /** Fetches a segment into the cache, for a command that needs it (ColdSegmentNeeded). */
  async prefetch(needed: ColdSegmentNeeded): Promise<void> {
    const stream = await this.host.streamById(needed.streamId);
    if (stream !== undefined) await this.segment(stream, needed.segment);
  }

  /** Synchronous, from memory: the cold append with the greatest start at or before `position` (a synchronous host's segments). */
  containingNow(streamId: number, position: number): StoredChunk | null {
    return this.containingIn(streamId, syncAnswer(this.host.segments(streamId, position, position + 1)), position);
  }

  /** Synchronous, from memory: the cold appends with `from <= start < before` (a synchronous host's segments). */
  fromNow(streamId: number, from: number, before: number): StoredChunk[] {
    return this.fromIn(streamId, syncAnswer(this.host.segments(streamId, from, before)), from, before);
  }

  /** As containingNow, in the segments given (those overlapping `position`, as the caller read them). */
  containingIn(streamId: number, segments: readonly ColdSegmentRow[], position: number): StoredChunk | null {
    const segment = segments.find((s) => s.start <= position && position < s.end);
    if (segment === undefined) return null;
    let found: StoredChunk | null = null;
    for (const a of this.cachedOrThrow(streamId, segment)) if (a.start <= position) found = a;
    return found;
  }

  /** As fromNow, in the segments given (those overlapping `[from, before)`, in order). */
  fromIn(streamId: number, segments: readonly ColdSegmentRow[], from: number, before: number): StoredChunk[] {
    const appends: StoredChunk[] = [];
    for (const segment of segments) {
      if (segment.end <= from || segment.start >= before) continue;
      for (const a of this.cachedOrThrow(streamId, segment)) if (a.start >= from && a.start < before) appends.push(a);
    }
    return appends;
  }

  private cachedOrThrow(streamId: number, segment: ColdSegmentRow): StoredChunk[] {
    const cached = this.cache.get(segment.key);
    if (cached === undefined) throw new ColdSegmentNeeded(streamId, segment);
    this.counters.cacheHits++;
    return cached.appends;
  }

  private readAhead(stream: StreamState, last: ColdSegmentRow | undefined): void {
    if (last === undefined) return;
    const fetchNext = (found: ColdSegmentRow[]) => {
      const next = found[0];
      if (next !== undefined && !this.cache.has(next.key)) this.segment(stream, next).catch(() => undefined);
    };
    const found = andThen(this.host.segments(stream.id, last.end, last.end + 1), fetchNext);
    if (found instanceof Promise) found.catch(() => undefined);
  }

  private async segment(stream: StreamState, segment: ColdSegmentRow): Promise<StoredChunk[]> {
    const cached = this.cache.get(segment.key);
    if (cached !== undefined) {
      this.counters.cacheHits++;
      // Most recently used goes last.
      this.cache.delete(segment.key);
      this.cache.set(segment.key, cached);
      return cached.appends;
    }
    this.counters.cacheMisses++;
    let fetch = this.fetching.get(segment.key);
    if (fetch === undefined) {
      fetch = this.fetch(stream, segment).finally(() => this.fetching.delete(segment.key));
      this.fetching.set(segment.key, fetch);
    }
    return (await fetch).appends;
  }

  private async fetch(stream: StreamState, segment: ColdSegmentRow): Promise<Cached> {
    const began = performance.now();
    let body: Buffer | null;
    try {
      body = await this.objects.get(segment.key);
    } catch (error) {
      throw new ColdStoreUnavailableError(stream.name, segment.start, segment.end, error);
    }
    const seconds = (performance.now() - began) / 1000;
    this.counters.fetches++;
    this.counters.fetchSeconds += seconds;
    this.counters.onFetch?.(seconds);
    if (body === null) throw new ColdObjectInvalidError(stream.name, segment.start, segment.end, segment.key, 'is missing from the object store');
    let appends: StoredChunk[];
    try {
      appends = decodeSegment(body, { sha256: segment.sha256, stream: stream.id, incarnation: stream.incarnation, start: segment.start, end: segment.end });
    } catch (error) {
      if (!(error instanceof SegmentInvalid)) throw error;
      throw new ColdObjectInvalidError(stream.name, segment.start, segment.end, segment.key, `is corrupt: ${error.message}`);
    }
    const entry = { appends, bytes: body.length };
    this.remember(segment.key, entry);
    return entry;
  }

  private remember(key: string, entry: Cached): void {
    if (entry.bytes > this.cacheBytes) return;
    this.cache.set(key, entry);
    this.cachedBytes += entry.bytes;
    for (const [oldKey, old] of this.cache) {
      if (this.cachedBytes <= this.cacheBytes) break;
      this.cache.delete(oldKey);
      this.cachedBytes -= old.bytes;
    }
  }
}
