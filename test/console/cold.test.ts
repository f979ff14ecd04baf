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
const COLD_ARGS = ['--cold-hot-bytes', '32KiB', '--cold-hot-age', '0ms', '--cold-segment-bytes', '16KiB', '--cold-upload-interval', '20ms'];

let s3: TestS3;

// Registered before the harness's hooks: s3rver runs before the server starts, and stops after it.
beforeAll(async () => {
  s3 = await startTestS3();
});

afterAll(async () => {
  await s3?.close();
});

/**
 * The test writes, waits for uploads and loads a page that reads history from objects: a few
 * seconds alone, some 15 beside the other console files' browsers; generous, so that only a
 * bug reaches it.
 */
const TEST_TIMEOUT_MS = 90_000;
const WAIT_MS = 30_000;

const harness = consoleHarness(() => ({ store: 'sqlite', args: ['--cold-store', `s3://${TEST_BUCKET}/console`, ...COLD_ARGS], env: s3.env }));

describe('web console with a cold tier', () => {
  it("shows which of a stream's offsets are in object storage and which are hot, as the server reports them", async () => {
    const { api } = harness;
    await api.bucket('tier').create();
    const stream = api.stream('tier/history');
    await stream.create({ contentType: 'text/plain' });
    // 12 appends of 15,000 bytes: past the 32 KiB window by far, in rows the uploader can move.
    for (let i = 0; i < 12; i++) await stream.append(`${i === 0 ? 'first line, from object storage\n' : ''}${String(i).padStart(4, '0')}`.padEnd(15_000, '.'), { contentType: 'text/plain' });

    // Until the uploader moved some history to objects.
    const statsOf = () => api.streamStats('tier/history');
    await until(async () => ((await statsOf()).cold?.segments ?? 0) > 0, 'history moved to object storage');
    const tail = 12 * 15_000;

    const { page } = await harness.open('#/s/tier/history');
    const value = (name: string) => page.locator('dl.info div').filter({ has: page.getByRole('term').filter({ hasText: new RegExp(`^${name}$`) }) }).getByRole('definition');
    const shown = async () => [await value('Cold \\(object storage\\)').textContent(), await value('Hot').textContent()];
    const expected = (figures: StreamStats) => {
      const { start, end, segments, bytes } = figures.cold!;
      return [`${Number(start)} – ${Number(end)} (${segments} ${segments === 1 ? 'segment' : 'segments'}, ${bytes.toLocaleString('en')} bytes)`, `${Number(end)} – ${Number(figures.tail)}`];
    };
    // Uploads may still move the boundary after the page read it (the uploader's passes
    // continue): Refresh until the page shows what the server reports.
    let figures: StreamStats | undefined;
    await value('Hot').waitFor({ timeout: WAIT_MS });
    await expect
      .poll(
        async () => {
          figures = await statsOf();
          if (JSON.stringify(await shown()) === JSON.stringify(expected(figures))) return true;
          await page.getByRole('button', { name: 'Refresh' }).click();
          return false;
        },
        { timeout: WAIT_MS },
      )
      .toBe(true);
    const cold = figures!.cold!;
    expect(Number(figures!.tail)).toBe(tail);
    expect(Number(cold.start)).toBe(0);
    expect(Number(cold.end)).toBeGreaterThan(0);
    expect(Number(cold.end)).toBeLessThanOrEqual(tail - 32 * 1024);
    expect(cold.bytes).toBe(Number(cold.end));
    expect(cold.objectBytes).toBeGreaterThanOrEqual(cold.bytes);
    // The first page of messages starts at offset 0, in the cold range: read from the objects.
    const first = page.getByRole('list', { name: 'Messages of this page' }).locator('pre.text').first();
    await first.waitFor({ timeout: WAIT_MS });
    await expect.poll(() => first.textContent(), { timeout: WAIT_MS }).toMatch(/^first line, from object storage\n0000\.\.\./);
    await harness.screenshot(page, 'stream-cold-tier');
  }, TEST_TIMEOUT_MS);
});
