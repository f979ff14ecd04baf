/**
 * Stream creation (PUT): idempotent on an equal configuration, 409 on a different one,
 * with optional initial bytes, closure, Stream-Seq and a fork of another stream.
 */
import { contentTypesMatch, isJsonContentType, DEFAULT_CONTENT_TYPE } from '../protocol/content-type.js';
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import { isMessageBoundary } from './boundary.js';
import { countRecords } from './records.js';
import { retentionToStored, type RetentionPolicy } from './retention-policy.js';
import { absenceError, incarnationError, notFound, visibility } from './stream.js';
import type { Decision, ForkLink, StreamConfig, StreamState } from './types.js';

export interface ForkRequest {
  sourceName: string;
  /** Null: fork at the source's tail. */
  offset: number | null;
  subOffset: number;
}

export interface CreateRequest {
  name: string;
  bucket: string | null;
  /** Normalised; null when the request has none (default, or the fork source's). */
  contentType: string | null;
  ttlSeconds: number | null;
  expiresAtMs: number | null;
  close: boolean;
  /** Initial bytes, already framed for the content type. */
  data: Buffer;
  streamSeq: string | null;
  incarnation: string | null;
  fork: ForkRequest | null;
  /** Canonical attribute text (see core/attrs.ts); absent or null for none. */
  attrs?: string | null;
  /** The stream's own retention policy (Stream-Retention); absent for none. */
  retention?: RetentionPolicy;
}

/** The append of the fork source that starts at or contains the fork offset. */
export interface ChunkView {
  start: number;
  data: Buffer;
}

export interface CreateInput {
  existing: StreamState | undefined;
  request: CreateRequest;
  /** False when the request names a bucket that does not exist. */
  bucketExists: boolean;
  /** The fork source, when the request forks. */
  forkSource: StreamState | undefined;
  /** The source's append containing the fork offset (null at the tail or when empty). */
  forkAnchor: ChunkView | null;
  /**
   * The source's message ordinal at the fork offset (core/records.ts), when the offset
   * lies in its retained range: a fork keeps the source's ordinals up to there.
   */
  forkRecord: number | null;
  /** Id and incarnation token for a new stream, chosen by the engine. */
  newId: number;
  newIncarnation: string;
  nowMs: number;
}

export type CreateOutcome =
  | { kind: 'created'; stream: StreamState }
  | { kind: 'exists'; stream: StreamState }
  /** `records`: the stream found at the name numbers records (its answer advertises them). */
  | { kind: 'rejected'; error: ProtocolError; records: boolean };

export interface CreateChanges {
  /** An expired stream at the name, collected before the new one takes it. */
  collect: StreamState | null;
  stream: StreamState;
  chunks: Array<{ start: number; data: Buffer }>;
  /** The fork source with its reference count raised. */
  source: StreamState | null;
}

type CreateDecision = Decision<CreateOutcome, CreateChanges>;

const reject = (error: ProtocolError, existing?: StreamState): CreateDecision => ({
  outcome: { kind: 'rejected', error, records: existing !== undefined && isJsonContentType(existing.config.contentType) },
  changes: null,
});

export function decideCreate(input: CreateInput): CreateDecision {
  const { existing, request, nowMs } = input;
  // A stream that would be expired the moment it exists is a mistake, never a wish.
  if (request.expiresAtMs !== null && request.expiresAtMs <= nowMs) {
    return reject(protocolError('INVALID_EXPIRES_AT', `Stream-Expires-At ${new Date(request.expiresAtMs).toISOString()} is not in the future`));
  }
  const seen = visibility(existing, nowMs);
  if (seen === 'gone') {
    return reject(protocolError('STREAM_NAME_RESERVED', 'a deleted stream whose history forks still read holds this name'));
  }
  if (seen === 'live') return decideExisting(existing!, input);
  if (!input.bucketExists) return reject(notFound('bucket'));
  if (request.incarnation !== null) {
    return reject(protocolError('INCARNATION_MISMATCH', 'Stream-Incarnation names a stream that does not exist; nothing was created'));
  }
  const planned = planNewStream(input);
  if ('error' in planned) return reject(planned.error);
  return {
    outcome: { kind: 'created', stream: planned.stream },
    changes: { collect: existing ?? null, stream: planned.stream, chunks: planned.chunks, source: planned.source },
  };
}

