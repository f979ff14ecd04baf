/**
 * The stream page on a server with a cold tier (issue 38), in Debian's Chromium against the
 * real `rill` binary with `--cold-store` on s3rver (test/helpers/s3.ts): a stream written
 * past its hot window, history moved to objects by the uploader, and the page showing which
 * offsets are in object storage and which are hot, as `{stream}/stats` reports them, with
 * the first messages read back from the objects. Without a cold tier the page shows neither
 * (console.test.ts, the stream's figures).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StreamStats } from '../../src/client/index.js';
import { startTestS3, TEST_BUCKET, type TestS3 } from '../helpers/s3.js';
import { until } from '../helpers/waits.js';
import { consoleHarness } from './harness.js';

/** Small windows and segments, as the cold tier's HTTP tests use, so that 180 KB cross them. */
const SEGMENT_BYTES = 16 * 1024;
const COLD_ARGS = ['--cold-hot-bytes', '32KiB', '--cold-hot-age', '0ms', '--cold-segment-bytes', '16KiB', '--cold-upload-interval', '20ms'];

let s3: TestS3;

// Registered before the harness's hooks: s3rver runs before the server starts, and stops after it.
beforeAll(async () => {
  s3 = await startTestS3();
});

afterAll(async () => {
  await s3?.close();
});

const harness = consoleHarness(() => ({ store: 'sqlite', args: ['--cold-store', `s3://${TEST_BUCKET}/console`, ...COLD_ARGS], env: s3.env }));

describe('web console with a cold tier', () => {
  it("shows which of a stream's offsets are in object storage and which are hot, as the server reports them", async () => {
    const { api } = harness;
    await api.bucket('tier').create();
    const stream = api.stream('tier/history');
    await stream.create({ contentType: 'text/plain' });
    // 12 appends of 15,000 bytes: past the 32 KiB window by far, in rows the uploader can move.
    for (let i = 0; i < 12; i++) await stream.append(`${i === 0 ? 'first line, from object storage\n' : ''}${String(i).padStart(4, '0')}`.padEnd(15_000, '.'), { contentType: 'text/plain' });

    // Until the uploader moved history and has nothing more due: the stream holds segments,
    // then (read after) less than a segment of sealed history awaits upload. With no more
    // writes the boundary then stays where it is.
    const statsOf = () => api.streamStats('tier/history');
    await until(async () => {
      const { cold } = await statsOf();
      const server = (await api.stats()) as unknown as { cold: { uploadLagBytes: number } };
      return cold !== undefined && cold.segments > 0 && server.cold.uploadLagBytes < SEGMENT_BYTES;
    }, 'history moved to object storage, and no upload due');
    const figures: StreamStats = await statsOf();
    const cold = figures.cold!;
    const [start, end, tail] = [Number(cold.start), Number(cold.end), Number(figures.tail)];
    expect(start).toBe(0);
    expect(end).toBeGreaterThan(0);
    expect(end).toBeLessThanOrEqual(tail - 32 * 1024);
    expect(cold.bytes).toBe(end - start);
    expect(cold.objectBytes).toBeGreaterThanOrEqual(cold.bytes);
    expect([...s3.objectFiles().keys()].filter((k) => k.startsWith('console/'))).toHaveLength(cold.segments);

    const { page } = await harness.open('#/s/tier/history');
    const value = (name: string) => page.locator('dl.info div').filter({ has: page.getByRole('term').filter({ hasText: new RegExp(`^${name}$`) }) }).getByRole('definition');
    const segments = `${cold.segments} ${cold.segments === 1 ? 'segment' : 'segments'}`;
    await value('Cold \\(object storage\\)').filter({ hasText: `0 – ${end} (${segments}, ${cold.bytes.toLocaleString('en')} bytes)` }).waitFor();
    expect(await value('Hot').textContent()).toBe(`${end} – ${tail}`);
    // The first page of messages starts at offset 0, in the cold range: read from the objects.
    const first = page.getByRole('list', { name: 'Messages of this page' }).locator('pre.text').first();
    await expect.poll(() => first.textContent()).toMatch(/^first line, from object storage\n0000\.\.\./);
    await harness.screenshot(page, 'stream-cold-tier');
  });
});
