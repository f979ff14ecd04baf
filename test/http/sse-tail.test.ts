/**
 * SSE readers waiting at the tail of a stream: every reader is told where it stands,
 * the end of the stream included.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { removeDir, startServer, type ServerProcess } from '../helpers/server.js';
import { post, put, readAll } from '../helpers/http.js';

/** Default settings: a heartbeat (15 s) far longer than any wait these tests allow. */
let server: ServerProcess;

beforeAll(async () => {
  server = await startServer();
});

afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
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
    const decoder = new TextDecoder();
    let text = '';
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      text += decoder.decode(chunk, { stream: true });
      const blocks = text.split('\n\n');
      text = blocks.pop()!;
      for (const block of blocks) events.push(parseBlock(block));
      if (events.some((e) => e.type === 'control')) markReady();
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

describe('SSE readers at the tail of one stream', () => {
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
});
