/**
 * Waiting for what a server does without telling anyone: a reader it now holds, a connection
 * it admits again, a sweep it ran. The condition is polled, with a timeout that only a bug
 * reaches; a test never waits for time to pass instead.
 */

/** How long a wait for an event may take: generous, so that only a bug reaches it, even on a loaded machine. */
export const EVENT_TIMEOUT_MS = 15_000;

/** How often a wait looks again. */
const POLL_MS = 10;

/** Resolves once `check` holds; fails naming `what` if it has not within `timeoutMs`. */
export async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = EVENT_TIMEOUT_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`waited ${timeoutMs} ms for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS)); // a poll's interval, not a wait for time to pass
  }
}

export type LiveKind = 'sse' | 'long_poll';

/** The live readers of `kind` (long-polls waiting, SSE connections) the server at `url` holds now: its /metrics gauge. */
export async function liveReaders(url: string, kind: LiveKind): Promise<number> {
  const metrics = await (await fetch(`${url}/metrics`)).text();
  const match = new RegExp(`^rill_live_readers\\{kind="${kind}"\\} (\\d+)$`, 'm').exec(metrics);
  if (!match) throw new Error(`${url}: no rill_live_readers{kind="${kind}"} in /metrics`);
  return Number(match[1]);
}

/** Until the server at `url` holds exactly `count` live readers of `kind` (at least, with `atLeast`). */
export function untilLiveReaders(url: string, kind: LiveKind, count: number, { atLeast = false } = {}): Promise<void> {
  const holds = (n: number) => (atLeast ? n >= count : n === count);
  return until(async () => holds(await liveReaders(url, kind)), `${atLeast ? 'at least ' : ''}${count} ${kind} readers held by ${url}`);
}
