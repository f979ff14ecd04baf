/**
 * SSE text as an EventSource-conforming reader sees it: the server must write data
 * lines so that the reader's rules (drop one space after "data:", join lines with LF)
 * give back the stream's text.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { put } from '../helpers/http.js';
import { sseBlocks } from '../helpers/sse.js';

let server: RunningServer;

beforeAll(async () => {
  server = await startServer();
});

afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

/** The data of the first `data` event, parsed as the SSE standard says. */
async function firstDataEvent(url: string): Promise<string> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 3000);
  try {
    const res = await fetch(url, { signal: abort.signal });
    for await (const block of sseBlocks(res)) {
      if (!block.startsWith('event: data')) continue;
      return block
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).replace(/^ /, ''))
        .join('\n');
    }
    throw new Error('no data event');
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
}

describe('SSE text framing', () => {
  test('leading and trailing spaces of every line survive a standard reader', async () => {
    const url = `${server.url}/v1/stream/sse-spaces-${Date.now()}`;
    const text = ' two spaces  \n  indented\nplain\n\n end ';
    expect((await put(url, text, { 'content-type': 'text/plain' })).status).toBe(201);
    expect(await firstDataEvent(`${url}?offset=-1&live=sse`)).toBe(text);
  });
});
