/**
 * JSON record coordinates (Ursula's `json-record-coordinates-v1`): every message of an
 * `application/json` stream has a zero-based ordinal, given in commit order and never
 * reused. A stream keeps two of them, F (`recordFirst`, the first retained record) and N
 * (`recordNext`, the ordinal the next message gets); every other ordinal is derived from
 * the stored bytes, since a stored JSON message is its compact text and one newline, and
 * compact text holds no other newline. So the ordinal of the message starting at p is
 * N minus the newlines in [p, tail), or F plus the newlines in [earliest offset, p).
 *
 * No index maps ordinals to offsets: a record read finds O(r) by counting newlines from
 * the nearest place whose ordinal is known (docs/decisions.md, "Record coordinates").
 *
 * Other streams keep F and N too, numbering appends instead of JSON messages, and never
 * answer them: they are what `{stream}/stats` counts as messages (N - F), kept as the
 * stream is written so that stats reads no stream body.
 */
import { isJsonContentType } from '../protocol/content-type.js';
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import { countJsonMessages } from '../protocol/json.js';
import type { RecordRange, StreamState } from './types.js';

const NEWLINE = 0x0a;

/** Whether the stream numbers its messages: every `application/json` stream does. */
export function hasRecords(stream: Pick<StreamState, 'config'>): boolean {
  return isJsonContentType(stream.config.contentType);
}

/** Records in stored bytes of a JSON stream (whole messages): one per newline. */
export function countRecords(data: Uint8Array): number {
  return data.length === 0 ? 0 : countJsonMessages(data);
}

/**
 * Messages in a run of stored pieces (whole appends, the first perhaps cut at its
 * start): records on a JSON stream, appends on any other.
 */
export function countMessagesIn(stream: Pick<StreamState, 'config'>, pieces: Iterable<{ data: Uint8Array }>): number {
  if (hasRecords(stream)) return countRecordsIn(pieces);
  let appends = 0;
  for (const piece of pieces) if (piece.data.length > 0) appends++;
  return appends;
}

/**
 * Messages a stream holds from its earliest offset to its tail, with no read: F and N
 * count messages on every stream (see messageNextAfterWrite on streams without records).
 */
export function messagesHeld(stream: Pick<StreamState, 'recordFirst' | 'recordNext'>): number {
  return stream.recordNext - stream.recordFirst;
}

/** Records in a run of stored pieces of a JSON stream. */
export function countRecordsIn(pieces: Iterable<{ data: Uint8Array }>): number {
  let records = 0;
  for (const piece of pieces) records += countRecords(piece.data);
  return records;
}

/** The ordinals a write of `data` (stored form) receives on `stream`; null on a stream without records. */
export function recordsOfWrite(stream: StreamState, data: Uint8Array): RecordRange | null {
  if (!hasRecords(stream)) return null;
  return { start: stream.recordNext, next: stream.recordNext + countRecords(data) };
}

/**
 * N after a write of `data`. On a stream without records F and N still count, never
 * answered: they number its appends (one message each, an empty one none), so that stats
 * reads its message count from the state (messagesHeld) instead of its bytes.
 */
export function messageNextAfterWrite(stream: StreamState, data: Uint8Array): number {
  return stream.recordNext + messagesOfWrite(hasRecords(stream), data);
}

/**
 * Messages one write of stored (framed) `data` adds: a JSON payload's lines (an array of N
 * is N), one append of any other type, none when it stores nothing (a close). What stats,
 * the usage record and the appends quota count.
 */
export function messagesOfWrite(json: boolean, data: Uint8Array): number {
  if (json) return countRecords(data);
  return data.length > 0 ? 1 : 0;
}

/**
 * Stream-Record-Match: the append applies only when N is the value sent. On a stream
 * without records the header asks for something the stream does not have (400).
 */
export function recordMatchError(stream: StreamState, expected: number | null): ProtocolError | null {
  if (expected === null) return null;
  if (!hasRecords(stream)) {
    return protocolError('RECORDS_NOT_ACTIVE', `Stream-Record-Match applies to application/json streams; this one is ${stream.config.contentType}`);
  }
  if (expected === stream.recordNext) return null;
  return protocolError('RECORD_MATCH_FAILED', `Stream-Record-Match ${expected} is not the stream's record tail, ${stream.recordNext}`, {
    recordNext: stream.recordNext,
    nextOffset: stream.tail,
  });
}

