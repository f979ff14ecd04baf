/**
 * The web console against a rill with access control on (Debian's Chromium, the real
 * binary): without a token the page shows the server's 401; with a read token typed into
 * the token field it shows the stream; a write the token does not allow shows the 403.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signToken } from '../../src/auth/sign.js';
import { RillClient } from '../../src/client/index.js';
import { withChromium } from '../helpers/chromium.js';
import { removeDir, startServer, type ServerProcess } from '../helpers/server.js';

const SECRET = new TextEncoder().encode('console-test-secret-of-at-least-32-bytes');

let server: ServerProcess;
let browser: Browser;
let keyDir: string;

const token = (bucket: string, can: Array<'read' | 'write' | 'manage' | 'admin'>) => signToken(SECRET, { grants: [{ bucket, can }], ttlMs: 3_600_000, nowMs: Date.now() });

beforeAll(async () => {
  keyDir = mkdtempSync(join(tmpdir(), 'rill-console-auth-'));
  writeFileSync(join(keyDir, 'secret'), SECRET, { mode: 0o600 });
  [server, browser] = await withChromium(startServer({ process: true, args: ['--auth-secret-file', join(keyDir, 'secret')] }));
  const admin = new RillClient({ url: server.url, token: await token('*', ['admin']) });
  await admin.bucket('team').create();
  const log = admin.stream('team/log');
  await log.create({ contentType: 'text/plain' });
  await log.append('visible to readers\n');
  await admin.bucket('hidden').create();
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  if (server) removeDir(server.dataDir);
  removeDir(keyDir);
});

/** A page of its own, and the errors it logs: pages, and failed resources but the refusals (401, 403) the tests provoke. */
async function openPage(): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
  const context = await browser.newContext();
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  page.on('console', (message) => {
    if (message.type() === 'error' && !/status of (401|403)/.test(message.text())) errors.push(message.text());
  });
  return { context, page, errors };
}

describe('web console with access control on', () => {
  it('shows 401 without a token, the stream with a read token, and 403 for a write it does not allow', async () => {
    const { context, page, errors } = await openPage();
    await page.goto(`${server.url}/console/#/s/team/log`);
    await page.getByRole('alert').filter({ hasText: 'UNAUTHORIZED' }).filter({ hasText: 'HTTP 401' }).waitFor();

    await page.getByLabel('Access token').fill(await token('team', ['read']));
    await page.getByRole('button', { name: 'Use token' }).click();
    await page.getByText('visible to readers').first().waitFor();

    await page.getByRole('textbox', { name: /^Message/ }).fill('not allowed');
    await page.getByRole('button', { name: 'Append', exact: true }).click();
    await page.getByRole('alert').filter({ hasText: 'FORBIDDEN' }).filter({ hasText: 'HTTP 403' }).waitFor();
    expect(await new RillClient({ url: server.url, token: await token('team', ['read']) }).stream('team/log').head()).toMatchObject({ nextOffset: '00000000000000000019' });
    await context.close();
    expect(errors).toEqual([]);
  });

  it('lists the server\'s buckets for an admin token; for another says why, and lists this tab\'s', async () => {
    const { context, page, errors } = await openPage();
    await page.goto(`${server.url}/console/#/`);
    // The overview's figures, the bucket listing and the /v1/stream subscriptions are each refused, each saying so.
    await expect.poll(() => page.getByRole('alert').filter({ hasText: 'UNAUTHORIZED' }).filter({ hasText: 'HTTP 401' }).count()).toBe(3);
    await page.getByText("This token may not read the server's figures").waitFor();
    await page.getByText('The server did not list its buckets for this token').waitFor();
    // A token of one bucket may not list the server's: this tab's buckets are shown instead.
    await page.getByLabel('Access token').fill(await token('team', ['read']));
    await page.getByRole('button', { name: 'Use token' }).click();
    // The figures and the bucket listing are refused; the /v1/stream subscriptions this token may see are none.
    await expect.poll(() => page.getByRole('alert').filter({ hasText: 'FORBIDDEN' }).filter({ hasText: 'HTTP 403' }).count()).toBe(2);
    await page.getByText('No subscriptions.').waitFor();
    await page.getByLabel('Bucket id').fill('team');
    await page.getByRole('button', { name: 'Open bucket' }).click();
    await page.getByRole('heading', { name: 'Bucket team' }).waitFor();
    await page.getByRole('link', { name: 'Buckets' }).first().click();
    const ofTab = page.getByRole('table', { name: 'Buckets of this tab' });
    await ofTab.waitFor();
    expect(await ofTab.getByRole('link').allTextContents()).toEqual(['team']);
    // Listing the server's buckets needs admin on * (as GET / does): hidden is listed too.
    await page.getByLabel('Access token').fill(await token('*', ['admin']));
    await page.getByRole('button', { name: 'Use token' }).click();
    const listed = page.getByRole('table', { name: 'Buckets, page 1' });
    await listed.waitFor();
    expect(await listed.getByRole('link').allTextContents()).toEqual(['hidden', 'team']);
    // ... and the overview's figures.
    await page.getByTestId('overview-streams').filter({ hasText: '2, 1' }).waitFor();
    await context.close();
    expect(errors).toEqual([]);
  });
});
