/**
 * The webhook retry schedule: 1 s, 2 s, 4 s ... capped at 60 s, each moved by up to 20 %.
 */
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { retryDelayMs } from '../../src/core/retry.js';
import { FIRST_RETRY_DELAY_MS, MAX_RETRY_DELAY_MS, RETRY_JITTER } from '../../src/core/subscription-types.js';
import { testSeed } from '../helpers/seed.js';

const attempts = fc.integer({ min: 1, max: 10_000 });
const random = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true });
const baseOf = (n: number) => Math.min(FIRST_RETRY_DELAY_MS * 2 ** Math.min(n - 1, 40), MAX_RETRY_DELAY_MS);

describe('retryDelayMs', () => {
  test('the schedule without jitter: 1 s doubling to a 60 s cap', () => {
    // random 0.5 moves nothing.
    expect([1, 2, 3, 4, 5, 6, 7, 8, 100, 1e9].map((n) => retryDelayMs(n, 0.5))).toEqual([1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000, 60000]);
    expect(retryDelayMs(1, 0)).toBe(800);
    expect(retryDelayMs(1, 0.999999)).toBe(1200);
    expect(retryDelayMs(50, 0)).toBe(48_000);
    expect(retryDelayMs(50, 0.999999)).toBe(72_000);
  });

  test('every delay lies within 20 % of its attempt\'s base, and never beyond 72 s', () => {
    fc.assert(
      fc.property(attempts, random, (n, r) => {
        const delay = retryDelayMs(n, r);
        const base = baseOf(n);
        expect(Number.isInteger(delay)).toBe(true);
        expect(delay).toBeGreaterThanOrEqual(Math.floor(base * (1 - RETRY_JITTER)));
        expect(delay).toBeLessThanOrEqual(Math.ceil(base * (1 + RETRY_JITTER)));
        expect(delay).toBeLessThanOrEqual(MAX_RETRY_DELAY_MS * (1 + RETRY_JITTER));
      }),
      { seed: testSeed() },
    );
  });

  test('with the same draw, a later attempt never waits less, and the cap holds from attempt 7 on', () => {
    fc.assert(
      fc.property(attempts, attempts, random, (a, b, r) => {
        const [lo, hi] = a <= b ? [a, b] : [b, a];
        expect(retryDelayMs(lo, r)).toBeLessThanOrEqual(retryDelayMs(hi, r));
        if (lo >= 7) expect(retryDelayMs(lo, r)).toBe(retryDelayMs(hi, r));
      }),
      { seed: testSeed() },
    );
  });

  test('refuses attempts below 1 and draws outside [0, 1)', () => {
    for (const n of [0, -1, 1.5, Number.NaN]) expect(() => retryDelayMs(n, 0.5), String(n)).toThrow(RangeError);
    for (const r of [1, -0.1, Number.NaN]) expect(() => retryDelayMs(1, r), String(r)).toThrow(RangeError);
  });
});
