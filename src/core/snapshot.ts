/**
 * Snapshots and retention. A snapshot is the application's own summary of everything
 * before an offset; retention then drops history before a published snapshot, so a long
 * stream never costs a full replay. Bootstrap serves the snapshot plus what follows it.
 */
import { encodeOffset } from '../protocol/offset.js';
import { isJsonContentType } from '../protocol/content-type.js';
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import { splitStoredJson } from '../protocol/json.js';
import { isMessageBoundary } from './boundary.js';
import type { ChunkView } from './create.js';
import { absenceError, copyState, incarnationError, touched } from './stream.js';
import type { SnapshotMeta, StreamState } from './types.js';

/** Largest snapshot body. */
export const MAX_SNAPSHOT_BYTES = 128 * 1024 * 1024;

/** Checks shared by every operation that names a position of a live stream. */
function positionError(stream: StreamState, position: number, anchor: ChunkView | null): ProtocolError | null {
  if (position > stream.tail) {
    return protocolError('OFFSET_BEYOND_TAIL_CONFLICT', 'the offset is beyond the stream tail', { nextOffset: stream.tail });
  }
  if (position < stream.earliestOffset) {
    return protocolError('OFFSET_TRIMMED', 'the offset is before the earliest retained offset', { nextOffset: stream.earliestOffset });
  }
  if (!isMessageBoundary(anchor, position, isJsonContentType(stream.config.contentType))) {
    return protocolError('MISALIGNED_OFFSET', 'the offset is not where a message starts');
  }
  return null;
}

function liveStreamError(stream: StreamState | undefined, incarnation: string | null, nowMs: number): ProtocolError | null {
  return absenceError(stream, nowMs) ?? incarnationError(stream!, incarnation);
}

export interface PublishSnapshotRequest {
  offset: number;
  contentType: string;
  /** Digest of this snapshot's content type and body (see `snapshotDigest` in protocol). */
  digest: string;
  /** Stream-Snapshot-Match: the digest the writer believes is visible. */
  match: string | null;
  incarnation: string | null;
}

export type PublishSnapshotOutcome =
  | { kind: 'published'; stream: StreamState; snapshot: SnapshotMeta; replaced: boolean }
  | { kind: 'rejected'; error: ProtocolError };

export interface PublishSnapshotInput {
  stream: StreamState | undefined;
  request: PublishSnapshotRequest;
  /** The append at or containing the snapshot offset. */
  anchor: ChunkView | null;
  nowMs: number;
}

const snapshotConflict = (message: string) => ({ kind: 'rejected' as const, error: protocolError('SNAPSHOT_CONFLICT', message) });

/**
 * Order: exists (404/410) -> incarnation (412) -> offset (409 beyond tail, 410 trimmed,
 * 400 not a boundary) -> repeat of the visible snapshot (success) -> Stream-Snapshot-Match
 * (409) -> another body at that offset or an older offset (409) -> publish.
 */
export function decidePublishSnapshot(input: PublishSnapshotInput): PublishSnapshotOutcome {
  const { stream, request, nowMs } = input;
  const refused = liveStreamError(stream, request.incarnation, nowMs) ?? positionError(stream!, request.offset, input.anchor);
  if (refused) return { kind: 'rejected', error: refused };
  const s = stream!;
  const visible = s.snapshot;
  if (visible && visible.offset === request.offset && visible.digest === request.digest) {
    return { kind: 'published', stream: s, snapshot: visible, replaced: false };
  }
  if (request.match !== null && visible?.digest !== request.match) {
    return snapshotConflict('Stream-Snapshot-Match does not name the visible snapshot');
  }
  if (visible && visible.offset === request.offset) return snapshotConflict('a different snapshot was already published at this offset');
  if (visible && visible.offset > request.offset) return snapshotConflict('a newer snapshot is already visible');
  const snapshot: SnapshotMeta = { offset: request.offset, contentType: request.contentType, digest: request.digest };
  return { kind: 'published', stream: { ...touched(s, nowMs), snapshot }, snapshot, replaced: true };
}

export interface RetentionRequest {
  offset: number;
  incarnation: string | null;
}

export type RetentionOutcome =
  | { kind: 'retained'; stream: StreamState; changed: boolean }
  | { kind: 'rejected'; error: ProtocolError };

/**
 * Retention trims history before a published snapshot: aligned to a message, never
 * backward, never past the visible snapshot (so bootstrap can always rebuild what it
 * trimmed). `recordAtOffset` is the ordinal of the message at the new earliest offset
 * (a record, or an append on a stream without records), its first retained one from then
 * on (read by the engine, core/records.ts); surviving messages keep their ordinals.
 */
export function decideRetention(
  stream: StreamState | undefined,
  request: RetentionRequest,
  anchor: ChunkView | null,
  recordAtOffset: number | null,
  nowMs: number,
): RetentionOutcome {
  const refused = liveStreamError(stream, request.incarnation, nowMs);
  if (refused) return { kind: 'rejected', error: refused };
  const s = stream!;
  const conflict = (message: string): RetentionOutcome => ({
    kind: 'rejected',
    error: protocolError('RETENTION_CONFLICT', message, { nextOffset: s.earliestOffset }),
  });
  if (request.offset === s.earliestOffset) return { kind: 'retained', stream: s, changed: false };
  if (request.offset < s.earliestOffset) return conflict('retention never moves backward');
  if (s.snapshot === null) return conflict('the stream has no snapshot: publish one (PUT {stream}/snapshot/{offset}) at or past the retention offset first');
  if (request.offset > s.snapshot.offset) return conflict(`retention may not pass the latest published snapshot, at ${encodeOffset(s.snapshot.offset)}`);
  const aligned = positionError(s, request.offset, anchor);
  if (aligned) return { kind: 'rejected', error: aligned };
  const next = copyState(touched(s, nowMs));
  next.earliestOffset = request.offset;
  // Every stream numbers its messages (core/records.ts), so every trim moves F: what
  // stats counts (N - F) stays the messages retained.
  if (recordAtOffset === null) throw new Error('invariant: retention needs the ordinal at the new earliest offset');
  next.recordFirst = recordAtOffset;
  return { kind: 'retained', stream: next, changed: true };
}

