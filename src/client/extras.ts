/**
 * What rill offers beyond appends and reads, for one stream: snapshots, retention,
 * bootstrap, attributes and batched appends. Each function takes the stream's handle,
 * so that the handle's incarnation is sent and learned like on every other request;
 * `StreamHandle` exposes them as methods.
 */
import { extensionUrl } from '../protocol/extensions.js';
import { H } from '../protocol/headers.js';
import { errorFromResponse, RillError } from './errors.js';
import { hasRecordsToken, recordTailOf, requireRecords, type RecordRange } from './headers.js';
import type { StreamHandle } from './stream.js';

export interface Snapshot {
  /** The offset the snapshot covers: the history before it. */
  offset: string;
  /** BLAKE3-256 of the body, as the server computed it. */
  digest: string;
  contentType: string;
  body: Uint8Array;
}

export interface PublishedSnapshot {
  offset: string;
  digest: string;
}

/**
 * Where a snapshot or retention cuts a stream: an offset (a message boundary), or on a
 * JSON stream with record coordinates `{ record: n }`, the boundary where record n starts.
 */
export type StreamPoint = string | { record: number };

/** What retention answers: the earliest offset kept, and on a JSON stream the record tails. */
export interface Retained {
  earliestOffset: string;
  /** The first retained record F, when the stream has record coordinates. */
  recordFirst?: number;
  /** The record tail N, when the stream has record coordinates. */
  recordNext?: number;
}

export interface Bootstrap {
  /** The snapshot the stream holds, or undefined when it has none. */
  snapshot: Omit<Snapshot, 'digest'> | undefined;
  /** Each retained append after the snapshot (on a JSON stream, one message each). */
  messages: Uint8Array[];
  /** Where to continue reading (live, for example). */
  nextOffset: string;
  upToDate: boolean;
  closed: boolean;
}

export interface StreamAttrs {
  title?: string;
  metadata?: Record<string, unknown>;
}

/** One frame's fate in an append batch: applied (`status` 204, offsets) or refused (`code`). */
export interface BatchAck {
  status: number;
  offset?: string;
  nextOffset?: string;
  code?: string;
  message?: string;
  closed?: boolean;
  /** The ordinals the frame's messages got, on a stream with record coordinates. */
  records?: RecordRange;
}

export interface ExtrasOptions {
  signal?: AbortSignal;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const toBytes = (body: Uint8Array | string) => (typeof body === 'string' ? encoder.encode(body) : body);

/** A request to an extension of the stream: `extension` as in `snapshot/{offset}`, `query` its own parameters. */
async function call(handle: StreamHandle, extension: string | ExtensionPoint, method: string, options: ExtrasOptions & { headers?: Record<string, string>; body?: Uint8Array }, ok: number[]) {
  const point = typeof extension === 'string' ? { extension, query: '' } : extension;
  const url = extensionUrl(handle.url, point.extension, point.query);
  const init = { method, headers: { ...handle.requestHeaders(), ...options.headers }, signal: options.signal, ...(options.body ? { body: options.body } : {}) };
  const res = await handle.transport.request(url, init);
  if (!ok.includes(res.status)) throw await errorFromResponse(res.response, url);
  handle.observe(res.headers);
  return res;
}

function required(headers: Headers, name: string): string {
  const value = headers.get(name);
  if (value === null) throw new RillError({ code: 'UNEXPECTED_RESPONSE', message: `the answer has no ${name}` });
  return value;
}

interface ExtensionPoint {
  extension: string;
  query: string;
}

/**
 * A snapshot or retention at `at`: `{name}/{offset}`, or `{name}` with `record=n`.
 * A record is checked here, since the server's answer is what says the record exists.
 */
function pointPath(name: string, at: StreamPoint): ExtensionPoint {
  if (typeof at === 'string') return { extension: `${name}/${at}`, query: '' };
  if (!Number.isSafeInteger(at.record) || at.record < 0) throw new RangeError(`a record is a non-negative integer, got ${at.record}`);
  return { extension: name, query: `record=${at.record}` };
}

/** A position named by record is one only the extension gives meaning to: its answer must advertise it. */
function checkPointAnswer(handle: StreamHandle, at: StreamPoint, headers: Headers, status: number): void {
  if (typeof at !== 'string') requireRecords(headers, `a position by record on ${handle.url}`, status);
}

/** Publishes a snapshot of the history before `at` (a message boundary, or a record's start). */
export async function publishSnapshot(handle: StreamHandle, at: StreamPoint, body: Uint8Array | string, options: ExtrasOptions & { contentType?: string } = {}): Promise<PublishedSnapshot> {
  const headers = { 'content-type': options.contentType ?? handle.contentType ?? 'application/octet-stream' };
  const res = await call(handle, pointPath('snapshot', at), 'PUT', { ...options, headers, body: toBytes(body) }, [200, 201, 204]);
  checkPointAnswer(handle, at, res.headers, res.status);
  const offset = res.headers.get(H.streamSnapshotOffset) ?? (typeof at === 'string' ? at : required(res.headers, H.streamSnapshotOffset));
  return { offset, digest: required(res.headers, H.streamSnapshotDigest) };
}

/** The latest snapshot, or undefined when the stream has none. */
export async function latestSnapshot(handle: StreamHandle, options: ExtrasOptions = {}): Promise<Snapshot | undefined> {
  try {
    const res = await call(handle, 'snapshot', 'GET', options, [200]);
    return {
      offset: required(res.headers, H.streamSnapshotOffset),
      digest: required(res.headers, H.streamSnapshotDigest),
      contentType: res.headers.get('content-type') ?? 'application/octet-stream',
      body: res.body,
    };
  } catch (error) {
    if (error instanceof RillError && error.code === 'SNAPSHOT_NOT_FOUND') return undefined;
    throw error;
  }
}

/** Drops the history before `at`; it may not pass the latest snapshot. Answers the earliest offset (and record). */
export async function retain(handle: StreamHandle, at: StreamPoint, options: ExtrasOptions = {}): Promise<Retained> {
  const res = await call(handle, pointPath('retention', at), 'PUT', options, [200, 204]);
  checkPointAnswer(handle, at, res.headers, res.status);
  const earliestOffset = res.headers.get(H.streamEarliestOffset) ?? (typeof at === 'string' ? at : required(res.headers, H.streamEarliestOffset));
  const { recordFirst, recordNext } = recordTailOf(res.headers);
  return { earliestOffset, ...(recordFirst === undefined ? {} : { recordFirst }), ...(recordNext === undefined ? {} : { recordNext }) };
}

/** The snapshot plus every retained append after it: where a new reader starts. */
export async function bootstrap(handle: StreamHandle, options: ExtrasOptions = {}): Promise<Bootstrap> {
  const res = await call(handle, 'bootstrap', 'GET', options, [200]);
  const type = res.headers.get('content-type') ?? '';
  const boundary = /boundary=("?)([^";]+)\1/i.exec(type)?.[2];
  if (boundary === undefined) throw new RillError({ code: 'UNEXPECTED_RESPONSE', message: `a bootstrap answer must be multipart/mixed, got ${type}` });
  const [first, ...messages] = multipartParts(res.body, boundary);
  const snapshotOffset = res.headers.get(H.streamSnapshotOffset) ?? '-1';
  return {
    snapshot: snapshotOffset === '-1' || first === undefined ? undefined : { offset: snapshotOffset, contentType: first.contentType, body: first.body },
    messages: messages.map((p) => p.body),
    nextOffset: required(res.headers, H.streamNextOffset),
    upToDate: res.headers.get(H.streamUpToDate) === 'true',
    closed: res.headers.get(H.streamClosed) === 'true',
  };
}

