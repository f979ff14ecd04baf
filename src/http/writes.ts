/**
 * PUT (create), POST (append, close), DELETE and HEAD of a stream. Each handler parses
 * the request into a command, runs it, and renders the outcome; the rules are in core.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CreateRequest, ForkRequest } from '../core/create.js';
import { planHead } from '../core/read.js';
import type { AppendOutcome, AppendRequest } from '../core/types.js';
import { isJsonContentType, normalizeContentType } from '../protocol/content-type.js';
import { bodyDigest } from '../protocol/digest.js';
import { protocolError, statusOf, type ProtocolError } from '../protocol/errors.js';
import { H } from '../protocol/headers.js';
import { jsonRefusal, type JsonFrameResult } from '../protocol/json.js';
import { encodeOffset, parsePosition } from '../protocol/offset.js';
import {
  parseCanonicalUint,
  parseClosedFlag,
  parseExpiresAt,
  parseProducerHeaders,
  parseRecordMatch,
  parseStreamSeq,
  parseTtl,
  type Parsed,
  type ProducerHeaders,
} from '../protocol/parse.js';
import { parseAttrsText } from './attrs-batch.js';
import type { HandlerContext } from './context.js';
import { readableOrMissing } from './access.js';
import { createWithinStreamLimit } from './bucket-limits.js';
import { frameJson, header, readBody, incarnationOf, type BodyResult } from './request.js';
import { errorHeaders, send, sendError, sendOwnHeaders, type HeaderMap } from './response.js';
import { resolveStreamReference, type StreamAddress } from './router.js';
import { countRecords, hasRecords } from '../core/records.js';
import { parseRetentionHeader, type RetentionPolicy } from '../core/retention-policy.js';
import type { RecordRange, StreamState } from '../core/types.js';
import { describeStream, extensionHeaders, extensionsOf, metadataHeaders, producerHeaders, receiptHeaders, recordRangeHeaders } from './stream-headers.js';
import { countWrite } from './usage.js';

class RequestError extends Error {
  constructor(readonly protocol: ProtocolError) {
    super(protocol.message);
  }
}

function unwrap<T>(parsed: Parsed<T>): T {
  if (!parsed.ok) throw new RequestError(parsed.error);
  return parsed.value;
}

function requestContentType(req: IncomingMessage): string | null {
  const raw = header(req, 'content-type');
  if (raw === undefined || raw.trim() === '') return null;
  const normal = normalizeContentType(raw);
  if (normal === undefined) throw new RequestError(protocolError('INVALID_CONTENT_TYPE', `"${raw}" is not a media type`));
  return normal;
}

function producerOf(req: IncomingMessage): ProducerHeaders | null {
  const parsed = parseProducerHeaders(
    header(req, H.producerId),
    header(req, H.producerEpoch),
    header(req, H.producerSeq),
    header(req, H.producerDigest),
  );
  return unwrap(parsed) ?? null;
}

/**
 * Frames a body for a content type: JSON bodies become compact messages, one per line.
 * A large JSON body is framed in slices (frameJson), so the answer may be a promise.
 */
function frame(body: Buffer, contentType: string | null, allowEmptyArray: boolean, maxMessages: number): Buffer | Promise<Buffer> {
  if (body.length === 0 || contentType === null || !isJsonContentType(contentType)) return body;
  const framed = frameJson(body, true, maxMessages);
  if (!(framed instanceof Promise)) return framedOrRefusal(framed, allowEmptyArray, maxMessages);
  return framed.then((result) => framedOrRefusal(result, allowEmptyArray, maxMessages));
}

function framedOrRefusal(framed: JsonFrameResult, allowEmptyArray: boolean, maxMessages: number): Buffer {
  if (framed.ok) return framed.data;
  if (framed.reason === 'empty-array' && allowEmptyArray) return Buffer.alloc(0);
  throw new RequestError(jsonRefusal(framed, 'body', maxMessages));
}

/** The body read, or its refusal thrown (a plain function, so the append path adds no async layer). */
function bodyOrRefusal(read: BodyResult): Buffer {
  if (!read.ok) throw new RequestError(read.error);
  return read.body;
}

/** Answers a RequestError (a 4xx found while parsing); rethrows anything else. */
function answerRequestError(res: ServerResponse, error: unknown): void {
  if (!(error instanceof RequestError)) throw error;
  if (error.protocol.code === 'PAYLOAD_TOO_LARGE') res.setHeader('connection', 'close');
  sendError(res, error.protocol);
}

/** Runs a handler's body, answering the RequestError it throws. */
async function guarded(res: ServerResponse, body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } catch (error) {
    answerRequestError(res, error);
  }
}

