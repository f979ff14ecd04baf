/**
 * SSE readers waiting at the tail of a stream. The server hands a commit to all such
 * readers of a stream in one pass (src/live/hub.ts, Follower): every reader must still
 * get every byte once, in order, with control events that say where it stands, and a
 * keep-alive when, and only when, its connection has been quiet for a heartbeat.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { post, put, readAll } from '../helpers/http.js';
import { sseBlocks } from '../helpers/sse.js';

const HEARTBEAT_MS = 400;
/** Default settings: a heartbeat (15 s) far longer than any wait these tests allow. */
let server: RunningServer;
/** A short heartbeat, to watch keep-alives. */
let beating: RunningServer;

beforeAll(async () => {
  [server, beating] = await Promise.all([startServer(), startServer({ args: ['--sse-heartbeat', `${HEARTBEAT_MS}ms`] })]);
});

afterAll(async () => {
  for (const s of [server, beating]) {
    await s?.stop();
    if (s) removeDir(s.dataDir);
  }
});

/** Waits for every reader to be let go, failing after `limitMs`: a reader left waiting shows as a failure, not a hang. */
async function endsWithin(ended: Array<Promise<void>>, limitMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`readers still open after ${limitMs} ms`)), limitMs)));
  try {
    await Promise.race([Promise.all(ended), late]);
  } finally {
    clearTimeout(timer);
  }
}

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
  stop(): void;
}

/** Parses the SSE body as it arrives: each block is an event, or a comment. */
function openReader(url: string): SseReader {
  const abort = new AbortController();
  const events: SseEvent[] = [];
  let markReady = () => {};
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  const ended = (async () => {
    const res = await fetch(url, { signal: abort.signal });
    expect(res.status).toBe(200);
    for await (const block of sseBlocks(res)) {
      const event = parseBlock(block);
      events.push(event);
      if (event.type === 'control') markReady();
    }
  })().catch((error: unknown) => {
    if (!abort.signal.aborted) throw error;
  });
  return { events, ready, ended, stop: () => abort.abort() };
}

function parseBlock(block: string): SseEvent {
  const atMs = Date.now();
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
    await endsWithin(readers.map((r) => r.ended), 5_000);

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
    await endsWithin(readers.map((r) => r.ended), 5_000);
    const tail = (await readAll(url)).next;
    for (const reader of readers) {
      expect(reader.events.filter((e) => e.type === 'data')).toEqual([]);
      const last = reader.events.filter((e) => e.type === 'control').at(-1)!;
      expect(JSON.parse(last.data)).toMatchObject({ streamNextOffset: tail, streamClosed: true });
    }
  }, 30_000);

  test('a reader of a stream that expires is let go soon after the expiry', async () => {
    const url = `${beating.url}/v1/stream/tail-expiry-${Date.now()}`;
    expect((await put(url, undefined, { 'content-type': 'text/plain', 'stream-ttl': '1' })).status).toBe(201);
    const reader = openReader(`${url}?offset=now&live=sse`);
    await reader.ready;
    const openedAtMs = Date.now();
    // One second of TTL from the read that opened it, then the expiry's own commit wakes the reader.
    await endsWithin([reader.ended], 1_000 + HEARTBEAT_MS + 1_500);
    expect(Date.now() - openedAtMs).toBeGreaterThanOrEqual(900);
    expect((await fetch(url, { method: 'HEAD' })).status).toBe(404);
  }, 30_000);

  test('a reader taking appends gets no keep-alive while they flow, and one within a heartbeat of the last', async () => {
    const url = `${beating.url}/v1/stream/tail-heartbeat-${Date.now()}`;
    expect((await put(url, undefined, { 'content-type': 'text/plain' })).status).toBe(201);
    const reader = openReader(`${url}?offset=now&live=sse`);
    await reader.ready;
    // Appends every quarter heartbeat for four heartbeats: the connection is never quiet.
    for (let i = 0; i < 16; i++) {
      expect((await post(url, `x${i};`, { 'content-type': 'text/plain' })).status).toBe(204);
      await sleep(HEARTBEAT_MS / 4);
    }
    const lastData = reader.events.filter((e) => e.type === 'data').at(-1)!;
    expect(reader.events.filter((e) => e.type === 'keep-alive')).toEqual([]);
    await sleep(HEARTBEAT_MS * 3);
    reader.stop();
    const keepAlives = reader.events.filter((e) => e.type === 'keep-alive');
    expect(keepAlives.length).toBeGreaterThanOrEqual(2);
    // A heartbeat after the last data, give or take a timer's lateness on a busy machine.
    expect(keepAlives[0]!.atMs - lastData.atMs).toBeGreaterThanOrEqual(HEARTBEAT_MS - 50);
    expect(keepAlives[0]!.atMs - lastData.atMs).toBeLessThan(HEARTBEAT_MS + 300);
    expect(reader.events.filter((e) => e.type === 'data')).toHaveLength(16);
  }, 30_000);
});
