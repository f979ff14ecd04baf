/**
 * A handle on one stream: create, append, close, head, delete, and reads. The handle
 * remembers the stream's `Stream-Incarnation` from the first answer that carries it and
 * sends it back on every later request, so it never acts on a stream that was deleted
 * and recreated at the same URL: such a request fails with `StreamReplacedError`.
 */
import { isJsonContentType, normalizeContentType } from '../protocol/content-type.js';
import { H } from '../protocol/headers.js';
import { errorFromResponse, RecordsNotActiveError, RillError } from './errors.js';
import { extensionsOf, hasRecordsToken, optionalUint, recordRangeOf, recordTailOf, requireRecords, type RecordRange } from './headers.js';
import type { Transport } from './http.js';
import { readBatches, readMessages, type ReadBatch, type ReadOptions } from './read.js';
import { readRecordBatches, readRecords, type JsonRecord, type RecordBatch, type RecordReadOptions } from './records.js';
import type { Message } from './frames.js';
import {
  appendBatch,
  bootstrap,
  getAttrs,
  latestSnapshot,
  publishSnapshot,
  retain,
  setAttrs,
  type BatchAck,
  type Bootstrap,
  type ExtrasOptions,
  type PublishedSnapshot,
  type Retained,
  type Snapshot,
  type StreamAttrs,
  type StreamPoint,
} from './extras.js';

export interface StreamHandleOptions {
  /** Remember and send back Stream-Incarnation (default true). */
  trackIncarnation?: boolean;
  /** A token already known, for example saved with derived state. */
  incarnation?: string;
}

export interface StreamInfo {
  contentType: string;
  nextOffset: string;
  closed: boolean;
  /** The last accepted Stream-Seq, when the stream has one. */
  lastSeq: string | undefined;
  ttlSeconds: number | undefined;
  expiresAt: string | undefined;
  /** Set once retention has trimmed the start of the stream. */
  earliestOffset: string | undefined;
  /** The stream's own retention policy, given on create; undefined when it has none (its bucket's default may apply). */
  retention: RetentionPolicyOption | undefined;
  /** Where the newest published snapshot ends, when the stream has one. */
  snapshotOffset: string | undefined;
  incarnation: string | undefined;
  /** The extension tokens active for the stream (Stream-Extensions). */
  extensions: string[];
  /** The stream numbers its messages (`json-record-coordinates-v1` is active): record reads and `recordMatch` apply. */
  recordsActive: boolean;
  /** The first retained record F; undefined when records are not active. */
  recordFirst: number | undefined;
  /** The record tail N, the ordinal the next message gets; undefined when records are not active. */
  recordNext: number | undefined;
}

/** Keep at most this many bytes and/or messages, counted back from the tail, and/or what was written in the last maxAgeMs (docs/streams.md). */
export interface RetentionPolicyOption {
  maxBytes?: number | null;
  maxMessages?: number | null;
  maxAgeMs?: number | null;
}

export interface CreateOptions {
  contentType?: string;
  /** The stream's own retention policy (Stream-Retention); the server trims after each append. */
  retention?: RetentionPolicyOption;
  ttlSeconds?: number;
  expiresAt?: Date | string;
  closed?: boolean;
  /** Initial bytes. */
  body?: Uint8Array | string;
  /** Initial messages of a JSON stream (one per element). */
  messages?: unknown[];
  /** Starting Stream-Seq value (prefix-count streams should not set one). */
  streamSeq?: string;
  /**
   * Create a fork: a stream sharing `source`'s history up to `offset` (default: its
   * tail). The fork takes the source's content type unless `contentType` is given.
   */
  forkOf?: { source: StreamHandle | string; offset?: string };
  signal?: AbortSignal;
}

export interface CreateResult {
  /** False when the stream already existed with the same configuration. */
  created: boolean;
  contentType: string;
  nextOffset: string;
  closed: boolean;
  incarnation: string | undefined;
  /** The ordinals of the messages it was created with (start = next = the record tail when none, or when it existed). */
  records: RecordRange | undefined;
}

