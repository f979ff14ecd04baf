/**
 * Reading a JSON stream by record ordinal (Ursula's `json-record-coordinates-v1`): every
 * message of an `application/json` stream has an ordinal, and a record-aware read starts
 * at one (`record=<n>`, `record=now` or `tail_records=<k>`), holds whole messages only and
 * says where it ends both by ordinal (Stream-Record-Next, SSE `streamNextRecord`) and by
 * offset. Like offset reads it catches up, then may follow with long-poll or SSE, and it
 * resumes every request and reconnection from the last record boundary it was told.
 *
 * Before reading any record header or body, each answer must advertise the extension's
 * token; an answer without it is refused with `RecordsNotActiveError`, since a server
 * that ignores `record=` answers an ordinary offset read that holds no ordinals.
 */
import { H } from '../protocol/headers.js';
import { RillError } from './errors.js';
import { arrayElementLengths } from './frames.js';
import { requiredUint, requireRecords } from './headers.js';
import { discard } from './http.js';
import { pollingReads, sendRead, type ReadOptions } from './read.js';
import { openSse, parseControl, reconnecting, sseEvents, type Control } from './sse.js';
import type { StreamHandle } from './stream.js';

export interface RecordReadOptions extends Omit<ReadOptions, 'offset'> {
  /**
   * The first record: an ordinal, or `'now'` (the record tail: only what is appended
   * from now on). Default 0, the stream's first, unless retention trimmed it: then the
   * read fails with `RecordTrimmedError`, whose `recordFirst` is where it may start.
   */
  record?: number | 'now';
  /** Instead of `record`: start at the last `tailRecords` records (all when fewer; 0 is `'now'`). */
  tailRecords?: number;
  /** At most this many records per answer (catch-up and long-poll; SSE sends them as they come). */
  maxRecords?: number;
  /**
   * Ask for the envelope view, in which the server states each record's ordinal
   * (`{"record":n,"value":...}`; over SSE, one record per event); the client checks
   * them against its own count. The records yielded are the same either way.
   */
  envelope?: boolean;
}

/** One message of a JSON stream with its ordinal. */
export interface JsonRecord<T = unknown> {
  record: number;
  value: T;
  /** The message as the stream stores it: its compact JSON text, byte for byte. */
  text: string;
}

/** One answer of a record read. */
export interface RecordBatch<T = unknown> {
  records: JsonRecord<T>[];
  /** The stream's first retained record F when the server answered. */
  recordFirst: number;
  /** The ordinal of the batch's first record (where the batch starts). */
  recordStart: number;
  /** The ordinal after the batch: where the next read continues. */
  recordNext: number;
  /** The offset at the same boundary as `recordNext`, for offset reads. */
  nextOffset: string;
  /** The batch reaches the tail as it was when the server answered. */
  upToDate: boolean;
  /** The stream is closed and this batch reaches its end: nothing will follow. */
  closed: boolean;
}

/** Where a record read stands: the next record once an answer named it, and the long-poll cursor. */
interface RecordPosition {
  next: number | undefined;
  cursor: string | undefined;
}

const isOrdinal = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;

/** Refuses options the server would refuse, or that mean nothing, before any request. */
function checkOptions(options: RecordReadOptions): void {
  const { record, tailRecords, maxRecords, maxBytes } = options;
  if (record !== undefined && tailRecords !== undefined) throw new RangeError('a record read starts at record or at tailRecords, not both');
  if (record !== undefined && record !== 'now' && !isOrdinal(record)) throw new RangeError(`record must be a record ordinal (a non-negative integer) or 'now', got ${String(record)}`);
  if (tailRecords !== undefined && !isOrdinal(tailRecords)) throw new RangeError(`tailRecords must be a non-negative integer, got ${tailRecords}`);
  if (maxRecords !== undefined && !(isOrdinal(maxRecords) && maxRecords > 0)) throw new RangeError(`maxRecords must be a positive integer, got ${maxRecords}`);
  if (maxRecords !== undefined && options.live === 'sse') throw new RangeError('maxRecords bounds catch-up and long-poll answers; SSE sends records as they come');
  if (maxBytes !== undefined && !(isOrdinal(maxBytes) && maxBytes > 0)) throw new RangeError(`maxBytes must be a positive integer, got ${maxBytes}`);
}

