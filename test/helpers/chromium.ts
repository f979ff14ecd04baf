/**
 * The browser of the console tests: Debian's Chromium (RILL_CHROMIUM to use another),
 * driven by playwright-core, headless, with nothing of its own reaching the network.
 */
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = process.env.RILL_CHROMIUM ?? '/usr/bin/chromium';

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
  });
}
