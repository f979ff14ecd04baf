/**
 * SSE readers waiting at the tail of a stream. The server hands a commit to all such
 * readers of a stream in one pass (src/live/hub.ts, Follower): every reader must still
 * get every byte once, in order, with control events that say where it stands, and a
 * keep-alive when, and only when, its connection has been quiet for a heartbeat.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { TestClock } from '../helpers/clock.js';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { post, put, readAll } from '../helpers/http.js';
import { sseBlocks } from '../helpers/sse.js';

const HEARTBEAT_MS = 400;
/** Default settings: a heartbeat (15 s) far longer than any wait these tests allow. */
let server: RunningServer;
/**
 * A short heartbeat, to watch keep-alives, on a clock the tests move (stream expiry), and an
 * SSE lifetime no jump of that clock reaches.
 */
let beating: RunningServer;
const clock = new TestClock();
/** Far past any wait here: a reader still open then is a failure, not a slow machine. */
const LIMIT_MS = 15_000;

beforeAll(async () => {
  [server, beating] = await Promise.all([startServer(), startServer({ clock, args: ['--sse-heartbeat', `${HEARTBEAT_MS}ms`, '--sse-lifetime', '24h'] })]);
});

afterAll(async () => {
  for (const s of [server, beating]) {
    await s?.stop();
    if (s) removeDir(s.dataDir);
  }
});