function parseFork(req: IncomingMessage): ForkRequest | null {
  const from = header(req, H.streamForkedFrom);
  const offsetRaw = header(req, H.streamForkOffset);
  const subRaw = header(req, H.streamForkSubOffset);
  const bad = (message: string) => new RequestError(protocolError('INVALID_FORK', message));
  if (from === undefined) {
    if (offsetRaw !== undefined || subRaw !== undefined) throw bad('fork offsets need Stream-Forked-From');
    return null;
  }
  const named = resolveStreamReference(from);
  if ('code' in named) throw new RequestError(named);
  // A source the token cannot read is forked as one that does not exist (concealment).
  const source = readableOrMissing(req, named);
  const offset = offsetRaw === undefined ? null : parsePosition(offsetRaw);
  if (offset === undefined) throw bad('Stream-Fork-Offset is not a valid offset');
  const subOffset = subRaw === undefined ? 0 : parseCanonicalUint(subRaw, Number.MAX_SAFE_INTEGER);
  if (subOffset === undefined) throw bad('Stream-Fork-Sub-Offset must be a non-negative integer without sign or leading zeros');
  if (subOffset > 0 && offset === null) throw bad('Stream-Fork-Sub-Offset needs Stream-Fork-Offset');
  return { sourceName: source.key, offset, subOffset };
}

function parseExpiry(req: IncomingMessage): { ttlSeconds: number | null; expiresAtMs: number | null } {
  const ttl = header(req, H.streamTtl);
  const expires = header(req, H.streamExpiresAt);
  if (ttl !== undefined && expires !== undefined) {
    throw new RequestError(protocolError('TTL_AND_EXPIRES_AT', 'send Stream-TTL or Stream-Expires-At, not both'));
  }
  return {
    ttlSeconds: ttl === undefined ? null : unwrap(parseTtl(ttl)),
    expiresAtMs: expires === undefined ? null : unwrap(parseExpiresAt(expires)),
  };
}

/** Stream-Retention: the stream's own policy (absent when none), refused with 400 when malformed. */
function retentionHeader(req: IncomingMessage): { retention?: RetentionPolicy } {
  const raw = header(req, H.streamRetention);
  if (raw === undefined) return {};
  const policy = unwrapPolicy(parseRetentionHeader(raw));
  return policy === null ? {} : { retention: policy };
}

function unwrapPolicy(read: ReturnType<typeof parseRetentionHeader>): RetentionPolicy | null {
  if (!read.ok) throw new RequestError(read.error);
  return read.policy;
}

export async function handleCreate(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, address: StreamAddress): Promise<void> {
  await guarded(res, async () => {
    if (producerOf(req) !== null) {
      throw new RequestError(protocolError('PRODUCER_HEADERS_ON_CREATE', 'create the stream first, then claim a producer epoch with an append'));
    }
    const contentType = requestContentType(req);
    const fork = parseFork(req);
    const request: CreateRequest = {
      name: address.key,
      bucket: address.bucket,
      contentType,
      ...parseExpiry(req),
      close: unwrap(parseClosedFlag(header(req, H.streamClosed))),
      data: Buffer.alloc(0),
      streamSeq: unwrap(parseStreamSeq(header(req, H.streamSeq))) ?? null,
      incarnation: incarnationOf(req),
      fork,
      attrs: attrsHeader(req),
      ...retentionHeader(req),
    };
    const body = bodyOrRefusal(await readBody(req, ctx.settings.maxBodyBytes));
    const framingType = contentType ?? (fork ? ((await ctx.store.getStream(fork.sourceName))?.config.contentType ?? null) : null);
    const framed = frame(body, framingType, true, ctx.settings.maxAppendMessages);
    request.data = framed instanceof Buffer ? framed : await framed;
    const outcome = await createWithinStreamLimit(ctx, address, async () => {
      // A create's initial messages are written like an append's, and charged the same once
      // the bucket has room (its create was charged on arrival).
      const created = await ctx.bucketBytes.within(address.bucket, request.data.length, async (stored) => {
        if (ctx.access.chargesMessages && request.data.length > 0) chargeOrRefuse(req, ctx, framingType, request.data);
        const outcome = await ctx.store.run('createStream', request);
        if (outcome.kind === 'created') stored(request.data.length);
        return outcome;
      });
      if ('code' in created) throw new RequestError(created);
      return created;
    });
    if ('code' in outcome) return sendError(res, outcome);
    if (outcome.kind === 'rejected') return sendError(res, outcome.error, extensionsOf(address, outcome.records));
    // Found, the stream was not written: only a create stores its body.
    if (outcome.kind === 'created') countWrite(req, ctx, address.bucket, framingType, request.data);
    const headers = Object.assign(describeStream(outcome.stream), extensionHeaders(address, outcome.stream));
    if (outcome.kind === 'created') headers['location'] = absoluteUrl(req, ctx, address.path);
    const created = createdRecords(outcome, request.data);
    if (created) Object.assign(headers, recordRangeHeaders(created));
    send(res, outcome.kind === 'created' ? 201 : 200, Object.assign(headers, { 'cache-control': 'no-store' }));
  });
}

