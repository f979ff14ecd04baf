/**
 * SSE reads. The server sends `event: data` with a batch (JSON streams: one JSON
 * array; binary streams: base64) followed by `event: control` with the offset after it.
 * The server ends a connection after a while (about a minute) and the reader reopens it
 * from the last control offset, so a tail can run for as long as the caller wants.
 */
import { isJsonContentType } from '../protocol/content-type.js';
import { H } from '../protocol/headers.js';
import { abortError, retryPolicy } from './backoff.js';
import { errorFromResponse, RillError } from './errors.js';
import { afterFailure, makeBatch, type ReadBatch, type ReadOptions, type ReadPosition } from './read.js';
import type { StreamHandle } from './stream.js';

export interface SseEvent {
  event: string;
  data: string;
}

/** A connection that shows no sign of life this long is reopened (the server sends keep-alives every 15 s). */
export const SSE_IDLE_TIMEOUT_MS = 45_000;
/** Bound on one event's size, so a broken peer cannot grow the buffer without end. */
const MAX_EVENT_CHARS = 64 * 1024 * 1024;

/** Splits SSE text into events (WHATWG rules: `field: value`, one optional space, blank line ends). */
export class SseParser {
  /** @internal */ private buffer = '';
  /** @internal */ private eventType = '';
  /** @internal */ private dataLines: string[] = [];
  /** @internal */ private size = 0;

  push(text: string): SseEvent[] {
    this.buffer += text;
    const events: SseEvent[] = [];
    let start = 0;
    for (;;) {
      const nl = this.nextBreak(start);
      if (nl < 0) break;
      const line = this.buffer.slice(start, nl);
      start = nl + (this.buffer[nl] === '\r' && this.buffer[nl + 1] === '\n' ? 2 : 1);
      const event = this.line(line);
      if (event) events.push(event);
    }
    this.buffer = this.buffer.slice(start);
    if (this.buffer.length + this.size > MAX_EVENT_CHARS) {
      throw new RillError({ code: 'UNEXPECTED_RESPONSE', message: 'an SSE event is larger than the client accepts' });
    }
    return events;
  }

  /** Index of the next line break; a trailing `\r` waits, since `\n` may follow. */
  /** @internal */ private nextBreak(from: number): number {
    for (let i = from; i < this.buffer.length; i++) {
      const c = this.buffer[i];
      if (c === '\n') return i;
      if (c === '\r') return i + 1 < this.buffer.length ? i : -1;
    }
    return -1;
  }

  /** @internal */ private line(line: string): SseEvent | undefined {
    if (line === '') return this.dispatch();
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.eventType = value;
    else if (field === 'data') {
      this.dataLines.push(value);
      this.size += value.length;
    }
    return undefined;
  }

  /** @internal */ private dispatch(): SseEvent | undefined {
    if (this.dataLines.length === 0) {
      this.eventType = '';
      return undefined;
    }
    const event = { event: this.eventType || 'message', data: this.dataLines.join('\n') };
    this.eventType = '';
    this.dataLines = [];
    this.size = 0;
    return event;
  }
}

/** An SSE control event: where the events before it end, and the stream's state. */
export interface Control {
  streamNextOffset: string;
  streamCursor?: string;
  upToDate?: boolean;
  streamClosed?: boolean;
  /** Record-aware reads: the first retained record F, and the record after the events before it. */
  streamFirstRecord?: number;
  streamNextRecord?: number;
  /** The reader's token expired: the server ends the connection after this event. */
  tokenExpired?: boolean;
}

export function parseControl(data: string): Control {
  const value = JSON.parse(data) as Partial<Control>;
  if (typeof value.streamNextOffset !== 'string') {
    throw new RillError({ code: 'UNEXPECTED_RESPONSE', message: 'an SSE control event without streamNextOffset' });
  }
  return value as Control;
}

const encoder = new TextEncoder();

function base64Bytes(text: string): Uint8Array {
  const binary = atob(text.replace(/\s+/g, ''));
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

/** Joins the payloads of several data events before one control event. */
function payloadBytes(payloads: string[], base64: boolean, json: boolean): Uint8Array {
  if (base64) {
    const parts = payloads.map(base64Bytes);
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }
  if (json && payloads.length > 1) {
    const inner = payloads.map((p) => p.trim().slice(1, -1).trim()).filter((p) => p.length > 0);
    return encoder.encode(`[${inner.join(',')}]`);
  }
  return encoder.encode(payloads.join('\n'));
}

/** Yields the chunks of a body, failing when none arrives for `idleMs`. */
async function* chunks(body: ReadableStream<Uint8Array>, idleMs: number): AsyncGenerator<Uint8Array> {
  const reader = body.getReader();
  try {
    for (;;) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const idle = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new RillError({ code: 'TIMEOUT', message: `no SSE data or keep-alive for ${idleMs} ms` })), idleMs);
      });
      const result = await Promise.race([reader.read(), idle]).finally(() => clearTimeout(timer));
      if (result.done) return;
      yield result.value;
    }
  } finally {
    reader.cancel().catch(() => undefined);
  }
}

