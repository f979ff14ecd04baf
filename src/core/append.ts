/**
 * The append decision. Checks run in the order DESIGN.md fixes:
 *   syntax (400) -> exists (404/410), incarnation (412) -> producer identity
 *   (204 duplicate, 403) -> closed (409) -> producer order (400/409) -> content type
 *   (409) -> Stream-Seq (409) -> Stream-Record-Match (400 on a stream without records,
 *   412) -> producer limit (429) -> apply.
 * A producer's retry is answered as a duplicate before Stream-Record-Match is judged:
 * the tail it expected has moved by its own first attempt.
 */
import { contentTypesMatch } from '../protocol/content-type.js';
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import { hasRecords, messageNextAfterWrite, recordMatchError, recordsOfWrite } from './records.js';
import { absenceError, accessAfter, copyState, incarnationError, touched } from './stream.js';
import {
  floorAfterNewProducer,
  forgetCutoffMs,
  judgeIdentity,
  judgeLimit,
  judgeOrder,
  recordAfterWrite,
  type ProducerStanding,
} from './producer.js';
import type {
  AppendChanges,
  AppendOutcome,
  AppendRequest,
  Decision,
  ProducerSettings,
  ProducerView,
  Receipt,
  StreamState,
} from './types.js';

type AppendDecision = Decision<AppendOutcome, AppendChanges>;

const reject = (error: ProtocolError, stream?: StreamState): AppendDecision => ({
  outcome: { kind: 'rejected', error, records: stream !== undefined && hasRecords(stream) },
  changes: null,
});

export interface AppendInput {
  stream: StreamState | undefined;
  request: AppendRequest;
  /** Loaded by the engine when the request carries producer headers. */
  producers: ProducerView | null;
  settings: ProducerSettings;
  nowMs: number;
}

function closedError(stream: StreamState): ProtocolError {
  return protocolError('STREAM_CLOSED', 'the stream is closed', { closed: true, nextOffset: stream.tail });
}

/** Stream-Seq compare-and-set: bytewise strictly greater than the stored value. */
export function streamSeqError(stream: StreamState, seq: string | null): ProtocolError | null {
  if (seq === null || stream.lastStreamSeq === null || seq > stream.lastStreamSeq) return null;
  return protocolError('STREAM_SEQ_CONFLICT', `Stream-Seq ${JSON.stringify(seq)} is not greater than the last accepted value`, {
    nextOffset: stream.tail,
    lastSeq: stream.lastStreamSeq,
  });
}

function contentTypeError(stream: StreamState, request: AppendRequest): ProtocolError | null {
  if (request.data.length === 0) return null;
  if (request.contentType !== null && contentTypesMatch(request.contentType, stream.config.contentType)) return null;
  return protocolError(
    'CONTENT_TYPE_MISMATCH',
    `Content-Type ${request.contentType ?? '(none)'} does not match the stream's ${stream.config.contentType}`,
  );
}

/**
 * What refuses a whole `append-batch` request before its frames are read: the stream
 * must be live and of the incarnation named, and the batch's Content-Type must be the
 * stream's, since every frame is a body of that type (a mismatch would refuse each frame
 * alike, so it refuses the request).
 */
export function batchRequestError(stream: StreamState | undefined, contentType: string, incarnation: string | null, nowMs: number): ProtocolError | null {
  const absent = absenceError(stream, nowMs);
  if (absent) return absent;
  const stale = incarnationError(stream!, incarnation);
  if (stale) return stale;
  if (contentTypesMatch(contentType, stream!.config.contentType)) return null;
  return protocolError(
    'CONTENT_TYPE_MISMATCH',
    `an append batch is sent with the stream's Content-Type (${stream!.config.contentType}), the type of every frame; it came with ${contentType}`,
  );
}

function digestError(request: AppendRequest): ProtocolError | null {
  const claimed = request.producer?.digest;
  if (claimed === undefined || claimed === request.bodyDigest) return null;
  return protocolError('DIGEST_MISMATCH', 'Producer-Digest does not match the BLAKE3-256 digest of the body');
}

export function decideAppend(input: AppendInput): AppendDecision {
  const { stream, request, nowMs } = input;
  const syntax = digestError(request);
  if (syntax) return reject(syntax, absenceError(stream, nowMs) === null ? stream : undefined);
  const absent = absenceError(stream, nowMs) ?? incarnationError(stream!, request.incarnation);
  if (absent) return reject(absent, absent.code === 'INCARNATION_MISMATCH' ? stream : undefined);
  const live = stream!;
  if (request.producer === null) return decidePlainAppend(live, request, nowMs);
  return decideProducerAppend(live, input);
}

