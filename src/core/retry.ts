/**
 * When a failed webhook delivery is tried again: 1 s after the first failure, doubling
 * after each further one, capped at 60 s, then moved by up to 20 % either way so that
 * many subscriptions failing together do not retry in step. Pure: the random draw is
 * passed in.
 */
import { FIRST_RETRY_DELAY_MS, MAX_RETRY_DELAY_MS, RETRY_JITTER } from './subscription-types.js';

/** Past this many doublings the cap has long been reached; stops 2 ** n from growing without end. */
const MAX_DOUBLINGS = 30;

/** The delay before the next attempt, once `attempts` (>= 1) attempts have failed; `random` in [0, 1). */
export function retryDelayMs(attempts: number, random: number): number {
  if (!Number.isInteger(attempts) || attempts < 1) throw new RangeError(`attempts must be an integer >= 1, not ${attempts}`);
  if (!(random >= 0 && random < 1)) throw new RangeError(`random must be in [0, 1), not ${random}`);
  const baseMs = Math.min(FIRST_RETRY_DELAY_MS * 2 ** Math.min(attempts - 1, MAX_DOUBLINGS), MAX_RETRY_DELAY_MS);
  return Math.round(baseMs * (1 + RETRY_JITTER * (2 * random - 1)));
}
