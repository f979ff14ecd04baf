import { defineConfig } from 'vitest/config';

/**
 * `npm run bench:smoke`: the benchmark harness end to end on its smallest setting (bench/smoke/).
 * It is not part of `npm test`: it starts every server the bench compares, which costs more
 * than a minute of both cores and checks the harness, not rill.
 */
export default defineConfig({
  test: {
    include: ['bench/smoke/**/*.test.ts'],
    testTimeout: 240_000,
    pool: 'forks',
  },
});