/** Waits for `what`, failing after LIMIT_MS: a reader left waiting shows as a failure, not a hang. */
async function within<T>(what: string, happening: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not after ${LIMIT_MS} ms`)), LIMIT_MS)));
  try {
    return await Promise.race([happening, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Waits for every reader to be let go. */
const allEnded = (readers: SseReader[]) => within('readers let go', Promise.all(readers.map((r) => r.ended)));

interface SseEvent {
  /** 'keep-alive' for a comment line. */
  type: string;
  data: string;
  atMs: number;
}

interface SseReader {
  events: SseEvent[];
  /** Resolves once the first control event arrived: the reader waits at the tail. */
  ready: Promise<void>;
  /** Resolves when the server ends the response. */
  ended: Promise<void>;
  /** Resolves once `count` events of `type` have arrived (failing after LIMIT_MS). */
  received(type: string, count: number): Promise<void>;
  /** Resolves once the data events, joined, are `data` (failing after LIMIT_MS). */
  receivedData(data: string): Promise<void>;
  stop(): void;
}

/** Parses the SSE body as it arrives: each block is an event, or a comment. */
function openReader(url: string): SseReader {
  const abort = new AbortController();
  const events: SseEvent[] = [];
  const waiting = new Set<() => void>();
  let markReady = () => {};
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  const ended = (async () => {
    const res = await fetch(url, { signal: abort.signal });
    expect(res.status).toBe(200);
    for await (const block of sseBlocks(res)) {
      const event = parseBlock(block);
      events.push(event);
      if (event.type === 'control') markReady();
      for (const look of waiting) look();
    }
  })().catch((error: unknown) => {
    if (!abort.signal.aborted) throw error;
  });
  const until = (what: string, holds: () => boolean) =>
    within(
      what,
      new Promise<void>((resolve) => {
        const look = () => {
          if (!holds()) return;
          waiting.delete(look);
          resolve();
        };
        waiting.add(look);
        look();
      }),
    );
  const reader: SseReader = {
    events,
    ready,
    ended,
    received: (type, count) => until(`${count} ${type} events`, () => events.filter((e) => e.type === type).length >= count),
    receivedData: (data) => until(`data ${JSON.stringify(data)}`, () => dataOf(reader) === data),
    stop: () => abort.abort(),
  };
  return reader;
}

/** The data the reader's data events carried, joined. */
function dataOf(reader: SseReader): string {
  return reader.events
    .filter((e) => e.type === 'data')
    .map((e) => e.data)
    .join('');
}

function parseBlock(block: string): SseEvent {
  const atMs = performance.now();
  if (block.startsWith(':')) return { type: 'keep-alive', data: '', atMs };
  const lines = block.split('\n');
  const type = lines.find((l) => l.startsWith('event:'))?.slice(6).trim() ?? 'message';
  const data = lines
    .filter((l) => l.startsWith('data:'))
    .map((l) => l.slice(5).replace(/^ /, ''))
    .join('\n');
  return { type, data, atMs };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('SSE readers at the tail of one stream', () => {
  test('100 readers each get every append once and in order, through sequential and concurrent appends, and the closure', async () => {
    const url = `${server.url}/v1/stream/tail-fanout-${Date.now()}`;
    expect((await put(url, undefined, { 'content-type': 'text/plain' })).status).toBe(201);
    const readers = Array.from({ length: 100 }, () => openReader(`${url}?offset=now&live=sse`));
    await Promise.all(readers.map((r) => r.ready));

    let n = 0;
    for (let i = 0; i < 20; i++) expect((await post(url, `m${n++};`, { 'content-type': 'text/plain' })).status).toBe(204);
    // Appends that arrive together are committed in one batch, or in batches that follow each other closely.
    for (let round = 0; round < 3; round++) {
      const sent = Array.from({ length: 10 }, () => post(url, `m${n++};`, { 'content-type': 'text/plain' }));
      for (const reply of await Promise.all(sent)) expect(reply.status).toBe(204);
    }
    // The last append closes the stream too: each reader gets its bytes, is told, and is let go.
    expect((await post(url, `m${n++};`, { 'content-type': 'text/plain', 'stream-closed': 'true' })).status).toBe(204);
    await allEnded(readers);

    const stored = await readAll(url);
    expect(stored.body.toString().split(';').length - 1).toBe(n);
    for (const reader of readers) {
      const data = reader.events.filter((e) => e.type === 'data').map((e) => e.data);
      expect(data.join('')).toBe(stored.body.toString());
      const positions = reader.events.filter((e) => e.type === 'control').map((e) => JSON.parse(e.data) as { streamNextOffset: string; streamClosed?: boolean });
      const offsets = positions.map((p) => p.streamNextOffset);
      for (let i = 1; i < offsets.length; i++) expect(offsets[i]! >= offsets[i - 1]!).toBe(true);
      // The first control event stands at the tail; each data event moves the next one on.
      expect(new Set(offsets).size).toBe(data.length + 1);
      expect(positions.at(-1)).toMatchObject({ streamNextOffset: stored.next, streamClosed: true });
    }
  }, 30_000);

  test('a closure that brings no bytes ends every reader at the tail with a control event saying so', async () => {
    const url = `${server.url}/v1/stream/tail-close-${Date.now()}`;
    expect((await put(url, 'first;', { 'content-type': 'text/plain' })).status).toBe(201);
    const readers = Array.from({ length: 20 }, () => openReader(`${url}?offset=now&live=sse`));
    await Promise.all(readers.map((r) => r.ready));
    expect((await post(url, undefined, { 'stream-closed': 'true' })).status).toBe(204);
    await allEnded(readers);
    const tail = (await readAll(url)).next;
    for (const reader of readers) {
      expect(reader.events.filter((e) => e.type === 'data')).toEqual([]);
      const last = reader.events.filter((e) => e.type === 'control').at(-1)!;
      expect(JSON.parse(last.data)).toMatchObject({ streamNextOffset: tail, streamClosed: true });
    }
  }, 30_000);

  test('a reader of a stream that expires stays while it lives and is let go once it has expired', async () => {
    const url = `${beating.url}/v1/stream/tail-expiry-${Date.now()}`;
    expect((await put(url, undefined, { 'content-type': 'text/plain', 'stream-ttl': '60' })).status).toBe(201);
    const reader = openReader(`${url}?offset=now&live=sse`);
    await reader.ready;
    // Alive, the stream keeps its reader through a heartbeat, which looks at the stream.
    await reader.received('keep-alive', 1);
    expect((await fetch(url, { method: 'HEAD' })).status).toBe(200);
    // A minute later by the server's clock, the stream has expired: the next look lets the reader go.
    clock.advance(61_000);
    await allEnded([reader]);
    expect(reader.events.filter((e) => e.type === 'data')).toEqual([]);
    expect((await fetch(url, { method: 'HEAD' })).status).toBe(404);
  }, 30_000);

  test('a reader taking appends gets no keep-alive while they flow, and keep-alives once they stop', async () => {
    const url = `${beating.url}/v1/stream/tail-heartbeat-${Date.now()}`;
    expect((await put(url, undefined, { 'content-type': 'text/plain' })).status).toBe(201);
    const reader = openReader(`${url}?offset=now&live=sse`);
    await reader.ready;
    let sent = '';
    for (let i = 0; i < 24; i++) {
      expect((await post(url, `x${i};`, { 'content-type': 'text/plain' })).status).toBe(204);
      sent += `x${i};`;
      // Appends every eighth of a heartbeat for three heartbeats or more: the pacing is the behaviour under test.
      await sleep(HEARTBEAT_MS / 8);
    }
    // Appends committed while the reader was still sending the one before reach it as one data event: bytes count, not events.
    await reader.receivedData(sent);
    // Quiet from here: a keep-alive comes, and another.
    await reader.received('keep-alive', 2);
    reader.stop();
    expect(keepAlivesBetweenCloseData(reader.events)).toEqual([]);
    expect(dataOf(reader)).toBe(sent);
    expect(reader.events.at(-1)!.type).toBe('keep-alive');
  }, 30_000);
});

/**
 * Keep-alives that came between two data events less than a third of a heartbeat apart, as
 * this process saw them: a connection that quiet for so short must get none. Two data events
 * further apart (a machine that stalled the appends) say nothing either way.
 */
function keepAlivesBetweenCloseData(events: SseEvent[]): SseEvent[] {
  const found: SseEvent[] = [];
  let lastData: SseEvent | undefined;
  let between: SseEvent[] = [];
  for (const event of events) {
    if (event.type === 'keep-alive') between.push(event);
    if (event.type !== 'data') continue;
    if (lastData && event.atMs - lastData.atMs < HEARTBEAT_MS / 3) found.push(...between);
    lastData = event;
    between = [];
  }
  return found;
}