function decidePlainAppend(stream: StreamState, request: AppendRequest, nowMs: number): AppendDecision {
  const records = hasRecords(stream);
  if (stream.closed) {
    if (request.close && request.data.length === 0) {
      const outcome: AppendOutcome = { kind: 'already-closed', incarnation: stream.incarnation, tail: stream.tail, recordNext: stream.recordNext, records };
      return { outcome, changes: noChanges(touched(stream, nowMs)) };
    }
    return reject(closedError(stream), stream);
  }
  const error = contentTypeError(stream, request) ?? streamSeqError(stream, request.streamSeq) ?? recordMatchError(stream, request.recordMatch);
  if (error) return reject(error, stream);
  const { next, receipt, chunk } = applyWrite(stream, request, nowMs);
  return {
    outcome: { kind: 'appended', incarnation: stream.incarnation, receipt, producer: null, closeOnly: request.data.length === 0, records },
    changes: noChanges(next, chunk),
  };
}

function decideProducerAppend(stream: StreamState, input: AppendInput): AppendDecision {
  const { request, settings, nowMs } = input;
  const producer = request.producer!;
  const view = input.producers;
  if (view === null) throw new Error('invariant: a producer write needs its producer view');
  const identity = judgeIdentity(stream, view, producer, request.incarnation !== null, settings, nowMs);
  if (identity.kind === 'rejected') return reject(identity.error, stream);
  if (identity.kind === 'duplicate') {
    const outcome: AppendOutcome = { kind: 'duplicate', incarnation: stream.incarnation, receipt: identity.receipt, producer: identity.ack, records: hasRecords(stream) };
    return { outcome, changes: null };
  }
  const standing = identity.standing;
  if (stream.closed) return reject(closedError(stream), stream);
  const error =
    judgeOrder(standing, producer) ??
    contentTypeError(stream, request) ??
    streamSeqError(stream, request.streamSeq) ??
    recordMatchError(stream, request.recordMatch);
  if (error) return reject(error, stream);
  const limit = judgeLimit(standing, view, settings, nowMs);
  if (limit.kind === 'rejected') return reject(limit.error, stream);
  return applyProducerWrite(stream, input, standing, limit.evict);
}

function applyProducerWrite(
  stream: StreamState,
  input: AppendInput,
  standing: ProducerStanding,
  evict: { id: string; epoch: number } | null,
): AppendDecision {
  const { request, settings, nowMs } = input;
  const written = applyWrite(stream, request, nowMs);
  const { record, ack } = recordAfterWrite(standing, request.producer!, written.receipt, nowMs);
  const isNew = standing.kind === 'new-producer';
  // applyWrite's state is a fresh copy, this decision's own: set, not spread (see copyState).
  const next = written.next;
  if (isNew) next.epochFloor = floorAfterNewProducer(standing, evict);
  return {
    outcome: {
      kind: 'appended',
      incarnation: stream.incarnation,
      receipt: written.receipt,
      producer: ack,
      closeOnly: request.data.length === 0,
      records: hasRecords(stream),
    },
    changes: {
      stream: next,
      chunk: written.chunk,
      producer: record,
      forgetProducersSeenAtOrBeforeMs: isNew ? forgetCutoffMs(settings, nowMs) : null,
      evictProducerIds: evict ? [evict.id] : [],
    },
  };
}

function applyWrite(stream: StreamState, request: AppendRequest, nowMs: number) {
  const start = stream.tail;
  const nextTail = start + request.data.length;
  const records = recordsOfWrite(stream, request.data);
  const receipt: Receipt = { start, next: nextTail, closed: request.close, records };
  const next = copyState(stream);
  next.recordNext = messageNextAfterWrite(stream, request.data);
  next.lastAccessMs = accessAfter(stream, nowMs);
  next.tail = nextTail;
  next.closed = stream.closed || request.close;
  next.lastStreamSeq = request.streamSeq ?? stream.lastStreamSeq;
  const chunk = request.data.length > 0 ? { start, data: request.data } : null;
  return { next, receipt, chunk };
}

function noChanges(stream: StreamState, chunk: AppendChanges['chunk'] = null): AppendChanges {
  return { stream, chunk, producer: null, forgetProducersSeenAtOrBeforeMs: null, evictProducerIds: [] };
}