export interface ProducerIdentity {
  id: string;
  epoch: number;
  seq: number;
  /** BLAKE3-256 of the body, 64 lowercase hex digits. */
  digest?: string;
}

export interface AppendOptions {
  /** Defaults to the stream's type when the handle knows it, else application/octet-stream. */
  contentType?: string;
  streamSeq?: string;
  /** Close the stream with this append. */
  close?: boolean;
  producer?: ProducerIdentity;
  /**
   * Append only if the stream's record tail N is this ordinal (Stream-Record-Match);
   * otherwise nothing is written and the append fails with `RecordMatchFailedError`,
   * whose `recordNext` is the tail. The stream must advertise record coordinates: the
   * handle checks (one HEAD when it has not seen them yet) before sending, since a
   * server without them would append unconditionally.
   */
  recordMatch?: number;
  signal?: AbortSignal;
  timeoutMs?: number;
}

export interface ProducerAnswer {
  /** The highest applied seq of the epoch (not necessarily the request's). */
  epoch: number;
  seq: number;
  closedEpoch: number | undefined;
  closedSeq: number | undefined;
  outcome: string | undefined;
}

export interface AppendResult {
  status: number;
  /** Where the write's bytes start; absent on a duplicate whose receipt was evicted. */
  offset: string | undefined;
  nextOffset: string | undefined;
  closed: boolean;
  /** The write had been applied before: nothing was written this time. */
  duplicate: boolean;
  producer: ProducerAnswer | undefined;
  /** The ordinals the write's messages got (a JSON stream's records); undefined when the answer has none. */
  records: RecordRange | undefined;
}

const DEFAULT_CONTENT_TYPE = 'application/octet-stream';
const encoder = new TextEncoder();

function toBytes(body: Uint8Array | string): Uint8Array {
  return typeof body === 'string' ? encoder.encode(body) : body;
}

function producerAnswer(headers: Headers): ProducerAnswer | undefined {
  const epoch = optionalUint(headers, H.producerEpoch);
  const seq = optionalUint(headers, H.producerSeq);
  if (epoch === undefined || seq === undefined) return undefined;
  return {
    epoch,
    seq,
    closedEpoch: optionalUint(headers, H.producerClosedEpoch),
    closedSeq: optionalUint(headers, H.producerClosedSeq),
    outcome: headers.get(H.producerOutcome) ?? undefined,
  };
}

export class StreamHandle {
  readonly url: string;
  readonly transport: Transport;
  /** @internal */ private readonly trackIncarnation: boolean;
  /** The incarnation this handle works with; sent on every request once known. */
  incarnation: string | undefined;
  /** The stream's content type, once an answer told it. */
  contentType: string | undefined;
  /**
   * Whether the stream advertises JSON record coordinates: true once an answer did, false
   * once a HEAD did not, undefined before either.
   */
  recordsActive: boolean | undefined;

  constructor(url: string, transport: Transport, options: StreamHandleOptions = {}) {
    this.url = url;
    this.transport = transport;
    this.trackIncarnation = options.trackIncarnation ?? true;
    this.incarnation = options.incarnation;
  }

  /** Headers that tie a request to the incarnation this handle knows. */
  requestHeaders(): Record<string, string> {
    return this.trackIncarnation && this.incarnation !== undefined ? { [H.streamIncarnation]: this.incarnation } : {};
  }

  /** Learns the incarnation (first one seen) from an answer. */
  observe(headers: Headers): void {
    const token = headers.get(H.streamIncarnation);
    if (token !== null && this.trackIncarnation && this.incarnation === undefined) this.incarnation = token;
    // Only a HEAD settles that records are not active: not every answer lists the tokens.
    if (hasRecordsToken(headers)) this.recordsActive = true;
  }

  /** Forgets the incarnation, to start over with whatever stream lives at the URL now. */
  forgetIncarnation(): void {
    this.incarnation = undefined;
    this.recordsActive = undefined;
  }

