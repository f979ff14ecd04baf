/**
 * Stream attributes (`GET/PUT {stream}/attrs`) and batched appends
 * (`POST {stream}/append-batch`: length-prefixed frames, each an independent append).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { canonicalAttrs, MAX_ATTRS_BYTES } from '../core/attrs.js';
import { batchRequestError } from '../core/append.js';
import { planHead } from '../core/read.js';
import type { AppendOutcome, AppendRequest } from '../core/types.js';
import { isJsonContentType, mediaType, normalizeContentType } from '../protocol/content-type.js';
import { protocolError, statusOf, type ProtocolError } from '../protocol/errors.js';
import { H } from '../protocol/headers.js';
import { jsonRefusal } from '../protocol/json.js';
import { encodeOffset } from '../protocol/offset.js';
import type { HandlerContext } from './context.js';
import { frameJson, header, readBody, incarnationOf } from './request.js';
import { send, sendBodyRefusal, sendError, sendJson } from './response.js';
import type { StreamAddress } from './router.js';
import { extensionHeaders } from './stream-headers.js';
import { countWrite } from './usage.js';

/** Parses attribute JSON text from a body or a Stream-Attrs header. */
export function parseAttrsText(text: string): { ok: true; canonical: string | null } | { ok: false; error: ProtocolError } {
  if (Buffer.byteLength(text) > MAX_ATTRS_BYTES) {
    return { ok: false, error: protocolError('PAYLOAD_TOO_LARGE', `attributes are limited to ${MAX_ATTRS_BYTES} bytes`) };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, error: protocolError('INVALID_ATTRS', 'attributes must be a JSON object') };
  }
  return canonicalAttrs(value);
}

export async function handleGetAttrs(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, address: StreamAddress): Promise<void> {
  const found = await ctx.store.getStream(address.key);
  const extensions = extensionHeaders(address, found ?? null);
  const plan = planHead(found, incarnationOf(req), ctx.now());
  if (!plan.ok) return sendError(res, plan.error, extensions);
  const headers = { 'content-type': 'application/json', 'cache-control': 'no-store', [H.streamIncarnation]: plan.stream.incarnation };
  send(res, 200, Object.assign(headers, extensions), plan.stream.attrs ?? '{}');
}

export async function handlePutAttrs(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, address: StreamAddress): Promise<void> {
  const type = normalizeContentType(header(req, 'content-type') ?? '');
  if (type === undefined || mediaType(type) !== 'application/json') {
    return sendError(res, protocolError('INVALID_CONTENT_TYPE', 'attributes are sent as application/json'));
  }
  const body = await readBody(req, MAX_ATTRS_BYTES);
  if (!body.ok) return sendBodyRefusal(res, body.error);
  const parsed = parseAttrsText(body.body.toString('utf8'));
  if (!parsed.ok) return sendError(res, parsed.error);
  const outcome = await ctx.store.run('putAttrs', { name: address.key, attrs: parsed.canonical, incarnation: incarnationOf(req) });
  if (outcome.kind === 'rejected') return sendError(res, outcome.error, extensionHeaders(address, (await ctx.store.getStream(address.key)) ?? null));
  send(res, 204, Object.assign({ 'cache-control': 'no-store', [H.streamIncarnation]: outcome.stream.incarnation }, extensionHeaders(address, outcome.stream)));
}

/** At most this many frames, and this many bytes, in one append-batch request. */
export const MAX_BATCH_FRAMES = 512;
export const MAX_BATCH_BYTES = 32 * 1024 * 1024;

/** Splits `u32 big-endian length + bytes` frames; zero-length or truncated frames are malformed. */
export function parseFrames(body: Buffer): { ok: true; frames: Buffer[] } | { ok: false; error: ProtocolError } {
  const frames: Buffer[] = [];
  let at = 0;
  while (at < body.length) {
    if (frames.length === MAX_BATCH_FRAMES) {
      return { ok: false, error: protocolError('PAYLOAD_TOO_LARGE', `an append batch holds at most ${MAX_BATCH_FRAMES} frames`) };
    }
    if (at + 4 > body.length) return { ok: false, error: protocolError('INVALID_BATCH', 'a frame length is cut short') };
    const length = body.readUInt32BE(at);
    at += 4;
    if (length === 0) return { ok: false, error: protocolError('INVALID_BATCH', 'zero-length frames are not allowed') };
    if (at + length > body.length) return { ok: false, error: protocolError('INVALID_BATCH', 'a frame is longer than the rest of the body') };
    frames.push(body.subarray(at, at + length));
    at += length;
  }
  if (frames.length === 0) return { ok: false, error: protocolError('EMPTY_BODY', 'an append batch needs at least one frame') };
  return { ok: true, frames };
}

type FrameAck = Record<string, unknown>;

