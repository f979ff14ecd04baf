/** Retry timing: exponential backoff with jitter, and an abortable sleep. */
import { RillError } from './errors.js';

export interface RetryPolicy {
  /** Attempts in total, the first one included. */
  maxAttempts: number;
  /** Delay before the first retry. */
  baseDelayMs: number;
  /** Upper bound on any single delay. */
  maxDelayMs: number;
}

/**
 * Enough attempts to ride out a server restart (a few seconds) with room to spare, yet
 * finite: about a minute of retrying before a caller hears of the failure.
 */
export const DEFAULT_RETRY: RetryPolicy = { maxAttempts: 40, baseDelayMs: 50, maxDelayMs: 2_000 };

export function retryPolicy(overrides: Partial<RetryPolicy> | undefined): RetryPolicy {
  return { ...DEFAULT_RETRY, ...(overrides ?? {}) };
}

/**
 * Delay before retry number `retry` (1 for the first retry). Jitter spreads the retries
 * of many clients so that a restarted server is not hit by all of them at once.
 */
export function backoffDelayMs(retry: number, policy: RetryPolicy, retryAfterSeconds?: number): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.min(retry - 1, 20));
  const jittered = ceiling / 2 + Math.random() * (ceiling / 2);
  const serverAsked = retryAfterSeconds === undefined ? 0 : retryAfterSeconds * 1000;
  return Math.max(jittered, Math.min(serverAsked, policy.maxDelayMs * 5));
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(abortError(signal.reason));
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError(signal?.reason));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export function abortError(reason: unknown): RillError {
  return new RillError({ code: 'ABORTED', message: 'aborted', cause: reason });
}
