/**
 * Seeded randomness for tests. Every random choice a test makes (model histories, crash
 * moments, fuzz inputs, jitter) comes from one seed per test file: RILL_TEST_SEED when set,
 * else a fresh one. A failing test in a file that used it prints the seed and the command
 * that replays it (test/support/seed-report.ts), and the run's failure summary repeats it.
 */
import { randomInt } from 'node:crypto';

let fileSeed: number | undefined;

function seedFromEnvironment(): number | undefined {
  const text = process.env.RILL_TEST_SEED;
  if (text === undefined || text === '') return undefined;
  const seed = Number(text);
  if (!Number.isSafeInteger(seed) || seed < 0) throw new Error(`RILL_TEST_SEED must be a non-negative integer, not ${JSON.stringify(text)}`);
  return seed;
}

/** This file's seed; reading it marks the file as random, so that a failure prints it. */
export function testSeed(): number {
  fileSeed ??= seedFromEnvironment() ?? randomInt(2 ** 31);
  return fileSeed;
}

/** The seed if this file read one, for the failure report. */
export function seedInUse(): number | undefined {
  return fileSeed;
}

export interface Rng {
  /** A float in [0, 1), as Math.random. */
  next(): number;
  /** An integer in [min, max]. */
  int(min: number, max: number): number;
  /** One of `items`. */
  pick<T>(items: readonly T[]): T;
}

/**
 * A generator of numbers from `seed` (mulberry32: small, fast, good enough to choose test
 * inputs). Streams that must not depend on each other's draws take seeds of their own:
 * seededRandom(testSeed() + 1).
 */
export function seededRandom(seed: number = testSeed()): Rng {
  let state = seed >>> 0;
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    pick: (items) => items[Math.floor(next() * items.length)]!,
  };
}