function decideExisting(existing: StreamState, input: CreateInput): CreateDecision {
  const stale = incarnationError(existing, input.request.incarnation);
  if (stale) return reject(stale, existing);
  const conflict = configConflict(existing, input);
  if (conflict) return reject(protocolError('STREAM_CONFIG_CONFLICT', `the stream already exists with ${conflict}`), existing);
  return { outcome: { kind: 'exists', stream: existing }, changes: null };
}

/**
 * Names the first difference between an existing stream and a create request, as the
 * end of "the stream already exists with ...". Attributes are not configuration: they
 * are labels `PUT {stream}/attrs` may change at any time, so a create's attributes only
 * set the first ones, and repeating the create after they changed is still idempotent.
 */
function configConflict(existing: StreamState, input: CreateInput): string | null {
  const { request } = input;
  const wanted = requestedConfig(request, input.forkSource);
  if (!contentTypesMatch(wanted.contentType, existing.config.contentType)) return `another content type (${existing.config.contentType})`;
  if (wanted.ttlSeconds !== existing.config.ttlSeconds) return 'another TTL';
  if (wanted.expiresAtMs !== existing.config.expiresAtMs) return 'another expiry time';
  if (retentionToStored(wanted.retention) !== retentionToStored(existing.config.retention)) return 'another retention policy';
  if (request.close && !existing.closed) return 'no closure: it is open';
  const fork = request.fork;
  if ((fork === null) !== (existing.fork === null)) return 'another fork source';
  if (fork && existing.fork) {
    if (input.forkSource?.id !== existing.fork.sourceId) return 'another fork source';
    if (fork.offset !== null && fork.offset !== existing.fork.offset) return 'another fork offset';
    if (fork.subOffset !== existing.fork.subOffset) return 'another fork sub-offset';
  }
  return null;
}

/**
 * The configuration a request asks for; a fork inherits what the request leaves out,
 * except a retention policy: that is the new stream's own (its bucket's default else).
 */
function requestedConfig(request: CreateRequest, source: StreamState | undefined): StreamConfig {
  const inheritExpiry = request.fork !== null && source && request.ttlSeconds === null && request.expiresAtMs === null;
  const config: StreamConfig = {
    contentType: request.contentType ?? source?.config.contentType ?? DEFAULT_CONTENT_TYPE,
    ttlSeconds: inheritExpiry ? source!.config.ttlSeconds : request.ttlSeconds,
    expiresAtMs: inheritExpiry ? source!.config.expiresAtMs : request.expiresAtMs,
  };
  // Absent rather than undefined, so that states compare equal across engines.
  if (request.retention !== undefined) config.retention = request.retention;
  return config;
}

type Planned =
  | { stream: StreamState; chunks: Array<{ start: number; data: Buffer }>; source: StreamState | null }
  | { error: ProtocolError };

function planNewStream(input: CreateInput): Planned {
  const { request, nowMs } = input;
  let link: ForkLink | null = null;
  let prefix: Buffer | null = null;
  let earliestOffset = 0;
  if (request.fork) {
    const fork = planFork(input);
    if ('error' in fork) return fork;
    ({ link, prefix } = fork);
    earliestOffset = Math.min(input.forkSource!.earliestOffset, link.offset);
  }
  const config = requestedConfig(request, input.forkSource);
  const chunks: Array<{ start: number; data: Buffer }> = [];
  let tail = link?.offset ?? 0;
  for (const data of [prefix, request.data]) {
    if (data && data.length > 0) {
      chunks.push({ start: tail, data });
      tail += data.length;
    }
  }
  const records = recordsOfNewStream(input, config.contentType, chunks);
  const stream: StreamState = {
    id: input.newId,
    name: request.name,
    bucket: request.bucket,
    incarnation: input.newIncarnation,
    config,
    createdAtMs: nowMs,
    lastAccessMs: nowMs,
    tail,
    closed: request.close,
    lastStreamSeq: request.streamSeq,
    epochFloor: null,
    fork: link,
    earliestOffset,
    deleted: false,
    forkRefs: 0,
    attrs: request.attrs ?? null,
    snapshot: null,
    recordFirst: records.first,
    recordNext: records.next,
  };
  const source = link ? { ...input.forkSource!, forkRefs: input.forkSource!.forkRefs + 1 } : null;
  return { stream, chunks, source };
}