  /** True when the handle knows the stream is a JSON stream. */
  get isJson(): boolean {
    return this.contentType !== undefined && isJsonContentType(this.contentType);
  }

  async create(options: CreateOptions = {}): Promise<CreateResult> {
    const headers: Record<string, string> = { ...this.requestHeaders() };
    const contentType = options.contentType ?? (options.forkOf ? undefined : DEFAULT_CONTENT_TYPE);
    if (contentType !== undefined) headers['content-type'] = contentType;
    if (options.forkOf) Object.assign(headers, forkHeaders(this.url, options.forkOf));
    if (options.ttlSeconds !== undefined) headers[H.streamTtl] = String(options.ttlSeconds);
    if (options.expiresAt !== undefined) {
      headers[H.streamExpiresAt] = typeof options.expiresAt === 'string' ? options.expiresAt : options.expiresAt.toISOString();
    }
    if (options.retention !== undefined) headers[H.streamRetention] = JSON.stringify(options.retention);
    if (options.closed) headers[H.streamClosed] = 'true';
    if (options.streamSeq !== undefined) headers[H.streamSeq] = options.streamSeq;
    const body = options.messages !== undefined ? JSON.stringify(options.messages) : options.body;
    const res = await this.transport.request(this.url, { method: 'PUT', headers, body, signal: options.signal });
    if (res.status !== 201 && res.status !== 200) throw await errorFromResponse(res.response);
    this.observe(res.headers);
    this.contentType = res.headers.get('content-type') ?? (contentType === undefined ? undefined : (normalizeContentType(contentType) ?? contentType));
    return {
      created: res.status === 201,
      contentType: this.contentType ?? DEFAULT_CONTENT_TYPE,
      nextOffset: res.headers.get(H.streamNextOffset) ?? '',
      closed: res.headers.get(H.streamClosed) === 'true',
      incarnation: res.headers.get(H.streamIncarnation) ?? undefined,
      records: recordRangeOf(res.headers),
    };
  }

  /** Appends raw bytes (on a JSON stream: JSON text; an array is one message per element). */
  async append(body: Uint8Array | string, options: AppendOptions = {}): Promise<AppendResult> {
    return this.post(toBytes(body), options);
  }

  /** Appends JSON messages to a JSON stream, atomically, one message per element. */
  async appendMessages(messages: readonly unknown[], options: AppendOptions = {}): Promise<AppendResult> {
    if (messages.length === 0) throw new RangeError('appendMessages needs at least one message');
    return this.post(encoder.encode(JSON.stringify(messages)), { contentType: 'application/json', ...options });
  }

  /** Appends one JSON message (an array value stays one message). */
  async appendJson(value: unknown, options: AppendOptions = {}): Promise<AppendResult> {
    return this.appendMessages([value], options);
  }

  /** Closes the stream: no more appends; readers see Stream-Closed at the end. */
  async close(options: Omit<AppendOptions, 'close'> = {}): Promise<AppendResult> {
    return this.post(new Uint8Array(0), { ...options, close: true });
  }

  /** @internal */ private async post(body: Uint8Array, options: AppendOptions): Promise<AppendResult> {
    if (options.recordMatch !== undefined) await this.checkRecordMatch(options.recordMatch, options.signal);
    const headers: Record<string, string> = { ...this.requestHeaders() };
    if (options.recordMatch !== undefined) headers[H.streamRecordMatch] = String(options.recordMatch);
    if (body.length > 0) headers['content-type'] = options.contentType ?? this.contentType ?? DEFAULT_CONTENT_TYPE;
    if (options.close) headers[H.streamClosed] = 'true';
    if (options.streamSeq !== undefined) headers[H.streamSeq] = options.streamSeq;
    const producer = options.producer;
    if (producer) {
      headers[H.producerId] = producer.id;
      headers[H.producerEpoch] = String(producer.epoch);
      headers[H.producerSeq] = String(producer.seq);
      if (producer.digest !== undefined) headers[H.producerDigest] = producer.digest;
    }
    const res = await this.transport.request(this.url, { method: 'POST', headers, body, signal: options.signal, timeoutMs: options.timeoutMs });
    if (res.status !== 200 && res.status !== 204) throw await errorFromResponse(res.response);
    this.observe(res.headers);
    // Applied, but by a server that may have ignored the precondition: say so.
    if (options.recordMatch !== undefined) requireRecords(res.headers, `an append with Stream-Record-Match to ${this.url} was applied, yet`, res.status);
    return appendResult(res.status, res.headers, producer !== undefined, body.length === 0);
  }

