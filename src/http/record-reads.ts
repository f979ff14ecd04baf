/**
 * Record-aware reads of JSON streams (`record=`, `tail_records=`, `max_records=`,
 * `record_view=envelope`): the answer starts where a record starts, holds whole records
 * only, and names its place by ordinal (Stream-Record-*) and by offset at the same
 * boundary. Core decides (planRecordRead, cutRecords); live/records.ts finds the offset.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { planRecordRead } from '../core/read.js';
import { cutRecords, type RecordQuery } from '../core/records.js';
import type { StreamState } from '../core/types.js';
import { H } from '../protocol/headers.js';
import { ENVELOPE_CONTENT_TYPE, envelopeLines, locateRecord } from '../live/records.js';
import { readWindow, type ReadWindow } from '../live/window.js';
import type { HandlerContext } from './context.js';
import { cacheHeaders, countRead, etagFor, etagMatches, longPoll, positionHeaders, sendNoData, startSse, type LongPollAnswers, type ReadQuery } from './reads.js';
import { send, sendError, type HeaderMap } from './response.js';
import type { StreamAddress } from './router.js';
import { storedBodyHeaders } from './stream-headers.js';

export interface RecordRead {
  address: StreamAddress;
  stream: StreamState | undefined;
  query: ReadQuery;
  records: RecordQuery;
  /** Stream-Extensions of the answer. */
  extensions: HeaderMap;
}

export async function handleRecordRead(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, read: RecordRead): Promise<void> {
  const { query, records, extensions } = read;
  const nowMs = ctx.now();
  const plan = planRecordRead(read.stream, records.start, query.request.incarnation, nowMs);
  if (!plan.ok) return sendError(res, plan.error, extensions);
  const { stream, record } = plan;
  const position = await locateRecord(ctx.store, stream, record, ctx.recordMarks);
  ctx.store.touch(stream, nowMs);
  if (query.request.live === 'sse') {
    return startSse(req, res, ctx, { address: read.address, stream, position, query, extensions: recordHeaders(stream, record, null, extensions), records: { first: record, envelope: records.envelope } });
  }
  const answers = recordAnswers(req, res, ctx, record, records, extensions);
  if (query.request.live === 'long-poll') return longPoll(req, res, ctx, { address: read.address, first: stream, position, query }, answers);
  if (position >= stream.tail) return sendEmpty(res, stream, record, extensions);
  const window = await readWindow(ctx.store, stream, position, query.maxBytes, false);
  countRead(req, ctx, stream, window);
  answers.data(stream, position, window, '');
}

/** Stream-Record-First, -Start and -Next (N when `next` is null) beside `extra`. */
function recordHeaders(stream: StreamState, start: number, next: number | null, extra: HeaderMap): HeaderMap {
  return Object.assign(
    {
      [H.streamRecordFirst]: String(stream.recordFirst),
      [H.streamRecordStart]: String(start),
      [H.streamRecordNext]: String(next ?? stream.recordNext),
    },
    extra,
  );
}

function recordAnswers(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, record: number, records: RecordQuery, extensions: HeaderMap): LongPollAnswers {
  return {
    data: (stream, position, window, cursor) => sendRecords(req, res, ctx, { stream, record, position, window, records, extra: cursor === '' ? extensions : Object.assign({ [H.streamCursor]: cursor }, extensions) }),
    none: (stream, cursor) => sendNoData(res, stream, cursor, recordHeaders(stream, record, record, extensions)),
  };
}

/** An up-to-date record read without live: no records, the record tail and the tail. */
function sendEmpty(res: ServerResponse, stream: StreamState, record: number, extensions: HeaderMap): void {
  const headers = Object.assign(positionHeaders(stream, stream.tail), storedBodyHeaders('application/x-ndjson'), { 'cache-control': 'no-store' });
  send(res, 200, recordHeaders(stream, record, record, Object.assign(headers, extensions)), '');
}

interface RecordWindow {
  stream: StreamState;
  /** The ordinal of the record at `position`. */
  record: number;
  position: number;
  /** Whole records read from `position` (readWindow never cuts a JSON message). */
  window: ReadWindow;
  records: RecordQuery;
  extra: HeaderMap;
}

function sendRecords(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, answer: RecordWindow): void {
  const { stream, record, position, records } = answer;
  const cut = cutRecords(answer.window.data, records.maxRecords);
  const next = position + cut.data.length;
  const nextRecord = record + cut.records;
  ctx.recordMarks.add(stream.id, { record: nextRecord, offset: next });
  const etag = etagFor(stream, position, next, records.envelope ? ':envelope' : ':records');
  const headers = recordHeaders(stream, record, nextRecord, Object.assign(positionHeaders(stream, next), { etag }, cacheHeaders(req, next >= stream.tail), answer.extra));
  if (etagMatches(req, etag)) return send(res, 304, headers);
  if (!records.envelope) return send(res, 200, Object.assign(headers, storedBodyHeaders('application/x-ndjson')), cut.data);
  const lines = envelopeLines(cut.data, record);
  const body = Buffer.concat(lines.flatMap((line) => [line, NEWLINE]));
  send(res, 200, Object.assign(headers, storedBodyHeaders(ENVELOPE_CONTENT_TYPE)), body);
}

const NEWLINE = Buffer.from('\n');
