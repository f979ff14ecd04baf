/**
 * Server-Sent Events. Every `data` event is followed by a `control` event carrying the
 * position after it; text streams are sent as text (one `data:` line per line, so no
 * payload can forge an event), JSON streams as one JSON array per event, and every
 * other type base64-encoded. The connection ends when the stream ends, after its
 * lifetime, when the server drains, or when the reader stops taking its output (the
 * server never buffers more than about `maxBufferedBytes` for one reader).
 */
import type { ServerResponse } from 'node:http';
import { nextCursor } from '../core/cursor.js';
import { endsStream, planLiveResume, type ReadPlan } from '../core/read.js';
import type { StreamState } from '../core/types.js';
import { isJsonContentType, isTextualContentType } from '../protocol/content-type.js';
import { H } from '../protocol/headers.js';
import { ndjsonToArray } from '../protocol/json.js';
import { countRecords } from '../core/records.js';
import { ENVELOPE_ITEM_CONTENT_TYPE, envelopeLines } from './records.js';
import { encodeOffset } from '../protocol/offset.js';
import { storageRefusal } from '../storage/errors.js';
import type { Store } from '../storage/store.js';
import { hangupOf, type Latch } from './latch.js';
import type { Follower, LiveHub } from './hub.js';
import { eventWithControl, type SharedEvent } from './shared.js';
import { readWindow } from './window.js';

export interface SseOptions {
  store: Store;
  hub: LiveHub;
  key: string;
  stream: StreamState;
  position: number;
  clientCursor: string | null;
  maxBytes: number;
  lifetimeMs: number;
  heartbeatMs: number;
  maxBufferedBytes: number;
  now: () => number;
  /** When the reader's token expires (ms): the connection ends then, saying so. Null: never. */
  tokenExpiresAtMs: number | null;
  /** Headers every response carries (security, CORS), and those of this answer (Stream-Extensions, Stream-Record-*). */
  baseHeaders: Record<string, string>;
  /**
   * A record-aware reader (core/records.ts): the ordinal of the record at `position`, and
   * whether it reads the envelope view (one record per data event). Its control events
   * say where it stands in records too. Null for an offset reader.
   */
  records: { first: number; envelope: boolean } | null;
  /** Told the stream bytes of each data event written to this reader (the usage record); a shared event counts for each reader. */
  served?: (bytes: number) => void;
}

type Encoding = 'text' | 'json' | 'base64' | 'envelope';

function encodingOf(stream: StreamState, options: SseOptions): Encoding {
  if (options.records?.envelope) return 'envelope';
  if (isJsonContentType(stream.config.contentType)) return 'json';
  return isTextualContentType(stream.config.contentType) ? 'text' : 'base64';
}

/**
 * An SSE reader drops one space after `data:`, so a line that starts with a space gets
 * one extra; other lines are written without it.
 */
function dataLine(line: string): string {
  return line.startsWith(' ') ? `data: ${line}\n` : `data:${line}\n`;
}

/** The data event(s) of `data`; `record` is the ordinal of its first message (JSON streams). */
function dataEvent(data: Buffer, encoding: Encoding, record: number): string {
  if (encoding === 'envelope') return envelopeLines(data, record).map((line) => `event: data\ndata:${line.toString('utf8')}\n\n`).join('');
  if (encoding === 'base64') return `event: data\ndata:${data.toString('base64')}\n\n`;
  if (encoding === 'json') return `event: data\ndata:${ndjsonToArray(data).toString('utf8')}\n\n`;
  const lines = data.toString('utf8').split(/\r\n|\r|\n/);
  return `event: data\n${lines.map(dataLine).join('')}\n`;
}

interface ControlState {
  position: number;
  stream: StreamState;
  cursor: string;
  /** A record-aware reader's ordinal at `position`; null for an offset reader. */
  record: number | null;
}

function controlEvent({ position, stream, cursor, record }: ControlState): string {
  const ended = endsStream(stream, position);
  const control: Record<string, unknown> = { streamNextOffset: encodeOffset(position) };
  if (record !== null) {
    control.streamFirstRecord = stream.recordFirst;
    control.streamNextRecord = record;
  }
  if (!ended) control.streamCursor = cursor;
  if (position >= stream.tail) control.upToDate = true;
  if (ended) control.streamClosed = true;
  return `event: control\ndata:${JSON.stringify(control)}\n\n`;
}

function tokenExpired(options: SseOptions): boolean {
  return options.tokenExpiresAtMs !== null && options.now() >= options.tokenExpiresAtMs;
}

/** The last event for a reader whose token expired: where to resume, with a fresh token. */
function tokenExpiredEvent(position: number): string {
  return `event: control\ndata:${JSON.stringify({ streamNextOffset: encodeOffset(position), tokenExpired: true })}\n\n`;
}