/** Where the next request starts: the last boundary an answer named, else the start asked for. */
function startParams(position: RecordPosition, options: RecordReadOptions): URLSearchParams {
  const params =
    position.next !== undefined
      ? new URLSearchParams({ record: String(position.next) })
      : options.tailRecords !== undefined
        ? new URLSearchParams({ tail_records: String(options.tailRecords) })
        : new URLSearchParams({ record: String(options.record ?? 0) });
  if (options.envelope) params.set('record_view', 'envelope');
  return params;
}

export async function* readRecordBatches<T>(stream: StreamHandle, options: RecordReadOptions): AsyncGenerator<RecordBatch<T>> {
  checkOptions(options);
  const position: RecordPosition = { next: undefined, cursor: undefined };
  if (options.live === 'sse') {
    const batches = reconnecting(() => sseRecordConnection<T>(stream, position, options), (batch) => batch.closed, options);
    for await (const batch of batches) if (batch.records.length > 0 || batch.closed || options.heartbeats) yield batch;
    return;
  }
  yield* pollingReads((live) => fetchRecords<T>(stream, position, options, live), options, (batch) => batch.records.length > 0);
}

export async function* readRecords<T>(stream: StreamHandle, options: RecordReadOptions): AsyncGenerator<JsonRecord<T>> {
  for await (const batch of readRecordBatches<T>(stream, { ...options, heartbeats: false })) yield* batch.records;
}

async function fetchRecords<T>(stream: StreamHandle, position: RecordPosition, options: RecordReadOptions, live: boolean): Promise<RecordBatch<T>> {
  const params = startParams(position, options);
  if (options.maxRecords !== undefined) params.set('max_records', String(options.maxRecords));
  const res = await sendRead(stream, params, position.cursor, options, live);
  const h = res.headers;
  requireRecords(h, `a record read of ${stream.url}`, res.status);
  const nextOffset = h.get(H.streamNextOffset);
  if (nextOffset === null) throw new RillError({ code: 'UNEXPECTED_RESPONSE', message: 'a record read answer without Stream-Next-Offset', status: res.status });
  const recordStart = requiredUint(h, H.streamRecordStart, res.status);
  const texts = res.status === 204 ? [] : bodyTexts(res.body, recordStart, options.envelope === true);
  const batch = recordBatch<T>(texts, recordStart, {
    recordFirst: requiredUint(h, H.streamRecordFirst, res.status),
    recordNext: requiredUint(h, H.streamRecordNext, res.status),
    nextOffset,
    upToDate: res.status === 204 || h.get(H.streamUpToDate) === 'true',
    closed: h.get(H.streamClosed) === 'true',
  });
  position.next = batch.recordNext;
  position.cursor = h.get(H.streamCursor) ?? position.cursor;
  return batch;
}

type BatchEnd = Omit<RecordBatch, 'records' | 'recordStart'>;

/** A batch of `texts` starting at `recordStart`, checked against the boundary the server named. */
function recordBatch<T>(texts: string[], recordStart: number, end: BatchEnd): RecordBatch<T> {
  if (recordStart + texts.length !== end.recordNext) {
    throw unexpected(`a record read from ${recordStart} to ${end.recordNext} held ${texts.length} records`);
  }
  const records = texts.map((text, i) => ({ record: recordStart + i, value: parseText(text) as T, text }));
  return { records, recordStart, ...end };
}

function unexpected(message: string): RillError {
  return new RillError({ code: 'UNEXPECTED_RESPONSE', message });
}

function parseText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new RillError({ code: 'UNEXPECTED_RESPONSE', message: 'a record is not valid JSON', cause: error });
  }
}

const utf8 = new TextDecoder('utf-8');
const encoder = new TextEncoder();

/** The records of an NDJSON answer (one per line; compact JSON text holds no newline). */
function bodyTexts(body: Uint8Array, recordStart: number, envelope: boolean): string[] {
  const lines = utf8.decode(body).split('\n');
  if (lines.at(-1) === '') lines.pop();
  return envelope ? lines.map((line, i) => envelopeText(line, recordStart + i)) : lines;
}