function ackOf(outcome: AppendOutcome | { kind: 'rejected'; error: ProtocolError }): FrameAck {
  if (outcome.kind === 'appended') {
    const { receipt } = outcome;
    const ack: FrameAck = { status: 204, streamOffset: encodeOffset(receipt.start), streamNextOffset: encodeOffset(receipt.next) };
    // Named as Ursula's extension names them (section 6.11), for clients written against it.
    if (receipt.records) Object.assign(ack, { stream_record_start: receipt.records.start, stream_record_next: receipt.records.next });
    return ack;
  }
  if (outcome.kind !== 'rejected') throw new Error(`invariant: a batch frame cannot end as ${outcome.kind}`);
  const { error } = outcome;
  const ack: FrameAck = { status: statusOf(error.code), code: error.code, message: error.message };
  if (error.fields?.nextOffset !== undefined) ack.streamNextOffset = encodeOffset(error.fields.nextOffset);
  if (error.fields?.closed) ack.streamClosed = true;
  return ack;
}

/** The append request of one frame, or the frame's own refusal (its JSON not accepted). */
async function frameRequest(frame: Buffer, contentType: string, incarnation: string | null, maxMessages: number): Promise<AppendRequest | ProtocolError> {
  let data = frame;
  if (isJsonContentType(contentType)) {
    // A large frame is framed in slices, like a large append, so other requests are served meanwhile.
    const framed = await frameJson(frame, true, maxMessages);
    if (!framed.ok) return jsonRefusal(framed, 'frame', maxMessages);
    data = framed.data;
  }
  return { contentType, data, close: false, streamSeq: null, producer: null, bodyDigest: null, incarnation, recordMatch: null };
}

export async function handleAppendBatch(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, address: StreamAddress): Promise<void> {
  for (const name of [H.producerId, H.producerEpoch, H.producerSeq, H.streamSeq, H.streamClosed, H.streamRecordMatch]) {
    if (header(req, name) !== undefined) {
      return sendError(res, protocolError('BATCH_HEADERS_NOT_ALLOWED', `${name} is not supported on append-batch; use a plain append`));
    }
  }
  const contentType = normalizeContentType(header(req, 'content-type') ?? '');
  if (contentType === undefined) return sendError(res, protocolError('MISSING_CONTENT_TYPE', "an append batch is sent with the stream's Content-Type, the type of every frame"));
  const stream = await ctx.store.getStream(address.key);
  const extensions = extensionHeaders(address, stream ?? null);
  const refused = batchRequestError(stream, contentType, incarnationOf(req), ctx.now());
  if (refused) return sendError(res, refused, extensions);
  const body = await readBody(req, Math.min(MAX_BATCH_BYTES, ctx.settings.maxBodyBytes));
  if (!body.ok) return sendBodyRefusal(res, body.error);
  const parsed = parseFrames(body.body);
  if (!parsed.ok) return sendError(res, parsed.error);
  const incarnation = incarnationOf(req);
  const requests: Array<AppendRequest | ProtocolError> = [];
  for (const frame of parsed.frames) requests.push(await frameRequest(frame, contentType, incarnation, ctx.settings.maxAppendMessages));
  const valid = requests.filter((request): request is AppendRequest => !('code' in request));
  // The batch holds room in its bucket for every frame that would be written, or is refused whole.
  const bytes = valid.reduce((n, request) => n + request.data.length, 0);
  const overLimit = await ctx.bucketBytes.within(address.bucket, bytes, async (stored) => {
    // The batch is charged whole, by the messages of its frames that would be written, or refused whole.
    if (ctx.access.chargesMessages) {
      const json = isJsonContentType(contentType);
      const refused = ctx.access.chargeMessages(req, valid.map((request) => ({ json, data: request.data })), ctx.now());
      if (refused) return sendError(res, refused, extensions);
    }
    // All frames are queued in this turn of the event loop, so they commit in one batch, in order.
    const pending = requests.map((request) => {
      if ('code' in request) return Promise.resolve({ kind: 'rejected' as const, error: request });
      return ctx.store.run('append', { name: address.key, request });
    });
    const outcomes = await Promise.all(pending);
    outcomes.forEach((outcome, i) => {
      if (outcome.kind !== 'appended') return;
      const { data } = requests[i] as AppendRequest;
      stored(data.length);
      countWrite(req, ctx, address.bucket, contentType, data);
    });
    sendJson(res, 200, outcomes.map(ackOf), Object.assign(await incarnationHeader(ctx, address, outcomes), extensions));
  });
  if (overLimit) sendError(res, overLimit, extensions);
}

/** Like every successful answer about a stream, the batch's carries its incarnation. */
async function incarnationHeader(ctx: HandlerContext, address: StreamAddress, outcomes: Array<AppendOutcome | { kind: 'rejected' }>): Promise<Record<string, string>> {
  const applied = outcomes.find((o): o is Exclude<AppendOutcome, { kind: 'rejected' }> => o.kind !== 'rejected');
  const token = applied?.incarnation ?? (await ctx.store.getStream(address.key))?.incarnation;
  return token === undefined ? {} : { [H.streamIncarnation]: token };
}
