/**
 * What the console's Chromium tests share: one browser and one real `rill` server per
 * file, pages opened on it that must log no console error (except the refusals a test
 * provokes) and reach no other host, screenshots into a folder printed at the start, and
 * the check that every control has a label and Tab reaches it.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { RillClient } from '../../src/client/index.js';
import { withChromium } from '../helpers/chromium.js';
import { removeDir, startServer, type ServerProcess, type StartOptions } from '../helpers/server.js';

export interface Opened {
  page: Page;
  /** Console errors and uncaught exceptions of the page. */
  errors: string[];
  /** Status codes the test provokes: the browser logs "Failed to load resource" for each. */
  allowRefused: (status: number) => void;
}

export interface Harness {
  readonly server: ServerProcess;
  readonly api: RillClient;
  readonly shots: string;
  open(hash?: string, viewport?: { width: number; height: number }): Promise<Opened>;
  screenshot(page: Page, name: string): Promise<void>;
}

/**
 * Registers the file's hooks; the harness's server and client exist once beforeAll ran.
 * `serverOptions`, when given, is asked for the server's flags and variables in that
 * beforeAll, so that they may name what the file's own earlier beforeAll started (an S3
 * server).
 */
export function consoleHarness(serverOptions?: () => Pick<StartOptions, 'store' | 'args' | 'env'>): Harness {
  const shots = mkdtempSync(join(tmpdir(), 'rill-console-screenshots-'));
  let server: ServerProcess;
  let browser: Browser;
  let api: RillClient;
  const opened: Opened[] = [];

  beforeAll(async () => {
    console.log(`console screenshots: ${shots}`);
    [server, browser] = await withChromium(startServer({ ...serverOptions?.(), process: true }));
    api = new RillClient({ url: server.url });
  });
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    if (server) removeDir(server.dataDir);
  });
  afterEach(async () => {
    for (const { page, errors } of opened.splice(0)) {
      await page.context().close();
      expect(errors, 'console errors in the page').toEqual([]);
    }
  });

  const open = async (hash = '#/', viewport = { width: 1100, height: 1250 }): Promise<Opened> => {
    const context = await browser.newContext({ viewport });
    const page = await context.newPage();
    const errors: string[] = [];
    const refused = new Set<number>();
    page.on('console', (message) => {
      if (message.type() !== 'error') return;
      const status = /status of (\d{3})/.exec(message.text())?.[1];
      if (status !== undefined && refused.has(Number(status))) return;
      errors.push(message.text());
    });
    page.on('pageerror', (error) => errors.push(error.message));
    // Nothing leaves for another host.
    page.on('request', (request) => {
      if (!request.url().startsWith(server.url) && !request.url().startsWith('data:')) errors.push(`request to another host: ${request.url()}`);
    });
    await page.goto(`${server.url}/console/${hash}`);
    const result = { page, errors, allowRefused: (status: number) => void refused.add(status) };
    opened.push(result);
    return result;
  };

  return {
    get server() {
      return server;
    },
    get api() {
      return api;
    },
    shots,
    open,
    screenshot: async (page, name) => void (await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true })),
  };
}

/**
 * Every visible enabled control has an accessible name, and Tab reaches each of them.
 * Answers the controls seen, so a test can tell the check covered something.
 */
export async function checkKeyboardAndLabels(page: Page): Promise<number> {
  const controls = await page.evaluate(() => {
    const found = Array.from(document.querySelectorAll<HTMLElement>('a[href], button, input, select, textarea, summary')).filter(
      (el) => el.getClientRects().length > 0 && !(el as HTMLButtonElement).disabled,
    );
    return found.map((el, i) => {
      el.dataset.a11y = String(i);
      const labelled = el instanceof HTMLInputElement || el instanceof HTMLSelectElement || el instanceof HTMLTextAreaElement;
      const name = labelled ? Array.from(el.labels ?? [], (l) => l.textContent ?? '').join(' ') : (el.textContent ?? '');
      return { i, tag: el.tagName, name: (el.getAttribute('aria-label') ?? name).trim() };
    });
  });
  expect(controls.filter((c) => c.name === ''), 'controls without a label').toEqual([]);
  await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
  const reached = new Set<string>();
  for (let presses = 0; presses < controls.length + 40 && reached.size < controls.length; presses++) {
    await page.keyboard.press('Tab');
    const at = await page.evaluate(() => (document.activeElement as HTMLElement | null)?.dataset.a11y);
    if (at !== undefined) reached.add(at);
  }
  expect(controls.filter((c) => !reached.has(String(c.i))), 'controls Tab never reaches').toEqual([]);
  return controls.length;
}