export async function serveSse(res: ServerResponse, options: SseOptions): Promise<void> {
  const { hub, stream: first } = options;
  const encoding = encodingOf(first, options);
  res.writeHead(200, {
    ...options.baseHeaders,
    ...(encoding === 'envelope' ? { [H.streamDataContentType]: ENVELOPE_ITEM_CONTENT_TYPE } : {}),
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
    [H.streamIncarnation]: first.incarnation,
    ...(encoding === 'base64' ? { [H.streamSseDataEncoding]: 'base64' } : {}),
  });
  res.flushHeaders();
  const hangup = hangupOf(res);
  try {
    await pump(res, options, encoding, hangup);
  } catch (error) {
    // Storage failed mid-stream (a database down): every event sent is whole and followed
    // by its control event, so the response ends cleanly, keeping the connection for the
    // reader's next request, which resumes from the last control event (and meets the 503
    // itself while the storage is down). Anything else is a fault: the caller answers it.
    if (storageRefusal(error) === null) throw error;
  } finally {
    hub.release();
    finish(res, options.heartbeatMs);
  }
}

/**
 * Ends the response. A reader that does not take the rest within `graceMs` is cut, so
 * that a stuck reader holds neither its buffer nor the connection (nor a shutdown).
 */
function finish(res: ServerResponse, graceMs: number): void {
  if (res.destroyed || res.writableEnded) return;
  res.end();
  if (res.writableFinished) return;
  const timer = setTimeout(() => res.destroy(), graceMs);
  timer.unref();
  res.once('close', () => clearTimeout(timer));
}

/** Reads and renders the next event; readers at the same place of the same state share it. */
function nextEvent(options: SseOptions, encoding: Encoding, state: ControlState, windowBytes: number): Promise<SharedEvent> {
  return options.hub.shared.get(options.key, state.stream, state.position, `${windowBytes}:${encoding}`, async () => {
    const window = await readWindow(options.store, state.stream, state.position, windowBytes, encoding === 'text');
    // Counted for every JSON event: readers of both kinds may share it.
    const records = encoding === 'json' || encoding === 'envelope' ? countRecords(window.data) : 0;
    return { event: Buffer.from(dataEvent(window.data, encoding, state.record ?? 0)), bytes: window.data.length, next: window.next, records };
  });
}

interface PumpState extends ControlState {
  /** When the reader last got bytes: a heartbeat is due after a quiet interval. */
  lastWriteMs: number;
}

async function pump(res: ServerResponse, options: SseOptions, encoding: Encoding, hangup: Latch): Promise<void> {
  const { store, hub, key, now } = options;
  const state: PumpState = {
    position: options.position,
    stream: options.stream,
    cursor: nextCursor(now(), options.clientCursor, Math.random()),
    lastWriteMs: now(),
    record: options.records?.first ?? null,
  };
  const endAt = Math.min(now() + options.lifetimeMs, options.tokenExpiresAtMs ?? Infinity);
  // One event holds at most the buffer bound (a single larger JSON message excepted), so
  // unsent output stays under the bound plus the socket's high-water mark.
  const windowBytes = Math.min(options.maxBytes, options.maxBufferedBytes);
  const follower = tailFollower(res, options, encoding, state, { endAt, windowBytes });
  let announced = false;
  for (;;) {
    while (state.position < state.stream.tail) {
      if (tokenExpired(options)) return void res.write(tokenExpiredEvent(state.position));
      // Most of the time the reader keeps up: no wait, and no promise made per event.
      if ((res.writableNeedDrain || hangup.fired) && !(await caughtUp(res, options, hangup, endAt))) return void res.destroy();
      const shared = await nextEvent(options, encoding, state, windowBytes);
      // No bytes below the tail means the stream was dropped under this reader: stop rather than spin.
      if (shared.bytes === 0) return;
      writeEvent(res, options, state, shared, now());
      announced = true;
    }
    if (endsStream(state.stream, state.position)) {
      if (!announced) res.write(controlEvent(state));
      return;
    }
    if (!announced) {
      res.write(controlEvent(state));
      announced = true;
    }
    if (tokenExpired(options)) return void res.write(tokenExpiredEvent(state.position));
    const remaining = endAt - now();
    if (remaining <= 0 || hangup.fired || hub.isDraining) return;
    const quietMs = now() - state.lastWriteMs;
    const woke = await hub.wait(key, Math.min(remaining, options.heartbeatMs - quietMs), hangup, follower);
    if (woke === 'aborted') return;
    // The follower may have taken commits meanwhile: a heartbeat is due only after a quiet interval.
    if (woke === 'timeout' && now() - state.lastWriteMs >= options.heartbeatMs) {
      // Output still unsent after a whole quiet interval: the reader has stopped reading.
      if (res.writableLength > 0) return void res.destroy();
      if (now() < endAt) {
        res.write(': keep-alive\n\n');
        state.lastWriteMs = now();
      }
    }
    // Also after a timeout: a commit the hub was handing over as this wait ended is not
    // handed to the next wait, so the reader looks at the stream itself (an expired one
    // ends the connection). Bound to the incarnation the response headers named: a
    // deleted or recreated stream ends the connection too.
    const plan = resumePlan(options, state, await store.getStream(key));
    if (!plan.ok) return;
    // A closure that brought no bytes still owes the reader a control event saying so.
    if (plan.stream.closed && !state.stream.closed) announced = false;
    state.stream = plan.stream;
  }
}