/** The envelope as rill writes it: the stored text embedded verbatim after the ordinal. */
const ENVELOPE = /^\{"record":(0|[1-9]\d*),"value":([\s\S]*)\}$/;

/** The stored text inside an envelope `{"record":n,"value":...}`, whose ordinal must be `expected`. */
function envelopeText(line: string, expected: number): string {
  const exact = ENVELOPE.exec(line);
  // Another server may lay the object out otherwise: read it as JSON then.
  const envelope = exact ? { record: Number(exact[1]), text: exact[2]! } : parsedEnvelope(line);
  if (envelope.record !== expected) throw unexpected(`an envelope names record ${envelope.record} where ${expected} was due`);
  return envelope.text;
}

function parsedEnvelope(line: string): { record: number; text: string } {
  const value = parseText(line) as { record?: unknown; value?: unknown } | null;
  if (value === null || typeof value !== 'object' || !isOrdinal(value.record) || !('value' in value)) throw unexpected('a record envelope without its record and value');
  return { record: value.record, text: JSON.stringify(value.value) };
}

/** The records of one SSE data event: one envelope, or a JSON array of stored texts. */
function eventTexts(data: string, envelope: boolean, expected: number): string[] {
  if (envelope) return [envelopeText(data, expected)];
  const bytes = encoder.encode(data);
  const lengths = arrayElementLengths(bytes);
  if (lengths === undefined) throw unexpected('an SSE data event of a JSON stream is not a JSON array');
  const texts: string[] = [];
  let at = bytes.indexOf(0x5b) + 1;
  for (const length of lengths) {
    // Elements are separated by a comma and perhaps blanks; each starts at its first non-blank byte.
    while (bytes[at] === 0x2c || bytes[at] === 0x20 || bytes[at] === 0x0a || bytes[at] === 0x0d || bytes[at] === 0x09) at++;
    texts.push(utf8.decode(bytes.subarray(at, at + length)));
    at += length;
  }
  return texts;
}

/** Opens an SSE record read; an answer without the extension's token is refused, its body cancelled. */
async function openRecordSse(stream: StreamHandle, position: RecordPosition, options: RecordReadOptions): Promise<Response> {
  const params = startParams(position, options);
  if (position.cursor !== undefined) params.set('cursor', position.cursor);
  if (options.maxBytes !== undefined) params.set('max_bytes', String(options.maxBytes));
  const res = await openSse(stream, params, options.signal);
  try {
    requireRecords(res.headers, `a record read of ${stream.url}`, res.status);
    // The start the server resolved (`now`, a tail): a reconnection before any event resumes there.
    position.next = requiredUint(res.headers, H.streamRecordStart, res.status);
  } catch (error) {
    discard(res);
    throw error;
  }
  return res;
}

async function* sseRecordConnection<T>(stream: StreamHandle, position: RecordPosition, options: RecordReadOptions): AsyncGenerator<RecordBatch<T>> {
  const res = await openRecordSse(stream, position, options);
  let texts: string[] = [];
  for await (const event of sseEvents(res.body)) {
    const start = position.next!;
    if (event.event === 'data') {
      texts.push(...eventTexts(event.data, options.envelope === true, start + texts.length));
      continue;
    }
    if (event.event !== 'control') continue;
    const control = parseControl(event.data);
    // The last event before the server ends a connection whose token expired: the records
    // since the last boundary are read again after reconnecting.
    if (control.tokenExpired) {
      texts = [];
      continue;
    }
    const batch = recordBatch<T>(texts, start, controlEnd(control));
    texts = [];
    position.next = batch.recordNext;
    position.cursor = control.streamCursor ?? position.cursor;
    yield batch;
  }
}

function controlEnd(control: Control): BatchEnd {
  const { streamFirstRecord, streamNextRecord } = control;
  if (!isOrdinal(streamFirstRecord) || !isOrdinal(streamNextRecord)) throw unexpected('a record-aware SSE control event without streamFirstRecord and streamNextRecord');
  return {
    recordFirst: streamFirstRecord,
    recordNext: streamNextRecord,
    nextOffset: control.streamNextOffset,
    upToDate: control.upToDate === true,
    closed: control.streamClosed === true,
  };
}