/**
 * Opens SSE connections one after another, each resuming where the last one stopped
 * (`connect` reads the position its items moved), until an item is `final`. A connection
 * the server ends (lifetime, drain) is reopened at once; one that fails, or ends without
 * an event, is reopened with backoff, and a run of such failures is bounded.
 */
export async function* reconnecting<T>(connect: () => AsyncIterable<T>, final: (item: T) => boolean, options: Pick<ReadOptions, 'retry' | 'signal'>): AsyncGenerator<T> {
  const policy = retryPolicy(options.retry);
  let failures = 0;
  for (;;) {
    let progressed = false;
    try {
      for await (const item of connect()) {
        progressed = true;
        failures = 0;
        yield item;
        if (final(item)) return;
      }
      if (!progressed) failures = await afterFailure(quietEnd(), failures, policy, options.signal);
    } catch (error) {
      // The body is read after fetch returned, so its abort surfaces as a plain AbortError.
      if (options.signal?.aborted) throw abortError(options.signal.reason);
      failures = await afterFailure(toRillError(error), progressed ? 0 : failures, policy, options.signal);
    }
  }
}

export async function* sseBatches(stream: StreamHandle, position: ReadPosition, options: ReadOptions): AsyncGenerator<ReadBatch> {
  const json = isJsonContentType(await stream.knownContentType(options.signal));
  for await (const batch of reconnecting(() => sseConnection(stream, position, options, json), (b) => b.closed, options)) {
    if (batch.data.length > 0 || batch.closed || options.heartbeats) yield batch;
  }
}

/** A failure while reading the body (reset, truncated chunk) is a network error: reconnect. */
function toRillError(error: unknown): unknown {
  if (error instanceof RillError || !(error instanceof Error)) return error;
  return new RillError({ code: 'NETWORK_ERROR', message: `the SSE connection failed: ${error.message}`, cause: error });
}

function quietEnd(): RillError {
  return new RillError({ code: 'NETWORK_ERROR', message: 'the SSE connection ended without any event' });
}

/** Opens one SSE read whose start is in `params`; answers the 200 whose body the caller reads. */
export async function openSse(stream: StreamHandle, params: URLSearchParams, signal?: AbortSignal): Promise<Response> {
  params.set('live', 'sse');
  const headers = { ...stream.requestHeaders(), accept: 'text/event-stream' };
  const res = await stream.transport.open(`${stream.url}?${params.toString()}`, { method: 'GET', headers, signal });
  if (res.status !== 200) throw await errorFromResponse(res);
  stream.observe(res.headers);
  return res;
}

/** The events of an SSE body, failing when it shows no sign of life for a while. */
export async function* sseEvents(body: ReadableStream<Uint8Array> | null): AsyncGenerator<SseEvent> {
  if (body === null) return;
  const parser = new SseParser();
  const decoder = new TextDecoder('utf-8');
  for await (const chunk of chunks(body, SSE_IDLE_TIMEOUT_MS)) yield* parser.push(decoder.decode(chunk, { stream: true }));
}

async function* sseConnection(stream: StreamHandle, position: ReadPosition, options: ReadOptions, json: boolean): AsyncGenerator<ReadBatch> {
  const params = new URLSearchParams({ offset: position.offset });
  if (position.cursor !== undefined) params.set('cursor', position.cursor);
  if (options.maxBytes !== undefined) params.set('max_bytes', String(options.maxBytes));
  const res = await openSse(stream, params, options.signal);
  const base64 = res.headers.get(H.streamSseDataEncoding) === 'base64';
  let payloads: string[] = [];
  for await (const event of sseEvents(res.body)) {
    if (event.event === 'data') {
      payloads.push(event.data);
      continue;
    }
    if (event.event !== 'control') continue;
    const control = parseControl(event.data);
    position.cursor = control.streamCursor ?? position.cursor;
    const next = { nextOffset: control.streamNextOffset, upToDate: control.upToDate === true, closed: control.streamClosed === true };
    const data = payloads.length === 0 ? new Uint8Array(0) : payloadBytes(payloads, base64, json);
    payloads = [];
    const batch = makeBatch(data, json, position.offset, next);
    position.offset = batch.nextOffset;
    yield batch;
  }
}
