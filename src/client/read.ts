/**
 * Reading a stream as an async iterable of batches, in three modes:
 *   - catch-up (`live: false`): read until up to date, then end;
 *   - long-poll: catch up, then hold requests open until new data arrives;
 *   - SSE: one Server-Sent Events connection, reopened where it stopped.
 * Every mode resumes from the `Stream-Next-Offset` of the last answer, ends at
 * `Stream-Closed`, and retries transport failures with backoff (bounded).
 */
import { isJsonContentType } from '../protocol/content-type.js';
import { H } from '../protocol/headers.js';
import { backoffDelayMs, retryPolicy, sleep, type RetryPolicy } from './backoff.js';
import { errorFromResponse, RillError } from './errors.js';
import type { BufferedResponse } from './http.js';
import { byteMessages, jsonMessages, type Message } from './frames.js';
import { encodeOffset, START } from './offsets.js';
import { sseBatches } from './sse.js';
import type { StreamHandle } from './stream.js';

export type LiveMode = false | 'long-poll' | 'sse';

export interface ReadOptions {
  /** Where to start: an offset from an earlier read, `-1` (the start, default) or `now`. */
  offset?: string;
  /** How to continue once up to date (default false: stop). */
  live?: LiveMode;
  /** Upper bound on one answer's size. */
  maxBytes?: number;
  /** `leader`: read the newest committed state (catch-up reads only). */
  consistency?: 'leader';
  /** Long-poll: how long the server holds a request open without data. Default 20 s. */
  longPollTimeoutMs?: number;
  /** Yield empty batches when a wait ends without data (for time-based work). */
  heartbeats?: boolean;
  signal?: AbortSignal;
  /** Retries of transport failures and 5xx answers, counted consecutively. */
  retry?: Partial<RetryPolicy>;
}

export interface ReadBatch {
  /** Where this batch starts. */
  offset: string;
  /** Where the next read continues; a resume point. */
  nextOffset: string;
  /** The batch reaches the tail as it was when the server answered. */
  upToDate: boolean;
  /** The stream is closed and this batch reaches its end: nothing will follow. */
  closed: boolean;
  /** Raw bytes of the batch (JSON streams: the messages as one JSON array). */
  data: Uint8Array;
  /** The batch as messages: one per JSON value, or the bytes as one message. */
  messages: Message[];
}

export const DEFAULT_LONG_POLL_TIMEOUT_MS = 20_000;

/** Mutable position of a read, shared by the modes. */
export interface ReadPosition {
  offset: string;
  cursor: string | undefined;
}

/** The concrete offset a batch starts at, for computing message offsets. */
function startOf(offset: string): string {
  return offset === START ? encodeOffset(0) : offset;
}

export function makeBatch(
  data: Uint8Array,
  json: boolean,
  offset: string,
  next: { nextOffset: string; upToDate: boolean; closed: boolean },
): ReadBatch {
  const start = startOf(offset) === 'now' ? next.nextOffset : startOf(offset);
  const messages = json ? jsonMessages(data, start, next.nextOffset) : byteMessages(data, start, next.nextOffset);
  return { offset: start, ...next, data, messages };
}

export async function* readBatches(stream: StreamHandle, options: ReadOptions): AsyncGenerator<ReadBatch> {
  if (options.live === 'sse') {
    yield* sseBatches(stream, { offset: options.offset ?? START, cursor: undefined }, options);
    return;
  }
  const position: ReadPosition = { offset: options.offset ?? START, cursor: undefined };
  const fetchOne = async (live: boolean) => {
    const batch = await fetchBatch(stream, position, options, live);
    position.offset = batch.nextOffset;
    return batch;
  };
  yield* pollingReads(fetchOne, options, (batch) => batch.data.length > 0);
}

/** What the catch-up and long-poll loop needs of an answer. */
export interface PolledAnswer {
  upToDate: boolean;
  closed: boolean;
}

/**
 * Catch-up, then (with `live: 'long-poll'`) long-polls: `fetchOne(live)` sends one read
 * from where the last one ended. Yields the answers that hold data (`hasData`), the last
 * one, and with `heartbeats` the empty ones; retries transport failures with backoff.
 */
