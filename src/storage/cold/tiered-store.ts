/**
 * A store with a cold tier (docs/decisions.md, "Cold tier on object storage"): the
 * engine's store, whose reads of history reach into object storage where the uploader
 * moved it, and whose writes that add data are refused with 507 while uploads are too far
 * behind. Everything else is the engine's, unchanged.
 *
 * Reads walk a fork chain level by level as chain.ts does; at each level the boundary
 * and the hot appends after it are taken in one step (host.ts, hotLevel: synchronous on
 * SQLite, one statement on PostgreSQL), then the cold part is fetched, so an upload that
 * commits meanwhile, on this node or another, cannot hide bytes from it.
 */
import { coldBacklogRefusal, coldRangeOf } from '../../core/cold-tier.js';
import type { StreamState } from '../../core/types.js';
import { windowEnd } from '../../core/window.js';
import type { StoredChunk } from '../chain.js';
import { bytesAdded } from '../disk-space.js';
import { ColdBacklogError, CommandFailedError } from '../errors.js';
import type { ColdTierStats, CommandName, Store, StoreCommands } from '../store.js';
import { ColdReads, ColdSegmentNeeded } from './cold-reads.js';
import { andThen, type Answer, type ColdHost } from './host.js';
import type { ObjectStore } from './object-store.js';
import { ColdUploader, type UploaderSettings } from './uploader.js';

export interface ColdTierSettings extends UploaderSettings {
  /** Decoded segments kept in memory. */
  cacheBytes: number;
  /** Upload lag past which writes that add data are refused (0: never). */
  maxBacklogBytes: number;
}

/**
 * Segments one command may fetch before it is refused: a retention walk spans a few, and
 * a cache too small to hold them together would otherwise fetch them in turn for ever.
 */
const MAX_FETCHES_PER_COMMAND = 16;

type Part = { hot: StoredChunk[] } | { cold: { stream: StreamState; from: number; before: number } };

function ownStart(stream: StreamState): number {
  return stream.fork ? stream.fork.offset : 0;
}

export interface TieredStore extends Store {
  readonly cold: ColdTier;
}

/** The cold tier's parts, shared by the wrapped store's methods. */
export class ColdTier<H extends ColdHost = ColdHost> {
  readonly reads: ColdReads;
  readonly uploader: ColdUploader;

  constructor(
    readonly host: H,
    readonly objects: ObjectStore,
    readonly settings: ColdTierSettings,
    nowMs: () => number,
    onUploadError: (error: unknown) => void,
  ) {
    this.reads = new ColdReads(host, objects, settings.cacheBytes);
    this.uploader = new ColdUploader(host, objects, settings, nowMs, onUploadError);
  }

  stats(): ColdTierStats {
    const u = this.uploader.counters;
    const r = this.reads.counters;
    return {
      coldBytes: this.host.coldBytes(),
      hotBytes: u.hotBytes,
      uploads: u.uploads,
      uploadedBytes: u.uploadedBytes,
      uploadFailures: u.uploadFailures,
      uploadLagBytes: u.lagBytes,
      sweptObjects: u.sweptObjects,
      coldFetches: r.fetches,
      coldFetchSeconds: r.fetchSeconds,
      cacheHits: r.cacheHits,
      cacheMisses: r.cacheMisses,
    };
  }

  /**
   * Runs a command; one whose transaction needed history not in memory (a fork's anchor, a
   * record ordinal or a retention walk in the cold range) failed without applying
   * anything, and runs again once the segment it needed is fetched.
   */
  async run<K extends CommandName>(inner: Store, kind: K, input: StoreCommands[K]['input']): Promise<StoreCommands[K]['output']> {
    const refused = this.refusal(kind, input);
    if (refused) throw refused;
    for (let fetched = 0; ; fetched++) {
      try {
        return await inner.run(kind, input);
      } catch (error) {
        const needed = error instanceof CommandFailedError && error.cause instanceof ColdSegmentNeeded ? error.cause : null;
        if (needed === null || fetched === MAX_FETCHES_PER_COMMAND) throw error;
        await this.reads.prefetch(needed);
      }
    }
  }

  /** The refusal of a write that adds data while uploads are too far behind, or null. */
  refusal<K extends CommandName>(kind: K, input: StoreCommands[K]['input']): ColdBacklogError | null {
    if (bytesAdded(kind, input) === 0) return null;
    const refused = coldBacklogRefusal(this.uploader.counters.lagBytes, this.settings.maxBacklogBytes);
    return refused === null ? null : new ColdBacklogError(refused);
  }

