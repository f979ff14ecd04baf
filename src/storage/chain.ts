/**
 * Reading through fork links. A fork stores only what was appended to it; positions
 * below its fork offset are read from its source, recursively. Shared by every engine,
 * which only supplies raw access to its own chunks.
 */
import type { StreamState } from '../core/types.js';
import { windowEnd } from '../core/window.js';

export interface StoredChunk {
  start: number;
  data: Buffer;
}

export interface ChunkSource {
  streamById(id: number): StreamState | undefined;
  /** The stream's own chunk with the greatest start at or before `position`. */
  chunkContaining(streamId: number, position: number): StoredChunk | null;
  /** The stream's own chunks with `from <= start < before`, in order. */
  chunksFrom(streamId: number, from: number, before: number): Iterable<StoredChunk>;
}

/** First position a stream stores itself; below it the fork source answers. */
function ownStart(stream: StreamState): number {
  return stream.fork ? stream.fork.offset : 0;
}

function sourceOf(source: ChunkSource, stream: StreamState): StreamState {
  const parent = source.streamById(stream.fork!.sourceId);
  if (!parent) throw new Error(`invariant: fork ${stream.id} lost its source ${stream.fork!.sourceId}`);
  return parent;
}

function collect(source: ChunkSource, stream: StreamState, from: number, end: number, parts: StoredChunk[]): void {
  const base = ownStart(stream);
  if (from < base) {
    collect(source, sourceOf(source, stream), from, Math.min(end, base), parts);
    from = base;
  }
  if (from >= end) return;
  // The append holding `from`; when it starts there, it is the first read, not read again
  // below (a 32 MiB append read twice doubled the time a catch-up read held the event loop).
  const first = source.chunkContaining(stream.id, from);
  if (first && first.start <= from) {
    const chunkEnd = first.start + first.data.length;
    if (chunkEnd > from) {
      parts.push({ start: from, data: first.data.subarray(from - first.start, Math.min(first.data.length, end - first.start)) });
      from = chunkEnd;
    }
  }
  if (from >= end) return;
  for (const chunk of source.chunksFrom(stream.id, from, end)) {
    const data = chunk.start + chunk.data.length <= end ? chunk.data : chunk.data.subarray(0, end - chunk.start);
    parts.push({ start: chunk.start, data });
  }
}

/** The stored appends covering `[from, min(tail, from + maxBytes))`, cut to that range. */
export function chunksFromChain(source: ChunkSource, stream: StreamState, from: number, maxBytes: number): StoredChunk[] {
  const end = windowEnd(stream.tail, from, maxBytes);
  const parts: StoredChunk[] = [];
  if (from < end) collect(source, stream, from, end, parts);
  return parts;
}

/** The bytes `[from, min(tail, from + maxBytes))` of a stream. */
export function readFromChain(source: ChunkSource, stream: StreamState, from: number, maxBytes: number): Buffer {
  const parts = chunksFromChain(source, stream, from, maxBytes);
  if (parts.length === 0) return Buffer.alloc(0);
  return parts.length === 1 ? parts[0]!.data : Buffer.concat(parts.map((p) => p.data));
}

/** The append that starts at or contains `position`, clipped to what the stream sees. */
export function chunkFromChain(source: ChunkSource, stream: StreamState, position: number): StoredChunk | null {
  if (position >= stream.tail) return null;
  const base = ownStart(stream);
  if (position >= base) return source.chunkContaining(stream.id, position);
  const inherited = chunkFromChain(source, sourceOf(source, stream), position);
  if (inherited === null) return null;
  const visible = base - inherited.start;
  return inherited.data.length > visible ? { start: inherited.start, data: inherited.data.subarray(0, visible) } : inherited;
}
