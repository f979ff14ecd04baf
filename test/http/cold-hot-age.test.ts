/**
 * The cold tier's hot window by age, end to end (issue 38): a real server, over HTTP, with
 * `--cold-store` on s3rver (test/helpers/s3.ts) and `--cold-hot-age 10m`, judging time by
 * a clock the test moves (test/helpers/clock.ts), so that no test waits for ten minutes
 * and none depends on how fast the machine is. Bytes younger than the age stay hot even
 * far past the byte window; once older than it they move, while younger ones written
 * after them stay; and every byte reads back across the boundary. The age rules
 * themselves are unit-tested in test/core/cold-tier.test.ts.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { extensionUrl } from '../../src/protocol/extensions.js';
import { encodeOffset } from '../../src/protocol/offset.js';
import { TestClock } from '../helpers/clock.js';
import { startTestS3, TEST_BUCKET, type TestS3 } from '../helpers/s3.js';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { until } from '../helpers/waits.js';
import { call } from './client.js';

const MINUTE_MS = 60_000;
const HOT_BYTES = 32 * 1024;
const COLD_ARGS = ['--cold-hot-bytes', '32KiB', '--cold-hot-age', '10m', '--cold-segment-bytes', '16KiB', '--cold-upload-interval', '20ms'];
/**
 * Sealed bytes that may stay hot below a seal limit once uploads caught up: a row the
 * limit or the engine's movable end cuts (at most 64 KiB, sqlite/chunk-rows.ts) and a
 * segment not yet full (16 KiB), as in cold-tier.test.ts.
 */
const CUT_BYTES = 64 * 1024 + 16 * 1024;
const APPEND_BYTES = 15_000;
const TEXT = { 'content-type': 'text/plain' };

let s3: TestS3;
let server: RunningServer | undefined;

beforeAll(async () => {
  s3 = await startTestS3();
});

afterEach(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
  server = undefined;
});

afterAll(async () => {
  await s3?.close();
});

interface ServerCold {
  coldBytes: number;
  hotBytes: number;
  uploads: number;
  uploadLagBytes: number;
}

interface StreamCold {
  start: string;
  end: string;
  segments: number;
}

async function serverCold(url: string): Promise<ServerCold> {
  return ((await call(url, 'GET', '/stats')).json() as { cold: ServerCold }).cold;
}

/** The stream's `cold` in its stats (`?ext=stats` on a /v1/stream stream). */
async function streamCold(url: string, path: string): Promise<StreamCold> {
  const stats = new URL(extensionUrl(`${url}${path}`, 'stats'));
  return ((await call(url, 'GET', stats.pathname + stats.search)).json() as { cold: StreamCold }).cold;
}

/** `count` appends of 15,000 bytes, each naming its number: what was written. */
async function appendSome(url: string, path: string, from: number, count: number): Promise<string[]> {
  const written: string[] = [];
  for (let n = from; n < from + count; n++) {
    const body = `append ${n}\n`.padEnd(APPEND_BYTES, '.');
    const reply = await call(url, 'POST', path, { headers: TEXT, body });
    expect(reply.status, reply.text()).toBe(204);
    written.push(body);
  }
  return written;
}

/** The whole stream, read from offset 0 in catch-up pages. */
async function readAll(url: string, path: string): Promise<string> {
  let text = '';
  for (let at = encodeOffset(0); ; ) {
    const reply = await call(url, 'GET', `${path}?offset=${at}`);
    expect(reply.status, reply.text()).toBe(200);
    text += reply.text();
    at = reply.headers['stream-next-offset']!;
    if (reply.headers['stream-up-to-date'] === 'true') return text;
  }
}

describe('cold tier: the hot window by age', () => {
  it('keeps bytes younger than --cold-hot-age hot past the byte window, moves them once older, and keeps the younger ones after them hot', async () => {
    const clock = new TestClock();
    server = await startServer({ store: 'sqlite', clock, args: ['--cold-store', `s3://${TEST_BUCKET}/age`, ...COLD_ARGS], env: s3.env });
    const { url } = server;
    const path = '/v1/stream/cold-age';
    expect((await call(url, 'PUT', path, { headers: TEXT })).status).toBe(201);

    // 105,000 bytes at minute 0: more than three times the 32 KiB window, all young.
    const first = await appendSome(url, path, 0, 7);
    const firstEnd = first.length * APPEND_BYTES;
    // A pass of the uploader counted the whole stream (its hot bytes are the whole stream).
    await until(async () => (await serverCold(url)).hotBytes === firstEnd, 'a pass of the uploader saw the first appends');

    // Minute 6: more bytes. Once a later pass has counted them, the first pass (which saw
    // only young bytes past the window) has ended with nothing moved, and so has this one.
    clock.advance(6 * MINUTE_MS);
    const second = await appendSome(url, path, first.length, 10);
    const tail = firstEnd + second.length * APPEND_BYTES;
    await until(async () => (await serverCold(url)).hotBytes === tail, 'a pass of the uploader saw the second appends');
    expect(await serverCold(url)).toMatchObject({ uploads: 0, coldBytes: 0, uploadLagBytes: 0 });
    expect(await streamCold(url, path)).toEqual({ start: encodeOffset(0), end: encodeOffset(0), segments: 0, bytes: 0, objectBytes: 0 });
    expect([...s3.objectFiles().keys()].filter((k) => k.startsWith('age/'))).toEqual([]);

    // Minute 11: the first appends are older than 10 minutes and move (all but what a cut
    // row and a segment not yet full keep); the second, 6 minutes younger and 150,000
    // bytes past the window, stay hot.
    clock.advance(5 * MINUTE_MS);
    await until(async () => Number((await streamCold(url, path)).end) >= firstEnd - CUT_BYTES, 'the first appends moved to object storage');
    const afterFirst = await streamCold(url, path);
    expect(Number(afterFirst.end)).toBeLessThanOrEqual(firstEnd);
    expect(afterFirst.segments).toBeGreaterThan(0);
    expect(tail - Number(afterFirst.end)).toBeGreaterThan(HOT_BYTES);

    // Minute 21: everything is older than the age; only the byte window keeps bytes hot.
    clock.advance(10 * MINUTE_MS);
    await until(async () => Number((await streamCold(url, path)).end) > firstEnd, 'the second appends moved to object storage');
    expect(Number((await streamCold(url, path)).end)).toBeLessThanOrEqual(tail - HOT_BYTES);

    // Every byte reads back, from the objects and then the hot store.
    expect(await readAll(url, path)).toBe([...first, ...second].join(''));
  });
});