/** Stream-Attrs on create: JSON text, sent as UTF-8 bytes (Node reads header bytes as latin1). */
function attrsHeader(req: IncomingMessage): string | null {
  const raw = header(req, H.streamAttrs);
  if (raw === undefined) return null;
  const parsed = parseAttrsText(Buffer.from(raw, 'latin1').toString('utf8'));
  if (!parsed.ok) throw new RequestError(parsed.error);
  return parsed.canonical;
}

/**
 * The ordinals a create made: those of its body's messages (a fork's inherited ones were
 * the source's); none, at the record tail, when it found the stream. Null when the
 * stream has no records.
 */
function createdRecords(outcome: { kind: 'created' | 'exists'; stream: StreamState }, body: Buffer): RecordRange | null {
  const { stream } = outcome;
  if (!hasRecords(stream)) return null;
  const made = outcome.kind === 'created' ? countRecords(body) : 0;
  return { start: stream.recordNext - made, next: stream.recordNext };
}

/** A Host that is a name or an address with an optional port: nothing else goes into a Location. */
const PLAIN_HOST = /^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*|\[[0-9a-f:.]+\])(?::\d{1,5})?$/i;

/**
 * A created stream's URL: under `--public-url` when it is set (a proxy in front), else the
 * served scheme with the request's Host when that Host is a plain host[:port], else the
 * listener's own address: a raw Host is never echoed into the header.
 */
function absoluteUrl(req: IncomingMessage, ctx: HandlerContext, path: string): string {
  const publicUrl = ctx.settings.publicUrl;
  if (publicUrl !== null) return `${publicUrl.replace(/\/+$/, '')}${path}`;
  const host = header(req, 'host');
  if (host !== undefined && host.length <= 260 && PLAIN_HOST.test(host)) return `${ctx.settings.tlsCertFile === null ? 'http' : 'https'}://${host}${path}`;
  return `${ctx.subscriptions.options.baseUrl()}${path}`;
}

/**
 * The append path is the hot one, so it is written flat: one async function, the
 * body read awaited directly (each async layer it went through cost a promise and
 * microtask turns per append).
 */
export async function handleAppend(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, address: StreamAddress): Promise<void> {
  try {
    const close = unwrap(parseClosedFlag(header(req, H.streamClosed)));
    const producer = producerOf(req);
    const streamSeq = unwrap(parseStreamSeq(header(req, H.streamSeq))) ?? null;
    const body = bodyOrRefusal(await readBody(req, ctx.settings.maxBodyBytes));
    const request = appendRequest(req, body, close, streamSeq, producer);
    const framed = frame(body, request.contentType, false, ctx.settings.maxAppendMessages);
    request.data = framed instanceof Buffer ? framed : await framed;
    // Streams outside buckets skip the await: an append pays for each async step.
    const bucketRetention = address.bucket === null ? undefined : await bucketRetentionOf(ctx, address.bucket);
    const overLimit = await ctx.bucketBytes.within(address.bucket, request.data.length, async (stored) => {
      if (ctx.access.chargesMessages) chargeOrRefuse(req, ctx, request.contentType, request.data);
      const outcome = await ctx.store.run('append', { name: address.key, request, bucketRetention });
      // A duplicate or a refusal stored nothing.
      if (outcome.kind === 'appended') {
        stored(request.data.length);
        countWrite(req, ctx, address.bucket, request.contentType, request.data);
      }
      renderAppend(res, address, outcome);
    });
    if (overLimit) throw new RequestError(overLimit);
  } catch (error) {
    answerRequestError(res, error);
  }
}

/**
 * The bucket's default retention policy, as this node's settings cache knows it (at most
 * BUCKET_SETTINGS_CACHE_MS old): passed with the append so that the store applies it
 * without reading, or locking, the bucket's row on every append.
 */
export async function bucketRetentionOf(ctx: HandlerContext, bucket: string | null): Promise<RetentionPolicy | undefined> {
  return bucket === null ? undefined : (await ctx.bucketSettings.get(bucket))?.retention;
}