/**
 * A new stream's message ordinals (records, or appends on a stream without records):
 * from 0, or, for a fork, the source's up to the fork point (its first retained one is
 * the source's, as its earliest offset is) and its own after it. A fork's count thus
 * covers what it reads of its source, as a read of it from its earliest offset would.
 */
function recordsOfNewStream(input: CreateInput, contentType: string, chunks: ReadonlyArray<{ data: Buffer }>): { first: number; next: number } {
  const json = isJsonContentType(contentType);
  let first = 0;
  let next = 0;
  if (input.request.fork) {
    if (input.forkRecord === null) throw new Error('invariant: a fork needs the source\'s ordinal at the fork offset');
    first = input.forkSource!.recordFirst;
    next = input.forkRecord;
  }
  for (const chunk of chunks) next += json ? countRecords(chunk.data) : 1;
  return { first, next };
}

const forkError = (message: string): { error: ProtocolError } => ({ error: protocolError('INVALID_FORK', message) });

function planFork(input: CreateInput): { link: ForkLink; prefix: Buffer | null } | { error: ProtocolError } {
  const fork = input.request.fork!;
  const source = input.forkSource;
  const absent = absenceError(source, input.nowMs);
  if (absent) {
    return absent.code === 'STREAM_GONE'
      ? { error: protocolError('FORK_SOURCE_GONE', 'the fork source was deleted') }
      : { error: protocolError('STREAM_NOT_FOUND', 'the fork source does not exist') };
  }
  const src = source!;
  if (input.request.contentType !== null && !contentTypesMatch(input.request.contentType, src.config.contentType)) {
    return { error: protocolError('CONTENT_TYPE_MISMATCH', `a fork keeps its source's content type ${src.config.contentType}`) };
  }
  const offset = fork.offset ?? src.tail;
  if (offset > src.tail) return forkError('Stream-Fork-Offset is beyond the source tail');
  if (offset < src.earliestOffset) {
    return { error: protocolError('OFFSET_TRIMMED', 'the fork offset is before the earliest retained offset', { nextOffset: src.earliestOffset }) };
  }
  const json = isJsonContentType(src.config.contentType);
  const anchor = input.forkAnchor;
  if (fork.subOffset === 0) {
    if (json && !isMessageBoundary(anchor, offset, true)) return forkError('Stream-Fork-Offset is inside a JSON message');
    return { link: { sourceId: src.id, offset, subOffset: 0 }, prefix: null };
  }
  if (anchor === null || anchor.start !== offset) return forkError('Stream-Fork-Sub-Offset needs an append that starts at Stream-Fork-Offset');
  const prefix = json ? jsonPrefix(anchor.data, fork.subOffset) : binaryPrefix(anchor.data, fork.subOffset);
  if (prefix === null) return forkError('Stream-Fork-Sub-Offset is beyond the append at Stream-Fork-Offset');
  return { link: { sourceId: src.id, offset, subOffset: fork.subOffset }, prefix };
}

function binaryPrefix(data: Buffer, length: number): Buffer | null {
  return length <= data.length ? data.subarray(0, length) : null;
}

/** The first `count` messages of a stored JSON append. */
function jsonPrefix(data: Buffer, count: number): Buffer | null {
  let end = 0;
  for (let i = 0; i < count; i++) {
    const nl = data.indexOf(0x0a, end);
    if (nl < 0) return null;
    end = nl + 1;
  }
  return data.subarray(0, end);
}