/** A byte range whose newlines, counted, give the ordinal at a message boundary. */
export interface RecordCount {
  from: number;
  to: number;
  /** The ordinal is `base + newlines` (counting up from F) or `base - newlines` (down from N). */
  sign: 1 | -1;
  base: number;
}

/**
 * How to learn the ordinal of the message boundary `position` (earliest <= position <=
 * tail): count the newlines on its shorter side.
 */
export function recordCountAt(stream: StreamState, position: number): RecordCount {
  if (position < stream.earliestOffset || position > stream.tail) {
    throw new Error(`invariant: the ordinal at ${position} is asked outside [${stream.earliestOffset}, ${stream.tail}]`);
  }
  if (position - stream.earliestOffset <= stream.tail - position) {
    return { from: stream.earliestOffset, to: position, sign: 1, base: stream.recordFirst };
  }
  return { from: position, to: stream.tail, sign: -1, base: stream.recordNext };
}

export function recordFromCount(count: RecordCount, newlines: number): number {
  return count.base + count.sign * newlines;
}

/**
 * The ordinal at `position` of a stream without records (its appends numbered, see
 * messageNextAfterWrite), from the pieces of `[count.from, count.to)` (countMessagesIn).
 * Counted back from the tail, a first piece that is the end of an append starting
 * before `position` (a fork offset inside an append) belongs below it: not counted.
 */
export function appendOrdinalFromCount(count: RecordCount, pieces: number, positionStartsAppend: boolean): number {
  if (count.sign === 1 || positionStartsAppend || pieces === 0) return recordFromCount(count, pieces);
  return recordFromCount(count, pieces - 1);
}

/** Where a record-aware read starts: `record=<n>`, `record=now` or `tail_records=<k>`. */
export type RecordStart = { kind: 'record'; record: number } | { kind: 'now' } | { kind: 'tail'; count: number };

/**
 * The ordinal a record-aware read starts at. Order: the stream numbers records (400),
 * then below F (410) and above N (400), each answer carrying F and N.
 */
export function resolveRecordStart(stream: StreamState, start: RecordStart): { ok: true; record: number } | { ok: false; error: ProtocolError } {
  if (!hasRecords(stream)) {
    return { ok: false, error: protocolError('RECORDS_NOT_ACTIVE', `record-aware reads apply to application/json streams; this one is ${stream.config.contentType}`) };
  }
  const fields = { recordFirst: stream.recordFirst, recordNext: stream.recordNext };
  if (start.kind === 'now') return { ok: true, record: stream.recordNext };
  if (start.kind === 'tail') return { ok: true, record: Math.max(stream.recordFirst, stream.recordNext - start.count) };
  if (start.record < stream.recordFirst) {
    return { ok: false, error: protocolError('RECORD_TRIMMED', `record ${start.record} is before the first retained record, ${stream.recordFirst}`, fields) };
  }
  if (start.record > stream.recordNext) {
    return { ok: false, error: protocolError('RECORD_BEYOND_TAIL', `record ${start.record} is beyond the record tail, ${stream.recordNext}`, fields) };
  }
  return { ok: true, record: start.record };
}

/** A place whose ordinal is known: the message boundary `offset` starts record `record`. */
export interface RecordMark {
  record: number;
  offset: number;
}

/**
 * The known places to count from when looking for record `record` (F <= record <= N):
 * the nearest at or below it, counted forward, and the nearest at or above it, counted
 * backward; whichever is fewer records away is read first. F at the earliest offset
 * and N at the tail are always known; `marks` are places learned from earlier reads.
 */
export function recordSearchFrom(stream: StreamState, record: number, marks: readonly RecordMark[]): { below: RecordMark; above: RecordMark } {
  let below: RecordMark = { record: stream.recordFirst, offset: stream.earliestOffset };
  let above: RecordMark = { record: stream.recordNext, offset: stream.tail };
  for (const mark of marks) {
    if (mark.offset < stream.earliestOffset || mark.offset > stream.tail) continue;
    if (mark.record <= record && mark.record > below.record) below = mark;
    if (mark.record >= record && mark.record < above.record) above = mark;
  }
  return { below, above };
}