/** Charges a write's messages to its token's quota, or throws the refusal (nothing written). */
function chargeOrRefuse(req: IncomingMessage, ctx: HandlerContext, contentType: string | null, data: Buffer): void {
  const json = contentType !== null && isJsonContentType(contentType);
  const refused = ctx.access.chargeMessages(req, [{ json, data }], ctx.now());
  if (refused) throw new RequestError(refused);
}

function appendRequest(req: IncomingMessage, body: Buffer, close: boolean, streamSeq: string | null, producer: ProducerHeaders | null): AppendRequest {
  if (body.length === 0 && !close) throw new RequestError(protocolError('EMPTY_BODY', 'an append needs a body (or Stream-Closed: true to close)'));
  const contentType = body.length === 0 ? requestContentTypeLenient(req) : requestContentType(req);
  if (body.length > 0 && contentType === null) {
    throw new RequestError(protocolError('MISSING_CONTENT_TYPE', 'an append with a body needs a Content-Type'));
  }
  return {
    contentType,
    data: body,
    close,
    streamSeq,
    producer,
    bodyDigest: producer?.digest !== undefined ? bodyDigest(body) : null,
    incarnation: incarnationOf(req),
    recordMatch: unwrap(parseRecordMatch(header(req, H.streamRecordMatch))),
  };
}

/** A close-only POST ignores its Content-Type, even a malformed one. */
function requestContentTypeLenient(req: IncomingMessage): string | null {
  try {
    return requestContentType(req);
  } catch {
    return null;
  }
}

/** What an append answers on the wire: status and headers, or the typed refusal. */
export interface AppendAnswer {
  status: number;
  headers: HeaderMap;
  error: ProtocolError | null;
}

/** The one mapping from an append outcome to its HTTP answer; pure, so tests can check it. */
export function appendAnswer(outcome: AppendOutcome): AppendAnswer {
  switch (outcome.kind) {
    case 'rejected':
      return { status: statusOf(outcome.error.code), headers: errorHeaders(outcome.error), error: outcome.error };
    case 'already-closed': {
      const headers: HeaderMap = { [H.streamNextOffset]: encodeOffset(outcome.tail), [H.streamClosed]: 'true', [H.streamIncarnation]: outcome.incarnation };
      if (outcome.records) Object.assign(headers, recordRangeHeaders({ start: outcome.recordNext, next: outcome.recordNext }));
      return { status: 204, headers, error: null };
    }
    case 'duplicate': {
      const headers = producerHeaders(outcome.producer, outcome.receipt ? receiptHeaders(outcome.receipt) : {});
      headers[H.streamIncarnation] = outcome.incarnation;
      return { status: 204, headers, error: null };
    }
    case 'appended': {
      // A new producer write answers 200 with its receipt; a plain append and a producer
      // close-only write answer 204 (the upstream conformance suite requires the latter).
      const status = outcome.producer && !outcome.closeOnly ? 200 : 204;
      const headers = receiptHeaders(outcome.receipt);
      if (outcome.producer) producerHeaders(outcome.producer, headers);
      headers[H.streamIncarnation] = outcome.incarnation;
      return { status, headers, error: null };
    }
  }
}

function renderAppend(res: ServerResponse, address: StreamAddress, outcome: AppendOutcome): void {
  const answer = appendAnswer(outcome);
  const extensions = extensionsOf(address, outcome.records);
  if (answer.error) return sendError(res, answer.error, extensions);
  // appendAnswer's headers are made for this answer alone: adding to them saves a copy.
  answer.headers['cache-control'] = 'no-store';
  sendOwnHeaders(res, answer.status as 200 | 204, Object.assign(answer.headers, extensions));
}

export async function handleDelete(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, address: StreamAddress): Promise<void> {
  const outcome = await ctx.store.run('deleteStream', { name: address.key, incarnation: incarnationOf(req) });
  if (outcome.kind === 'rejected') return sendError(res, outcome.error);
  if (address.bucket !== null) ctx.bucketBytes.forget(address.bucket);
  send(res, 204, { 'cache-control': 'no-store' });
}

export async function handleHead(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, address: StreamAddress): Promise<void> {
  const found = await ctx.store.getStream(address.key);
  const plan = planHead(found, incarnationOf(req), ctx.now());
  if (!plan.ok) return sendError(res, plan.error, extensionHeaders(address, plan.error.code === 'INCARNATION_MISMATCH' ? found! : null));
  send(res, 200, Object.assign(metadataHeaders(plan.stream), extensionHeaders(address, plan.stream), { 'cache-control': 'no-store' }));
}