  /**
   * Refuses a record precondition the stream cannot honour, before sending it: a server
   * without record coordinates would ignore Stream-Record-Match and append anyway.
   */
  /** @internal */ private async checkRecordMatch(recordMatch: number, signal?: AbortSignal): Promise<void> {
    if (!Number.isSafeInteger(recordMatch) || recordMatch < 0) throw new RangeError(`recordMatch must be a record ordinal (a non-negative integer), got ${recordMatch}`);
    if (this.recordsActive !== true) await this.head({ signal });
    if (this.recordsActive !== true) {
      throw new RecordsNotActiveError({ code: 'RECORDS_NOT_ACTIVE', message: `${this.url} does not advertise record coordinates (it is not an application/json stream, or the server lacks the extension): recordMatch was not sent` });
    }
  }

  async head(options: { signal?: AbortSignal } = {}): Promise<StreamInfo> {
    const res = await this.transport.request(this.url, { method: 'HEAD', headers: this.requestHeaders(), signal: options.signal });
    if (res.status !== 200) throw await errorFromResponse(res.response);
    this.observe(res.headers);
    const h = res.headers;
    this.contentType = h.get('content-type') ?? this.contentType;
    const ttl = h.get(H.streamTtl);
    const recordsActive = hasRecordsToken(h);
    this.recordsActive = recordsActive;
    return {
      contentType: h.get('content-type') ?? DEFAULT_CONTENT_TYPE,
      nextOffset: h.get(H.streamNextOffset) ?? '',
      closed: h.get(H.streamClosed) === 'true',
      lastSeq: h.get(H.streamLastSeq) ?? undefined,
      ttlSeconds: ttl === null ? undefined : Number(ttl),
      expiresAt: h.get(H.streamExpiresAt) ?? undefined,
      earliestOffset: h.get(H.streamEarliestOffset) ?? undefined,
      retention: retentionOf(h.get(H.streamRetention)),
      snapshotOffset: h.get(H.streamSnapshotOffset) ?? undefined,
      incarnation: h.get(H.streamIncarnation) ?? undefined,
      extensions: extensionsOf(h),
      recordsActive,
      ...recordTailOf(h),
    };
  }

  /** Deletes the stream; the handle forgets its incarnation, since it no longer exists. */
  async delete(options: { signal?: AbortSignal } = {}): Promise<void> {
    const res = await this.transport.request(this.url, { method: 'DELETE', headers: this.requestHeaders(), signal: options.signal });
    if (res.status !== 204 && res.status !== 200) throw await errorFromResponse(res.response);
    this.incarnation = undefined;
  }

  /** The stream's content type, asking the server once when the handle does not know it. */
  async knownContentType(signal?: AbortSignal): Promise<string> {
    if (this.contentType === undefined) await this.head({ signal });
    return this.contentType ?? DEFAULT_CONTENT_TYPE;
  }

  /** Publishes a snapshot of the history before `at`: an offset (a message boundary), or `{ record: n }` on a JSON stream. */
  publishSnapshot(at: StreamPoint, body: Uint8Array | string, options: ExtrasOptions & { contentType?: string } = {}): Promise<PublishedSnapshot> {
    return publishSnapshot(this, at, body, options);
  }