export async function* pollingReads<B extends PolledAnswer>(fetchOne: (live: boolean) => Promise<B>, options: Pick<ReadOptions, 'live' | 'heartbeats' | 'retry' | 'signal'>, hasData: (answer: B) => boolean): AsyncGenerator<B> {
  const policy = retryPolicy(options.retry);
  let caughtUp = false;
  let failures = 0;
  for (;;) {
    let answer: B;
    try {
      answer = await fetchOne(caughtUp && options.live === 'long-poll');
      failures = 0;
    } catch (error) {
      failures = await afterFailure(error, failures, policy, options.signal);
      continue;
    }
    if (hasData(answer) || answer.closed || options.heartbeats) yield answer;
    if (answer.closed) return;
    if (answer.upToDate) {
      if (!options.live) return;
      caughtUp = true;
    }
  }
}

/** Waits before a retry, or rethrows when the failure is final. Answers the new failure count. */
export async function afterFailure(error: unknown, failures: number, policy: RetryPolicy, signal?: AbortSignal): Promise<number> {
  const count = failures + 1;
  if (!(error instanceof RillError) || !error.retryable || count >= policy.maxAttempts) throw error;
  await sleep(backoffDelayMs(count, policy, error.fields.retryAfterSeconds), signal);
  return count;
}

/** The options of one catch-up or long-poll request. */
type RequestReadOptions = Pick<ReadOptions, 'maxBytes' | 'longPollTimeoutMs' | 'consistency' | 'signal'>;

/**
 * Sends one read whose start is in `params` (an offset, or record parameters), adding the
 * size bound and, for a long-poll, its wait and cursor; answers a 200 or a 204.
 */
export async function sendRead(stream: StreamHandle, params: URLSearchParams, cursor: string | undefined, options: RequestReadOptions, live: boolean): Promise<BufferedResponse> {
  if (options.maxBytes !== undefined) params.set('max_bytes', String(options.maxBytes));
  const waitMs = options.longPollTimeoutMs ?? DEFAULT_LONG_POLL_TIMEOUT_MS;
  if (live) {
    params.set('live', 'long-poll');
    params.set('timeout_ms', String(waitMs));
    if (cursor !== undefined) params.set('cursor', cursor);
  } else if (options.consistency !== undefined) {
    params.set('consistency', options.consistency);
  }
  // A held long-poll may take its whole wait before answering.
  const timeoutMs = live ? stream.transport.timeoutMs + waitMs : undefined;
  const res = await stream.transport.request(`${stream.url}?${params.toString()}`, { method: 'GET', headers: stream.requestHeaders(), signal: options.signal, timeoutMs });
  if (res.status !== 200 && res.status !== 204) throw await errorFromResponse(res.response);
  stream.observe(res.headers);
  return res;
}

async function fetchBatch(stream: StreamHandle, position: ReadPosition, options: ReadOptions, live: boolean): Promise<ReadBatch> {
  const res = await sendRead(stream, new URLSearchParams({ offset: position.offset }), position.cursor, options, live);
  const nextOffset = res.headers.get(H.streamNextOffset);
  if (nextOffset === null) throw new RillError({ code: 'UNEXPECTED_RESPONSE', message: 'a read answer without Stream-Next-Offset', status: res.status });
  position.cursor = res.headers.get(H.streamCursor) ?? position.cursor;
  const next = {
    nextOffset,
    upToDate: res.status === 204 || res.headers.get(H.streamUpToDate) === 'true',
    closed: res.headers.get(H.streamClosed) === 'true',
  };
  if (res.status === 204) return makeBatch(new Uint8Array(0), false, position.offset, next);
  const contentType = res.headers.get('content-type');
  if (contentType !== null) stream.contentType = contentType;
  return makeBatch(res.body, contentType !== null && isJsonContentType(contentType), position.offset, next);
}

export async function* readMessages<T>(stream: StreamHandle, options: ReadOptions): AsyncGenerator<Message<T>> {
  for await (const batch of readBatches(stream, { ...options, heartbeats: false })) {
    for (const message of batch.messages) yield message as Message<T>;
  }
}
