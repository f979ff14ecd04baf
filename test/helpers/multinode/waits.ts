/**
 * Waiting for something a node does that it announces to no one: a reader it now holds, a
 * connection it now listens on. The condition is polled, with a timeout only a bug reaches.
 */
import { sleep } from './send.js';

/** How often a wait looks again. */
const POLL_MS = 20;

/** Resolves once `check` holds; throws after `timeoutMs`. */
export async function until(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not so after ${timeoutMs} ms`);
    await sleep(POLL_MS); // a poll's interval, not a wait for time to pass
  }
}

/** Live readers of `kind` a node holds now (its /metrics gauge rill_live_readers). */
export async function liveReaders(url: string, kind: 'sse' | 'long_poll'): Promise<number> {
  const metrics = await (await fetch(`${url}/metrics`)).text();
  const match = new RegExp(`^rill_live_readers\\{kind="${kind}"\\} (\\d+)$`, 'm').exec(metrics);
  if (!match) throw new Error(`${url}: no rill_live_readers{kind="${kind}"} in /metrics`);
  return Number(match[1]);
}

/** Until the node at `url` holds at least `n` long-poll readers: they wait there now. */
export function untilLongPolling(url: string, n = 1): Promise<void> {
  return until(`${n} long-poll readers waiting on ${url}`, async () => (await liveReaders(url, 'long_poll')) >= n);
}
