/**
 * The browser of the console tests: Debian's Chromium (RILL_CHROMIUM to use another),
 * driven by playwright-core, headless, with nothing of its own reaching the network.
 */
import { chromium, type Browser } from 'playwright-core';
import { removeDir, type RunningServer } from './server.js';

export const CHROMIUM = process.env.RILL_CHROMIUM ?? '/usr/bin/chromium';

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
  });
}

/**
 * Starts a server and Chromium at once. When either fails, the other is stopped (the
 * server's directory removed) before the error is thrown: a file's afterAll never learns of
 * a server whose browser did not start, and a machine without Chromium was left with a
 * `rill serve` child of each console file running on after the run.
 */
export async function withChromium<S extends RunningServer>(starting: Promise<S>): Promise<[S, Browser]> {
  const [server, browser] = await Promise.allSettled([starting, launchChromium()]);
  if (server.status === 'fulfilled' && browser.status === 'fulfilled') return [server.value, browser.value];
  if (server.status === 'fulfilled') {
    await server.value.stop();
    removeDir(server.value.dataDir);
  }
  if (browser.status === 'fulfilled') await browser.value.close();
  throw server.status === 'rejected' ? server.reason : (browser as PromiseRejectedResult).reason;
}
