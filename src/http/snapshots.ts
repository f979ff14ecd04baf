/**
 * Snapshot, retention and bootstrap routes of a stream:
 *   PUT {stream}/snapshot/{offset}   publish       GET {stream}/snapshot   307 to the latest
 *   GET {stream}/snapshot/{offset}   read          PUT {stream}/retention/{offset}
 *   GET {stream}/bootstrap           snapshot + retained messages as multipart/mixed
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  BOOTSTRAP_MAX_UPDATE_BYTES,
  bootstrapCompletion,
  bootstrapUpdates,
  planBootstrap,
  planSnapshotRead,
  type BootstrapUpdates,
  type UpdatePiece,
} from '../core/snapshot.js';
import type { StreamState } from '../core/types.js';
import { DEFAULT_CONTENT_TYPE, isJsonContentType, normalizeContentType } from '../protocol/content-type.js';
import { snapshotDigest } from '../protocol/digest.js';
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import { H } from '../protocol/headers.js';
import { extensionUrl } from '../protocol/extensions.js';
import { encodeOffset, parsePosition } from '../protocol/offset.js';
import type { HandlerContext } from './context.js';
import { header, parseQuery, readBody, incarnationOf } from './request.js';
import { answerHeaders, send, sendBodyRefusal, sendError, type HeaderMap } from './response.js';
import type { StreamAddress } from './router.js';
import { planRecordRead } from '../core/read.js';
import { parseRecordQuery } from '../core/records.js';
import { locateRecord } from '../live/records.js';
import { extensionHeaders, recordTailHeaders, storedBodyHeaders } from './stream-headers.js';

function offsetArg(arg: string | null): number | undefined {
  return arg === null ? undefined : parsePosition(arg);
}

const badOffset = () => protocolError('INVALID_OFFSET', 'the path must end with an offset such as 00000000000000000042, or the query name a record (?record=42)');

/**
 * The position a snapshot or retention names: the offset at the end of the path, or, on
 * a stream that numbers records, `?record=<n>`, the offset where record n starts. A
 * refusal carries the stream's extensions.
 */
async function targetPosition(req: IncomingMessage, ctx: HandlerContext, address: StreamAddress, arg: string | null, search: string): Promise<{ ok: true; offset: number; headers: HeaderMap } | { ok: false; error: ProtocolError; headers: HeaderMap }> {
  const query = parseQuery(search);
  const stream = await ctx.store.getStream(address.key);
  const headers = extensionHeaders(address, stream ?? null);
  if (!query.ok) return { ok: false, error: query.error, headers };
  const rawRecord = query.params.get('record');
  if (rawRecord === undefined) {
    const offset = offsetArg(arg);
    return offset === undefined ? { ok: false, error: badOffset(), headers } : { ok: true, offset, headers };
  }
  if (arg !== null) return { ok: false, error: protocolError('INVALID_QUERY', 'name the position by offset in the path or by ?record=, not both'), headers };
  const record = parseRecordQuery({ record: rawRecord, offset: false });
  if (!record.ok) return { ok: false, error: record.error, headers };
  if (record.query?.start.kind !== 'record') return { ok: false, error: protocolError('INVALID_QUERY', 'record must be a record ordinal'), headers };
  const plan = planRecordRead(stream, record.query.start, incarnationOf(req), ctx.now());
  if (!plan.ok) return { ok: false, error: plan.error, headers };
  return { ok: true, offset: await locateRecord(ctx.store, plan.stream, plan.record, ctx.recordMarks), headers };
}

export async function handlePublishSnapshot(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, address: StreamAddress, arg: string | null, search: string): Promise<void> {
  const target = await targetPosition(req, ctx, address, arg, search);
  if (!target.ok) return sendError(res, target.error, target.headers);
  const { offset } = target;
  const rawType = header(req, 'content-type');
  const contentType = rawType === undefined ? DEFAULT_CONTENT_TYPE : normalizeContentType(rawType);
  if (contentType === undefined) return sendError(res, protocolError('INVALID_CONTENT_TYPE', `"${rawType}" is not a media type`));
  const body = await readBody(req, ctx.settings.maxSnapshotBytes);
  if (!body.ok) return sendBodyRefusal(res, body.error);
  const request = {
    offset,
    contentType,
    digest: snapshotDigest(contentType, body.body),
    match: header(req, H.streamSnapshotMatch) ?? null,
    incarnation: incarnationOf(req),
  };
  const outcome = await ctx.store.run('publishSnapshot', { name: address.key, request, body: body.body });
  if (outcome.kind === 'rejected') return sendError(res, outcome.error, target.headers);
  send(
    res,
    204,
    Object.assign(
      {
        [H.streamSnapshotOffset]: encodeOffset(outcome.snapshot.offset),
        [H.streamSnapshotDigest]: outcome.snapshot.digest,
        [H.streamIncarnation]: outcome.stream.incarnation,
        'cache-control': 'no-store',
      },
      recordTailHeaders(outcome.stream),
      target.headers,
    ),
  );
}

