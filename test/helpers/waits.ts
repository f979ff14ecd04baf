/**
 * Waiting for what a server does without telling anyone: a reader it now holds, a connection
 * it admits again, a sweep it ran. The condition is polled (by the bench's own helpers,
 * bench/workloads/probes.ts), with a timeout that only a bug reaches; a test never waits for
 * time to pass instead.
 */
import { liveReaders, until as pollUntil } from '../../bench/workloads/probes.js';

export { liveReaders };

/** How long a wait for an event may take: generous, so that only a bug reaches it, even on a loaded machine. */
export const EVENT_TIMEOUT_MS = 15_000;

/** Resolves once `check` holds; fails naming `what` if it has not within `timeoutMs`. */
export function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = EVENT_TIMEOUT_MS): Promise<void> {
  return pollUntil(check, what, timeoutMs);
}

export type LiveKind = 'sse' | 'long_poll';

/** Until the server at `url` holds exactly `count` live readers of `kind` (at least, with `atLeast`). */
export function untilLiveReaders(url: string, kind: LiveKind, count: number, { atLeast = false } = {}): Promise<void> {
  const holds = (n: number) => (atLeast ? n >= count : n === count);
  return until(async () => holds(await liveReaders(url, kind)), `${atLeast ? 'at least ' : ''}${count} ${kind} readers held by ${url}`);
}