/**
 * The data event and this reader's control event leave in one write. The control event
 * depends on the shared state, the position (both fixed by the shared entry), closure
 * and the cursor: readers alike in those share one buffer.
 */
function writeEvent(res: ServerResponse, options: SseOptions, state: PumpState, shared: SharedEvent, nowMs: number): void {
  options.served?.(shared.bytes);
  state.position = shared.next;
  if (state.record !== null) state.record += shared.records;
  const variant = `${state.cursor}:${state.stream.closed}`;
  res.write(eventWithControl(shared, variant, () => controlEvent(state)));
  state.lastWriteMs = nowMs;
}

/** Where the reader resumes in `stream`, bound to the incarnation its response headers named. */
function resumePlan(options: SseOptions, state: PumpState, stream: StreamState | undefined): ReadPlan {
  return planLiveResume(stream, state.position, 'sse', options.stream.incarnation, options.now());
}

/**
 * What a commit brought the followers of one key: the stream they resume in and its next
 * event, or no event when it brought them nothing (a commit they had read on their own
 * already, another node's commit seen twice, the periodic check of remote.ts).
 */
interface TailChange {
  stream: StreamState;
  shared: SharedEvent | null;
}

/**
 * How a reader waiting at the tail takes a commit without waking (see Follower): only
 * the plain cases of new bytes for a reader that keeps up, or of nothing new for it;
 * anything else (the stream gone, recreated or ended, a full buffer, the lifetime over)
 * wakes the reader's loop. Waking a thousand readers of a stream for nothing new cost as
 * many reads of it, on PostgreSQL as many queries (issue 41). The key holds all a resume
 * plan depends on besides the stream (incarnation, position) and the event's rendering,
 * so the plan `prepare` makes holds for every follower of it.
 */
function tailFollower(res: ServerResponse, options: SseOptions, encoding: Encoding, state: PumpState, limits: { endAt: number; windowBytes: number }): Follower<TailChange | null> {
  return {
    key: () => `${options.stream.incarnation}:${state.position}:${limits.windowBytes}:${encoding}`,
    prepare: async (stream) => {
      const plan = resumePlan(options, state, stream);
      if (!plan.ok) return null;
      // A waiting reader's stream is open (an ended one ends the response): a closure owes it a control event.
      if (plan.stream.tail <= state.position) return plan.stream.closed ? null : { stream: plan.stream, shared: null };
      return { stream: plan.stream, shared: await nextEvent(options, encoding, { ...state, stream: plan.stream }, limits.windowBytes) };
    },
    take: (change) => {
      const nowMs = options.now();
      if (change === null || change.shared?.bytes === 0 || res.writableNeedDrain || res.destroyed || nowMs >= limits.endAt) return false;
      // Nothing new leaves the reader's state as it was: the change's may be older than it.
      if (change.shared) {
        state.stream = change.stream;
        writeEvent(res, options, state, change.shared, nowMs);
      }
      return state.position >= change.stream.tail && !endsStream(change.stream, state.position);
    },
  };
}

/**
 * Before more data is read for a reader whose buffer is over the socket's high-water
 * mark (or that left): waits until it has taken it. False when it took nothing for a
 * heartbeat interval, its lifetime ended, the server is draining or the reader left;
 * the server then stops buffering for it and disconnects it.
 */
async function caughtUp(res: ServerResponse, options: SseOptions, hangup: Latch, endAt: number): Promise<boolean> {
  if (hangup.fired) return false;
  const waitMs = Math.min(options.heartbeatMs, endAt - options.now());
  return waitMs > 0 && (await drained(res, hangup, options.hub, waitMs));
}

function drained(res: ServerResponse, hangup: Latch, hub: LiveHub, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    let stopWatchingDrain = () => {};
    let stopWatchingHangup = () => {};
    const done = (value: boolean) => {
      clearTimeout(timer);
      res.off('drain', onDrain);
      stopWatchingHangup();
      stopWatchingDrain();
      resolve(value);
    };
    const onDrain = () => done(true);
    const onGiveUp = () => done(false);
    const timer = setTimeout(onGiveUp, timeoutMs);
    res.once('drain', onDrain);
    stopWatchingHangup = hangup.watch(onGiveUp);
    stopWatchingDrain = hub.onDrain(onGiveUp);
  });
}