/**
 * Bytes below the retention point that forks still read stay stored until those forks
 * no longer need them; `descendantsEarliest` is the lowest position any fork reads
 * through this stream.
 */
export function physicalTrimPosition(stream: StreamState, descendantsEarliest: number | null): number {
  return descendantsEarliest === null ? stream.earliestOffset : Math.min(stream.earliestOffset, descendantsEarliest);
}

/**
 * The lowest earliest offset among every stream forked, directly or not, from stream
 * `streamId`, over the stored streams (deleted ones that forks still read included);
 * null when none is. The memory engine calls it, the SQL engines render it as a
 * recursive query (test/storage/fork-queries.test.ts holds them to it).
 */
export function descendantsEarliest(streams: Iterable<Pick<StreamState, 'id' | 'earliestOffset' | 'fork'>>, streamId: number): number | null {
  const childrenOf = new Map<number, Array<Pick<StreamState, 'id' | 'earliestOffset'>>>();
  for (const s of streams) {
    if (s.fork === null) continue;
    const siblings = childrenOf.get(s.fork.sourceId) ?? [];
    siblings.push(s);
    childrenOf.set(s.fork.sourceId, siblings);
  }
  let lowest: number | null = null;
  const pending = [...(childrenOf.get(streamId) ?? [])];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    lowest = lowest === null ? next.earliestOffset : Math.min(lowest, next.earliestOffset);
    pending.push(...(childrenOf.get(next.id) ?? []));
  }
  return lowest;
}

export type BootstrapPlan =
  | { ok: true; stream: StreamState; snapshotPoint: number }
  | { ok: false; error: ProtocolError };

/** Bootstrap starts at the visible snapshot, or at the earliest retained message. */
export function planBootstrap(stream: StreamState | undefined, incarnation: string | null, nowMs: number): BootstrapPlan {
  const refused = liveStreamError(stream, incarnation, nowMs);
  if (refused) return { ok: false, error: refused };
  return { ok: true, stream: stream!, snapshotPoint: stream!.snapshot?.offset ?? stream!.earliestOffset };
}

/** Update parts of one bootstrap response stop near this size (at least one message is sent). */
export const BOOTSTRAP_MAX_UPDATE_BYTES = 8 * 1024 * 1024;

/** Stored bytes read for a bootstrap: one append, or the part of it the read window held. */
export interface UpdatePiece {
  start: number;
  data: Buffer;
  /** The piece is the whole append stored at `start`. */
  whole: boolean;
}

export interface BootstrapUpdates {
  /** One part each: a JSON value for JSON streams, an original append otherwise. */
  messages: Buffer[];
  /** Position after the last message sent. */
  next: number;
  /** Nothing fit the read window although messages remain: read again with a larger one. */
  needsLargerWindow: boolean;
}

/**
 * The update messages of a bootstrap, from `from`, out of pieces read in stream order:
 * every JSON value of a JSON stream, every whole original append of other streams. An
 * append the window cut is left for the next request (from Stream-Next-Offset); when
 * not one message fit, the window must grow, since a bootstrap sends at least one.
 */
export function bootstrapUpdates(stream: StreamState, from: number, pieces: UpdatePiece[]): BootstrapUpdates {
  const json = isJsonContentType(stream.config.contentType);
  const messages: Buffer[] = [];
  let next = from;
  for (const piece of pieces) {
    if (json) {
      for (const message of splitStoredJson(piece.data)) {
        messages.push(message);
        next += message.length + 1;
      }
      continue;
    }
    if (!piece.whole) break;
    messages.push(piece.data);
    next += piece.data.length;
  }
  return { messages, next, needsLargerWindow: messages.length === 0 && from < stream.tail };
}

/** A bootstrap that reaches the tail is up to date, and says the stream is closed if it is. */
export function bootstrapCompletion(stream: StreamState, next: number): { upToDate: boolean; closed: boolean } {
  const upToDate = next >= stream.tail;
  return { upToDate, closed: upToDate && stream.closed };
}

/**
 * Reading a published snapshot by offset. Order: exists (404/410) -> snapshot visible
 * (404) -> incarnation (412): a read that would answer 404 without Stream-Incarnation
 * still does with it (seed 001), like a stream read's 410 and 416.
 */
export function planSnapshotRead(stream: StreamState | undefined, offset: number | null, incarnation: string | null, nowMs: number): { ok: true; stream: StreamState; snapshot: SnapshotMeta } | { ok: false; error: ProtocolError } {
  const absent = absenceError(stream, nowMs);
  if (absent) return { ok: false, error: absent };
  const visible = stream!.snapshot;
  if (visible === null || (offset !== null && visible.offset !== offset)) {
    return { ok: false, error: protocolError('SNAPSHOT_NOT_FOUND', offset === null ? 'the stream has no snapshot' : 'no visible snapshot at this offset') };
  }
  const stale = incarnationError(stream!, incarnation);
  if (stale) return { ok: false, error: stale };
  return { ok: true, stream: stream!, snapshot: visible };
}