/**
 * The parts of rill's multipart/mixed answer. Every part carries Content-Length, so a
 * part is cut by its length, never by searching its bytes for the boundary.
 */
export function multipartParts(body: Uint8Array, boundary: string): Array<{ contentType: string; body: Uint8Array }> {
  const parts: Array<{ contentType: string; body: Uint8Array }> = [];
  const opener = `--${boundary}\r\n`;
  let at = 0;
  for (;;) {
    const head = decoder.decode(body.subarray(at, Math.min(body.length, at + 1024)));
    if (head.startsWith(`--${boundary}--`)) return parts;
    if (!head.startsWith(opener)) throw new RillError({ code: 'UNEXPECTED_RESPONSE', message: 'malformed multipart answer' });
    const end = head.indexOf('\r\n\r\n');
    const fields = head.slice(opener.length, end).split('\r\n');
    const field = (name: string) => fields.find((f) => f.toLowerCase().startsWith(`${name}:`))?.slice(name.length + 1).trim();
    const length = Number(field('content-length'));
    if (end < 0 || !Number.isSafeInteger(length)) throw new RillError({ code: 'UNEXPECTED_RESPONSE', message: 'a multipart part without Content-Length' });
    const start = at + encoder.encode(head.slice(0, end + 4)).length;
    parts.push({ contentType: field('content-type') ?? 'application/octet-stream', body: body.slice(start, start + length) });
    at = start + length + 2;
  }
}

export async function getAttrs(handle: StreamHandle, options: ExtrasOptions = {}): Promise<StreamAttrs> {
  const res = await call(handle, 'attrs', 'GET', options, [200]);
  return JSON.parse(decoder.decode(res.body)) as StreamAttrs;
}

/** Replaces the stream's attributes (`{}` clears them); its bytes and offsets do not change. */
export async function setAttrs(handle: StreamHandle, attrs: StreamAttrs, options: ExtrasOptions = {}): Promise<void> {
  const body = encoder.encode(JSON.stringify(attrs));
  await call(handle, 'attrs', 'PUT', { ...options, headers: { 'content-type': 'application/json' }, body }, [200, 204]);
}

/** Appends each frame on its own (at most 512), in order, in one request; one ack per frame. */
export async function appendBatch(handle: StreamHandle, frames: ReadonlyArray<Uint8Array | string>, options: ExtrasOptions = {}): Promise<BatchAck[]> {
  const bytes = frames.map(toBytes);
  const body = new Uint8Array(bytes.reduce((n, f) => n + 4 + f.length, 0));
  const view = new DataView(body.buffer);
  let at = 0;
  for (const frame of bytes) {
    view.setUint32(at, frame.length);
    body.set(frame, at + 4);
    at += 4 + frame.length;
  }
  const contentType = await handle.knownContentType(options.signal);
  const res = await call(handle, 'append-batch', 'POST', { ...options, headers: { 'content-type': contentType }, body }, [200]);
  const acks = JSON.parse(decoder.decode(res.body)) as Array<Record<string, unknown>>;
  const records = hasRecordsToken(res.headers);
  return acks.map((a) => ({
    status: a.status as number,
    ...(a.streamOffset === undefined ? {} : { offset: a.streamOffset as string }),
    ...(a.streamNextOffset === undefined ? {} : { nextOffset: a.streamNextOffset as string }),
    ...(a.code === undefined ? {} : { code: a.code as string, message: a.message as string }),
    ...(a.streamClosed ? { closed: true } : {}),
    ...(records && typeof a.stream_record_start === 'number' && typeof a.stream_record_next === 'number' ? { records: { start: a.stream_record_start, next: a.stream_record_next } } : {}),
  }));
}