  /** The latest snapshot, or undefined when the stream has none. */
  snapshot(options: ExtrasOptions = {}): Promise<Snapshot | undefined> {
    return latestSnapshot(this, options);
  }

  /** Drops the history before `at`, an offset or `{ record: n }` (at most up to the latest snapshot). */
  retain(at: StreamPoint, options: ExtrasOptions = {}): Promise<Retained> {
    return retain(this, at, options);
  }

  /** The latest snapshot and every retained append after it. */
  bootstrap(options: ExtrasOptions = {}): Promise<Bootstrap> {
    return bootstrap(this, options);
  }

  attrs(options: ExtrasOptions = {}): Promise<StreamAttrs> {
    return getAttrs(this, options);
  }

  /** Replaces the attributes (`{}` clears them). */
  setAttrs(attrs: StreamAttrs, options: ExtrasOptions = {}): Promise<void> {
    return setAttrs(this, attrs, options);
  }

  /** Appends each frame on its own, in order, in one request (append-batch). */
  appendBatch(frames: ReadonlyArray<Uint8Array | string>, options: ExtrasOptions = {}): Promise<BatchAck[]> {
    return appendBatch(this, frames, options);
  }

  /** Reads as an async iterable of batches (see `ReadOptions` for the modes). */
  read(options: ReadOptions = {}): AsyncIterable<ReadBatch> {
    return readBatches(this, options);
  }

  /** Reads as an async iterable of messages (JSON streams: one per value). */
  messages<T = unknown>(options: ReadOptions = {}): AsyncIterable<Message<T>> {
    return readMessages<T>(this, options);
  }

  /**
   * Reads a JSON stream's records by ordinal, as an async iterable of batches (see
   * `RecordReadOptions`). Fails with `RecordsNotActiveError` on a stream without them.
   */
  recordBatches<T = unknown>(options: RecordReadOptions = {}): AsyncIterable<RecordBatch<T>> {
    return readRecordBatches<T>(this, options);
  }

  /** Reads a JSON stream's records by ordinal, one `{ record, value, text }` at a time. */
  records<T = unknown>(options: RecordReadOptions = {}): AsyncIterable<JsonRecord<T>> {
    return readRecords<T>(this, options);
  }
}

/** Stream-Forked-From names the source by its path on the same server, leading `/` included. */
function forkHeaders(url: string, fork: { source: StreamHandle | string; offset?: string }): Record<string, string> {
  const source = typeof fork.source === 'string' ? new URL(fork.source.replace(/^\/+/, ''), `${new URL(url).origin}/`).href : fork.source.url;
  const headers: Record<string, string> = { [H.streamForkedFrom]: decodeURIComponent(new URL(source).pathname) };
  if (fork.offset !== undefined) headers[H.streamForkOffset] = fork.offset;
  return headers;
}

function appendResult(status: number, headers: Headers, withProducer: boolean, closeOnly: boolean): AppendResult {
  const producer = producerAnswer(headers);
  if (withProducer && producer === undefined) {
    throw new RillError({ code: 'UNEXPECTED_RESPONSE', message: 'a producer append was answered without Producer-Epoch and Producer-Seq', status });
  }
  return {
    status,
    offset: headers.get(H.streamOffset) ?? undefined,
    nextOffset: headers.get(H.streamNextOffset) ?? undefined,
    closed: headers.get(H.streamClosed) === 'true',
    // A new producer write with a body answers 200, so its 204 is a duplicate. A close
    // without a body answers 204 either way.
    duplicate: withProducer && !closeOnly && status === 204,
    producer,
    records: recordRangeOf(headers),
  };
}

/** The Stream-Retention header of a HEAD answer; undefined when absent or not a policy. */
function retentionOf(header: string | null): RetentionPolicyOption | undefined {
  if (header === null) return undefined;
  try {
    const value: unknown = JSON.parse(header);
    return typeof value === 'object' && value !== null ? (value as RetentionPolicyOption) : undefined;
  } catch {
    return undefined;
  }
}
