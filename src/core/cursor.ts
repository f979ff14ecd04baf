/**
 * Stream-Cursor: lets caches tell successive live requests apart. Time is cut into
 * 20-second intervals counted from 2024-10-09T00:00:00Z; the cursor is the interval
 * number. A client that echoes a cursor at or ahead of the current interval gets one
 * strictly greater, advanced by a random 1..3600 seconds, so cursors never repeat and
 * never go backwards.
 */
export const CURSOR_EPOCH_MS = Date.UTC(2024, 9, 9);
export const CURSOR_INTERVAL_MS = 20_000;
const MAX_JITTER_SECONDS = 3600;

/** `random01` is a number in [0, 1), passed in so the rule stays pure. */
export function nextCursor(nowMs: number, clientCursor: string | null, random01: number): string {
  const current = Math.max(0, Math.floor((nowMs - CURSOR_EPOCH_MS) / CURSOR_INTERVAL_MS));
  const echoed = clientCursor !== null && /^\d{1,15}$/.test(clientCursor) ? Number(clientCursor) : null;
  if (echoed === null || echoed < current) return String(current);
  const jitterSeconds = 1 + Math.floor(random01 * MAX_JITTER_SECONDS);
  const advance = Math.max(1, Math.ceil((jitterSeconds * 1000) / CURSOR_INTERVAL_MS));
  return String(echoed + advance);
}