  async readChunks(stream: StreamState, from: number, maxBytes: number): Promise<StoredChunk[]> {
    const end = windowEnd(stream.tail, from, maxBytes);
    const plan: Part[] = [];
    if (from < end) {
      const planned = this.plan(stream, from, end, plan);
      if (planned instanceof Promise) await planned;
    }
    const parts: StoredChunk[] = [];
    for (const part of plan) {
      if ('hot' in part) parts.push(...part.hot);
      else parts.push(...(await this.reads.read(part.cold.stream, part.cold.from, part.cold.before)));
    }
    return parts;
  }

  /** Every level's boundary and hot appends, each level's in one step (synchronous on a synchronous host). */
  private plan(stream: StreamState, from: number, end: number, out: Part[]): Answer<void> {
    const base = ownStart(stream);
    if (from >= base) return this.planOwn(stream, from, end, out);
    return andThen(this.sourceOf(stream), (source) => andThen(this.plan(source, from, Math.min(end, base), out), () => this.planOwn(stream, base, end, out)));
  }

  private planOwn(stream: StreamState, from: number, end: number, out: Part[]): Answer<void> {
    if (from >= end) return;
    return andThen(this.host.hotLevel(stream, from, end), (level) => {
      if (from < level.coldEnd) out.push({ cold: { stream, from, before: Math.min(end, level.coldEnd) } });
      if (Math.max(from, level.coldEnd) < end) out.push({ hot: level.hot });
    });
  }

  /** The append that starts at or contains `position`, clipped to what the stream sees (chain.ts, chunkFromChain). */
  async chunkAt(stream: StreamState, position: number): Promise<StoredChunk | null> {
    if (position >= stream.tail) return null;
    const base = ownStart(stream);
    if (position < base) {
      const inherited = await this.chunkAt(await this.sourceOf(stream), position);
      if (inherited === null) return null;
      const visible = base - inherited.start;
      return inherited.data.length > visible ? { start: inherited.start, data: inherited.data.subarray(0, visible) } : inherited;
    }
    const level = await this.host.hotChunkAtLevel(stream, position);
    if (position >= level.coldEnd) return level.chunk;
    // Below the boundary; no segment holds it only below the earliest offset, which reads refuse first.
    const appends = await this.reads.appendsAt(stream, position);
    if (appends === null) return null;
    let found: StoredChunk | null = null;
    for (const a of appends) if (a.start <= position) found = a;
    return found;
  }

  private sourceOf(stream: StreamState): Answer<StreamState> {
    return andThen(this.host.streamById(stream.fork!.sourceId), (source) => {
      if (!source) throw new Error(`invariant: fork ${stream.id} lost its source ${stream.fork!.sourceId}`);
      return source;
    });
  }
}

/**
 * The engine's store with the cold tier's reads and write limit laid over it. A Proxy:
 * every other member (there are some thirty) is the engine's own, bound to it.
 */
export function withColdTier(inner: Store, cold: ColdTier): TieredStore {
  const overrides: Partial<TieredStore> = {
    cold,
    run: ((kind, input) => cold.run(inner, kind, input)) as Store['run'],
    readChunks: (stream, from, maxBytes) => cold.readChunks(stream, from, maxBytes),
    // The engine's would read only its own table: the history moved out would be missing.
    streamChunks: undefined,
    readRange: async (stream, from, maxBytes) => {
      const parts = await cold.readChunks(stream, from, maxBytes);
      return parts.length === 1 ? parts[0]!.data : Buffer.concat(parts.map((p) => p.data));
    },
    chunkAt: (stream, position) => cold.chunkAt(stream, position),
    coldStats: () => cold.stats(),
    coldRange: async (stream) => coldRangeOf(await cold.host.segments(stream.id, stream.earliestOffset, stream.tail), stream.earliestOffset),
    close: async () => {
      await cold.uploader.close();
      await cold.host.close?.();
      await inner.close();
      cold.objects.close();
    },
  };
  // Bound once each: a bind per access would be an allocation per request (decisions.md, GC).
  const bound = new Map<PropertyKey, unknown>();
  return new Proxy(inner as TieredStore, {
    get(target, property) {
      if (Object.prototype.hasOwnProperty.call(overrides, property)) return overrides[property as keyof TieredStore];
      const value = Reflect.get(target, property, target);
      if (typeof value !== 'function') return value;
      let fn = bound.get(property);
      if (fn === undefined) bound.set(property, (fn = (value as (...args: unknown[]) => unknown).bind(target)));
      return fn;
    },
  });
}