export async function handleReadSnapshot(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, address: StreamAddress, arg: string | null): Promise<void> {
  const offset = arg === null ? null : offsetArg(arg);
  if (offset === undefined) return sendError(res, badOffset());
  const found = await ctx.store.getStream(address.key);
  const extensions = extensionHeaders(address, found ?? null);
  const plan = planSnapshotRead(found, offset, incarnationOf(req), ctx.now());
  if (!plan.ok) return sendError(res, plan.error, extensions);
  const { stream, snapshot } = plan;
  const described: HeaderMap = Object.assign(
    {
      [H.streamSnapshotOffset]: encodeOffset(snapshot.offset),
      [H.streamSnapshotDigest]: snapshot.digest,
      [H.streamIncarnation]: stream.incarnation,
      'cache-control': 'no-store',
    },
    recordTailHeaders(stream),
    extensions,
  );
  if (offset === null) {
    return send(res, 307, { ...described, location: extensionUrl(address.path, `snapshot/${encodeOffset(snapshot.offset)}`) });
  }
  const body = await ctx.store.snapshotBody(stream);
  if (body === null) throw new Error(`invariant: stream ${stream.id} has snapshot metadata but no body`);
  const headers: HeaderMap = Object.assign(described, storedBodyHeaders(snapshot.contentType), { [H.streamNextOffset]: encodeOffset(snapshot.offset) });
  if (snapshot.offset >= stream.tail) headers[H.streamUpToDate] = 'true';
  send(res, 200, headers, body);
}

export async function handleRetention(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, address: StreamAddress, arg: string | null, search: string): Promise<void> {
  const target = await targetPosition(req, ctx, address, arg, search);
  if (!target.ok) return sendError(res, target.error, target.headers);
  const outcome = await ctx.store.run('setRetention', { name: address.key, request: { offset: target.offset, incarnation: incarnationOf(req) } });
  if (outcome.kind === 'rejected') return sendError(res, outcome.error, target.headers);
  const headers = {
    [H.streamEarliestOffset]: encodeOffset(outcome.stream.earliestOffset),
    [H.streamIncarnation]: outcome.stream.incarnation,
    'cache-control': 'no-store',
  };
  send(res, 204, Object.assign(headers, recordTailHeaders(outcome.stream), target.headers));
}

/**
 * Reads the retained messages from `from` (the rule for what they are is core's
 * bootstrapUpdates): a piece is whole when it is the entire append stored at its start.
 */
async function retainedMessages(ctx: HandlerContext, stream: StreamState, from: number, windowBytes: number): Promise<BootstrapUpdates> {
  const json = isJsonContentType(stream.config.contentType);
  const pieces: UpdatePiece[] = [];
  for (const piece of await ctx.store.readChunks(stream, from, windowBytes)) {
    // JSON pieces are split into values whatever their appends, so only others look up theirs.
    pieces.push({ ...piece, whole: json || (await isWholeAppend(ctx, stream, piece)) });
  }
  const updates = bootstrapUpdates(stream, from, pieces);
  return updates.needsLargerWindow ? retainedMessages(ctx, stream, from, windowBytes * 2) : updates;
}

async function isWholeAppend(ctx: HandlerContext, stream: StreamState, piece: { start: number; data: Buffer }): Promise<boolean> {
  const append = await ctx.store.chunkAt(stream, piece.start);
  return append !== null && append.start === piece.start && append.data.length === piece.data.length;
}

function part(boundary: string, contentType: string, body: Buffer): Buffer[] {
  return [Buffer.from(`--${boundary}\r\ncontent-type: ${contentType}\r\ncontent-length: ${body.length}\r\n\r\n`), body, Buffer.from('\r\n')];
}

export async function handleBootstrap(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, address: StreamAddress, search: string): Promise<void> {
  const query = parseQuery(search);
  if (!query.ok) return sendError(res, query.error);
  if (query.params.has('live')) return sendError(res, protocolError('LIVE_NOT_ALLOWED', 'bootstrap is one-shot; tail with live reads from its Stream-Next-Offset'));
  const found = await ctx.store.getStream(address.key);
  const extensions = extensionHeaders(address, found ?? null);
  const plan = planBootstrap(found, incarnationOf(req), ctx.now());
  if (!plan.ok) return sendError(res, plan.error, extensions);
  const { stream, snapshotPoint } = plan;
  const snapshot = stream.snapshot ? await ctx.store.snapshotBody(stream) : null;
  const updates = await retainedMessages(ctx, stream, snapshotPoint, BOOTSTRAP_MAX_UPDATE_BYTES);
  ctx.store.touch(stream, ctx.now());
  const boundary = `rill-${randomBytes(12).toString('hex')}`;
  const { upToDate, closed } = bootstrapCompletion(stream, updates.next);
  const headers: HeaderMap = {
    ...answerHeaders(res),
    ...storedBodyHeaders(`multipart/mixed; boundary=${boundary}`),
    'cache-control': 'no-store',
    [H.streamSnapshotOffset]: stream.snapshot ? encodeOffset(stream.snapshot.offset) : '-1',
    [H.streamNextOffset]: encodeOffset(updates.next),
    [H.streamIncarnation]: stream.incarnation,
    ...recordTailHeaders(stream),
    ...extensions,
  };
  if (upToDate) headers[H.streamUpToDate] = 'true';
  if (closed) headers[H.streamClosed] = 'true';
  const chunks = part(boundary, stream.snapshot?.contentType ?? DEFAULT_CONTENT_TYPE, snapshot ?? Buffer.alloc(0));
  for (const message of updates.messages) chunks.push(...part(boundary, stream.config.contentType, message));
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  const body = Buffer.concat(chunks);
  res.writeHead(200, { ...headers, 'content-length': String(body.length) });
  res.end(req.method === 'HEAD' ? undefined : body);
}