/**
 * Counting forward through `data`: the index just past its `skip`-th newline, or null
 * with the newlines it holds when it holds fewer.
 */
export function skipRecordsForward(data: Uint8Array, skip: number): { at: number } | { seen: number } {
  if (skip === 0) return { at: 0 };
  let seen = 0;
  for (let nl = data.indexOf(NEWLINE); nl >= 0; nl = data.indexOf(NEWLINE, nl + 1)) {
    if (++seen === skip) return { at: nl + 1 };
  }
  return { seen };
}

/**
 * Counting backward through `data`, bytes just before a known message boundary or a
 * part of them: the index just past its newline number `skip + 1` from the end (so
 * `skip` whole messages lie between there and the boundary), or the newlines it holds
 * when it holds fewer.
 */
export function skipRecordsBackward(data: Uint8Array, skip: number): { at: number } | { seen: number } {
  let seen = 0;
  for (let i = data.lastIndexOf(NEWLINE); i >= 0; i = i === 0 ? -1 : data.lastIndexOf(NEWLINE, i - 1)) {
    if (seen === skip) return { at: i + 1 };
    seen++;
  }
  return { seen };
}

/** What a record-aware read returns of a window of whole messages: at most `maxRecords` of them. */
export function cutRecords(data: Buffer, maxRecords: number | null): { data: Buffer; records: number } {
  if (maxRecords === null) return { data, records: countRecords(data) };
  const cut = skipRecordsForward(data, maxRecords);
  if ('at' in cut) return { data: data.subarray(0, cut.at), records: maxRecords };
  return { data, records: cut.seen };
}

/** The record parameters of a read: where it starts, how many records at most, which view. */
export interface RecordQuery {
  start: RecordStart;
  maxRecords: number | null;
  envelope: boolean;
}

/** A read's query parameters as sent (each at most once; the caller refuses repeats). */
export interface RecordParams {
  record?: string;
  tailRecords?: string;
  maxRecords?: string;
  recordView?: string;
  /** The query names an offset. */
  offset: boolean;
}

const CANONICAL_UINT = /^(0|[1-9][0-9]{0,15})$/;

function uintOf(raw: string): number | undefined {
  if (!CANONICAL_UINT.test(raw)) return undefined;
  const value = Number(raw);
  return Number.isSafeInteger(value) ? value : undefined;
}

const queryError = (message: string): { ok: false; error: ProtocolError } => ({ ok: false, error: protocolError('INVALID_QUERY', message) });

/**
 * The record parameters of a read, or null when it has none (an offset read). A record
 * read starts with exactly one of `record` and `tail_records`, never with `offset`;
 * `max_records` and `record_view` belong to record reads only.
 */
export function parseRecordQuery(params: RecordParams): { ok: true; query: RecordQuery | null } | { ok: false; error: ProtocolError } {
  const { record, tailRecords, maxRecords, recordView } = params;
  if (record === undefined && tailRecords === undefined) {
    if (maxRecords !== undefined) return queryError('max_records needs a record start: record=<n>, record=now or tail_records=<k>');
    if (recordView !== undefined) return queryError('record_view needs a record start: record=<n>, record=now or tail_records=<k>');
    return { ok: true, query: null };
  }
  if (record !== undefined && tailRecords !== undefined) return queryError('send record or tail_records, not both');
  if (params.offset) return queryError('a read starts at an offset or at a record, not both');
  let start: RecordStart;
  if (tailRecords !== undefined) {
    const count = uintOf(tailRecords);
    if (count === undefined) return queryError('tail_records must be a non-negative integer');
    start = count === 0 ? { kind: 'now' } : { kind: 'tail', count };
  } else if (record === 'now') start = { kind: 'now' };
  else {
    const ordinal = uintOf(record!);
    if (ordinal === undefined) return queryError('record must be a record ordinal (a non-negative integer) or now');
    start = { kind: 'record', record: ordinal };
  }
  const limit = maxRecords === undefined ? null : uintOf(maxRecords);
  if (limit === undefined || limit === 0) return queryError('max_records must be a positive integer');
  if (recordView !== undefined && recordView !== 'envelope') return queryError('record_view must be envelope');
  return { ok: true, query: { start, maxRecords: limit, envelope: recordView === 'envelope' } };
}
