/**
 * Stored bodies opened in a browser tab on the console's origin (Debian's Chromium, the
 * real binary, auth on). Writers choose a stream's bytes and type, and rill serves them
 * on the origin whose session storage holds the console's token: a stored page must not
 * be able to read it. Each test signs in to the console in a tab (so the token is in
 * that tab's session storage, which same-origin pages of the tab share), then opens a
 * stored body in the same tab.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type Download, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { signToken } from '../../src/auth/sign.js';
import { RillClient } from '../../src/client/index.js';
import { extensionUrl } from '../../src/protocol/extensions.js';
import { withChromium } from '../helpers/chromium.js';
import { removeDir, startServer, type ServerProcess } from '../helpers/server.js';
import { until } from '../helpers/waits.js';

const SECRET = new TextEncoder().encode('stored-pages-test-secret-of-32-bytes-or-more');
/** The console's session-storage key (console/src/api.ts). */
const TOKEN_KEY = 'rill.console.token';

/**
 * What a stored page's script does: put the console's token in the title (a real page
 * would send it away), or say why it could not read it.
 */
const STEAL = `try { document.title = 'stolen:' + sessionStorage.getItem('${TOKEN_KEY}'); } catch (e) { document.title = 'refused:' + e.name; }`;
const HTML_PAGE = `<!doctype html><html><head><title>stored page</title></head><body><p>stored</p><script>${STEAL}</script></body></html>`;
const SVG_PAGE = `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><title>stored svg</title><script>${STEAL}</script></svg>`;

let server: ServerProcess;
let browser: Browser;
let keyDir: string;
let admin: string;
let reader: string;

const token = (can: Array<'read' | 'admin'>) => signToken(SECRET, { grants: [{ bucket: '*', can }], ttlMs: 3_600_000, nowMs: Date.now() });

beforeAll(async () => {
  keyDir = mkdtempSync(join(tmpdir(), 'rill-stored-pages-'));
  writeFileSync(join(keyDir, 'secret'), SECRET, { mode: 0o600 });
  [server, browser] = await withChromium(startServer({ process: true, args: ['--auth-secret-file', join(keyDir, 'secret')] }));
  [admin, reader] = await Promise.all([token(['admin']), token(['read'])]);
  const api = new RillClient({ url: server.url, token: admin });
  await api.bucket('site').create();
  await api.stream('site/page').create({ contentType: 'text/html', body: HTML_PAGE });
  await api.stream('site/notes').create({ contentType: 'text/plain', body: HTML_PAGE });
  await api.stream('site/drawing').create({ contentType: 'text/plain', body: 'x' });
  const published = await fetch(extensionUrl(`${server.url}/site/drawing`, 'snapshot/00000000000000000001'), {
    method: 'PUT',
    headers: { authorization: `Bearer ${admin}`, 'content-type': 'image/svg+xml' },
    body: SVG_PAGE,
  });
  expect(published.status).toBe(204);
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  if (server) removeDir(server.dataDir);
  removeDir(keyDir);
});

const contexts: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  for (const context of contexts.splice(0)) await context.close();
});

/** A tab signed in to the console: the read token is in its session storage. */
async function signedInTab(): Promise<{ page: Page; downloads: Download[] }> {
  const context = await browser.newContext({ acceptDownloads: true });
  contexts.push(context);
  const page = await context.newPage();
  const downloads: Download[] = [];
  page.on('download', (download) => downloads.push(download));
  await page.goto(`${server.url}/console/#/s/site/notes`);
  await page.getByLabel('Access token').fill(reader);
  await page.getByRole('button', { name: 'Use token' }).click();
  await page.getByRole('heading', { name: 'Stream site/notes' }).waitFor();
  expect(await page.evaluate((key) => sessionStorage.getItem(key), TOKEN_KEY), 'the console keeps the token in session storage').toBe(reader);
  return { page, downloads };
}

/** A stored body's URL as a link would give it: the token in the query, as GETs allow. */
const linkTo = (path: string) => `${server.url}${path}${path.includes('?') ? '&' : '?'}token=${reader}`;

/** Opens `url` in the tab: 'download' when the browser saved it instead of showing it. */
async function openInTab(page: Page, downloads: Download[], url: string): Promise<'download' | 'page'> {
  try {
    await page.goto(url);
    return 'page';
  } catch (error) {
    if (!String(error).includes('Download is starting')) throw error;
    await until(() => downloads.length > 0, `the download of ${url}`);
    return 'download';
  }
}

async function downloadedText(download: Download): Promise<string> {
  return readFileSync(await download.path(), 'utf8');
}

describe('stored bodies on the console origin', () => {
  it('a text/html stream is downloaded, not shown: its script never runs beside the console token', async () => {
    const { page, downloads } = await signedInTab();
    const opened = await openInTab(page, downloads, linkTo('/site/page?offset=-1'));
    // Without the fix the page opens here and its title is "stolen:<token>".
    expect(await page.title(), 'the tab title').not.toContain('stolen');
    expect(opened).toBe('download');
    expect(await downloadedText(downloads[0]!)).toBe(HTML_PAGE);
    expect(await page.evaluate((key) => sessionStorage.getItem(key), TOKEN_KEY), 'the tab still holds the console token').toBe(reader);
  });

  it('an image/svg+xml snapshot is downloaded, not shown', async () => {
    const { page, downloads } = await signedInTab();
    const opened = await openInTab(page, downloads, linkTo(extensionUrl('/site/drawing', 'snapshot/00000000000000000001')));
    expect(await page.title(), 'the tab title').not.toContain('stolen');
    expect(opened).toBe('download');
    expect(await downloadedText(downloads[0]!)).toBe(SVG_PAGE);
  });

  it('a body shown in the tab is a sandboxed text document with an opaque origin, which cannot read session storage', async () => {
    const { page, downloads } = await signedInTab();
    expect(await openInTab(page, downloads, linkTo('/site/notes?offset=-1'))).toBe('page');
    // nosniff: the HTML inside a text/plain stream is shown as text, never parsed.
    expect(await page.locator('body').innerText()).toBe(HTML_PAGE);
    // sandbox: the document's origin is opaque, so this origin's storage is out of its reach.
    const seen = await page.evaluate((key) => {
      try {
        return { origin: self.origin, token: sessionStorage.getItem(key) };
      } catch (error) {
        return { origin: self.origin, token: `refused:${(error as Error).name}` };
      }
    }, TOKEN_KEY);
    expect(seen).toEqual({ origin: 'null', token: 'refused:SecurityError' });
  });
});
