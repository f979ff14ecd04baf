/**
 * The console's second pass end to end (issue 39), in Debian's Chromium against the real
 * `rill` binary: the bucket page's stream table (figures from the listing, a sparkline
 * that rises as appends flow, sorting and the prefix filter), the stream page's producers
 * and the subscriptions that follow the stream, jumps to the tail and to a record, a search
 * of the page, a server's refusal shown, the subscriptions' pending streams and the key
 * rotation that asks first, and both pages on a narrow window.
 */
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { checkKeyboardAndLabels, consoleHarness } from './harness.js';

const harness = consoleHarness();

/** The polyline's lowest point is above the sparkline's floor: the line rose. */
const sparkRose = async (page: Page, id: string): Promise<boolean> => {
  const points = (await page.getByTestId(`spark-${id}`).getAttribute('points')) ?? '';
  return points.split(' ').some((p) => p !== '' && Number(p.split(',')[1]) < 17);
};

/** Appends to `stream` until `done` answers true (bounded: the loop stops by itself). */
async function appendUntil(append: (i: number) => Promise<unknown>, done: () => Promise<boolean>): Promise<void> {
  let stop = false;
  let failed: unknown = null;
  const writer = (async () => {
    for (let i = 0; i < 50_000 && !stop; i++) await append(i);
  })().catch((error: unknown) => void (failed = error));
  try {
    // A refused append ends the wait at once, with its error.
    await expect.poll(async () => (failed === null ? done() : Promise.reject(failed)), { timeout: 30_000 }).toBe(true);
  } finally {
    stop = true;
    await writer;
  }
}

/** Offsets of JSON messages stored as their compact text and a newline, from the first. */
function offsetsOf(values: unknown[]): string[] {
  let at = 0;
  return values.map((v) => {
    const offset = String(at).padStart(20, '0');
    at += Buffer.byteLength(JSON.stringify(v)) + 1;
    return offset;
  });
}

describe('web console, second pass', () => {
  it("shows a bucket's streams with content type, tail, bytes and messages, a sparkline that rises as appends flow, sorted by size or activity and filtered by prefix", async () => {
    const { api } = harness;
    await api.bucket('tbl1').create();
    await api.stream('tbl1/big').create({ contentType: 'application/json' });
    await api.stream('tbl1/big').appendMessages(Array.from({ length: 40 }, (_, n) => ({ n, pad: 'x'.repeat(20) })));
    await api.stream('tbl1/small').create({ contentType: 'text/plain', body: 'hi' });
    await api.stream('tbl1/busy').create({ contentType: 'text/plain' });
    const big = await api.streamStats('tbl1/big');
    const { page } = await harness.open('#/b/tbl1');
    const table = page.getByRole('table', { name: 'Streams, page 1' });
    const row = (id: string) => table.getByRole('row', { name: new RegExp(`^${id} `) });
    await row('big').waitFor();
    expect((await row('big').getByRole('cell').allTextContents()).slice(0, 5)).toEqual(['big', 'application/json', String(Number(big.tail)), big.bytes.toLocaleString('en'), '40']);
    expect((await row('small').getByRole('cell').allTextContents()).slice(0, 5)).toEqual(['small', 'text/plain', '2', '2', '1']);
    const firstLinks = () => table.getByRole('link').allTextContents();
    expect(await firstLinks()).toEqual(['big', 'busy', 'small']);
    await page.getByLabel('Sort this page by').selectOption('size');
    await expect.poll(firstLinks).toEqual(['big', 'small', 'busy']);

    await appendUntil((i) => api.stream('tbl1/busy').append(`line ${i}\n`, { contentType: 'text/plain' }), () => sparkRose(page, 'busy'));
    expect((await row('busy').getByRole('cell').nth(5).textContent())).toMatch(/^\d\d:\d\d:\d\d$/);
    expect(await row('small').getByRole('cell').nth(5).textContent()).toBe('not seen');
    await page.getByLabel('Sort this page by').selectOption('activity');
    // Activity is the growth between the last two polls: appends flow until busy leads.
    await appendUntil((i) => api.stream('tbl1/busy').append(`more ${i}\n`, { contentType: 'text/plain' }), async () => (await firstLinks())[0] === 'busy');

    await page.getByLabel('Stream id prefix').fill('b');
    await page.getByRole('button', { name: 'Filter' }).click();
    const filtered = page.getByRole('table', { name: 'Streams starting with "b", page 1' });
    await filtered.waitFor();
    expect((await filtered.getByRole('link').allTextContents()).sort()).toEqual(['big', 'busy']);
    await harness.screenshot(page, 'bucket-streams');
    expect(await checkKeyboardAndLabels(page)).toBeGreaterThan(10);
  }, 90_000);

  it("shows a stream's producers and the subscriptions that follow it, jumps to the tail and to a record, finds text on the page, and shows the server's refusal", async () => {
    const { api } = harness;
    await api.bucket('ppl1').create();
    await api.stream('ppl1/wake').create({ contentType: 'application/json' });
    const events = api.stream('ppl1/events');
    await events.create({ contentType: 'application/json' });
    const subs = api.bucket('ppl1').subscriptions();
    await subs.put('by-pattern', { type: 'pull-wake', pattern: '*', wakeStream: 'wake' });
    await subs.put('by-link', { type: 'pull-wake', pattern: 'other/*', streams: ['events'], wakeStream: 'wake' });
    await subs.put('unrelated', { type: 'pull-wake', pattern: 'nothing/*', wakeStream: 'wake' });
    const values: unknown[] = Array.from({ length: 30 }, (_, n) => ({ n }));
    await events.appendMessages(values);
    const written = [{ from: 'a', seq: 0 }, { from: 'a', seq: 1 }, { from: 'b', seq: 0 }];
    await events.appendJson(written[0], { producer: { id: 'p-a', epoch: 0, seq: 0 } });
    await events.appendJson(written[1], { producer: { id: 'p-a', epoch: 0, seq: 1 } });
    await events.appendJson(written[2], { producer: { id: 'p-b', epoch: 3, seq: 0 } });
    values.push(...written);

    const { page, allowRefused } = await harness.open('#/s/ppl1/events');
    const producers = page.getByRole('table', { name: 'Producers, page 1' });
    await producers.waitFor();
    const producerRows = await producers.getByRole('row').evaluateAll((rows) => rows.slice(1).map((r) => Array.from(r.querySelectorAll('td'), (td) => td.textContent)));
    expect(producerRows.map((cells) => cells.slice(0, 3))).toEqual([['p-a', '0', '1'], ['p-b', '3', '0']]);
    expect(producerRows[0]![3]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    // Refresh reads them again: a producer that writes after the page opened appears.
    await events.appendJson({ from: 'c' }, { producer: { id: 'p-c', epoch: 0, seq: 0 } });
    values.push({ from: 'c' });
    await page.getByRole('button', { name: 'Refresh' }).click();
    await producers.getByRole('row', { name: /^p-c / }).waitFor();
    const followers = page.getByRole('table', { name: 'Subscriptions following this stream' });
    await followers.waitFor();
    const followerRows = await followers.getByRole('row').evaluateAll((rows) => rows.slice(1).map((r) => Array.from(r.querySelectorAll('td'), (td) => td.textContent)));
    expect(followerRows.map((cells) => cells.slice(0, 3))).toEqual([['by-link', 'pull-wake', 'link'], ['by-pattern', 'pull-wake', 'pattern *']]);

    const offsets = offsetsOf(values);
    const pager = page.getByRole('list', { name: 'Messages of this page' });
    await page.getByLabel('Messages per page').selectOption('20');
    await page.getByRole('button', { name: 'Go to the tail' }).click();
    // The last 20 records, numbered by the server, at the offsets their texts give.
    await expect.poll(() => pager.locator('li').first().getAttribute('data-record')).toBe('14');
    const tailPage = await pager.locator('li').evaluateAll((lis) => lis.map((li) => [li.getAttribute('data-record'), li.getAttribute('data-offset')]));
    expect(tailPage).toEqual(Array.from({ length: 20 }, (_, i) => [String(14 + i), offsets[14 + i]]));
    expect(await page.getByTestId('page-next').textContent()).toBe((await events.head()).nextOffset);

    await page.getByLabel('Record number').fill('5');
    await page.getByRole('button', { name: 'Jump to record' }).click();
    await page.getByTestId('page-offset').filter({ hasText: offsets[5]! }).waitFor();
    expect(await pager.locator('li').first().getAttribute('data-record')).toBe('5');
    expect(await pager.locator('code.preview').first().textContent()).toBe('{"n":5}');
    await page.getByLabel('Find on this page').fill('"n":1');
    // Records 5 to 24: "n":1 is in 10 to 19.
    await page.getByTestId('search-count').filter({ hasText: /^10 of 20 messages/ }).waitFor();
    expect(await pager.locator('code.preview').allTextContents()).toEqual(Array.from({ length: 10 }, (_, i) => `{"n":${10 + i}}`));
    await page.getByLabel('Find on this page').fill('');
    // Tall enough to hold the whole page: messages use content-visibility, so those outside
    // the viewport would be blank in a full-page screenshot (docs/console-stream.png).
    await page.setViewportSize({ width: 1100, height: 1800 });
    await harness.screenshot(page, 'stream-page');

    allowRefused(400);
    await page.getByLabel('Record number').fill('99');
    await page.getByRole('button', { name: 'Jump to record' }).click();
    await page.getByRole('alert').filter({ hasText: 'RECORD_BEYOND_TAIL' }).filter({ hasText: 'HTTP 400' }).waitFor();
    await page.getByLabel('Offset', { exact: true }).fill('3');
    await page.getByRole('button', { name: 'Jump to offset' }).click();
    await page.getByRole('alert').filter({ hasText: 'MISALIGNED_OFFSET' }).filter({ hasText: 'HTTP 400' }).waitFor();
    expect(await checkKeyboardAndLabels(page)).toBeGreaterThan(20);
  });

  it("shows each subscription's pending streams and rotates the server's signing key, asking first", async () => {
    const { api } = harness;
    await api.bucket('subs2').create();
    await api.stream('subs2/wake').create({ contentType: 'application/json' });
    await api.stream('subs2/data').create({ contentType: 'application/json' });
    const subs = api.bucket('subs2').subscriptions();
    await subs.put('follows-data', { type: 'pull-wake', streams: ['data'], wakeStream: 'wake' });
    await api.stream('subs2/data').appendJson({ work: 1 });
    const { page } = await harness.open('#/b/subs2');
    await page.getByTestId('pending-follows-data').filter({ hasText: '1 of 1' }).waitFor();
    const before = (await subs.jwks()).keys.map((k) => k.kid);
    await page.getByRole('button', { name: 'Rotate signing key' }).click();
    await page.getByRole('button', { name: 'Cancel' }).click();
    expect((await subs.jwks()).keys.map((k) => k.kid)).toEqual(before);
    await page.getByRole('button', { name: 'Rotate signing key' }).click();
    await page.getByRole('button', { name: 'Yes, rotate signing key' }).click();
    const status = page.getByRole('status').filter({ hasText: /^New signing key: / });
    await status.waitFor();
    const kid = (await status.textContent())!.slice('New signing key: '.length);
    expect(before).not.toContain(kid);
    expect((await subs.jwks()).keys.map((k) => k.kid)).toContain(kid);
  });

  it('fits the bucket and stream pages in a narrow window, every control labelled and reached by Tab', async () => {
    const { api } = harness;
    await api.bucket('nrw1').create();
    await api.stream('nrw1/wake').create({ contentType: 'application/json' });
    const stream = api.stream('nrw1/a-rather-long-stream-name-that-has-to-wrap-somewhere');
    await stream.create({ contentType: 'application/json' });
    await stream.appendJson({ text: 'a message long enough to need wrapping on a phone, and then some more words' }, { producer: { id: 'producer-with-a-long-id', epoch: 0, seq: 0 } });
    await api.bucket('nrw1').subscriptions().put('follows', { type: 'pull-wake', pattern: '*', wakeStream: 'wake' });
    const narrow = { width: 360, height: 800 };
    for (const hash of ['#/b/nrw1', '#/s/nrw1/a-rather-long-stream-name-that-has-to-wrap-somewhere', '#/']) {
      const { page } = await harness.open(hash, narrow);
      await page.getByRole('heading', { level: 1 }).first().waitFor();
      await page.getByRole('table').first().waitFor();
      const widths = await page.evaluate(() => ({ page: document.documentElement.scrollWidth, window: window.innerWidth }));
      expect(widths.page, hash).toBeLessThanOrEqual(widths.window);
      expect(await checkKeyboardAndLabels(page)).toBeGreaterThan(5);
      if (hash.startsWith('#/s/')) await harness.screenshot(page, 'stream-narrow');
    }
  });
});
