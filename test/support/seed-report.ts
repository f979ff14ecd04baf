/**
 * vitest setupFile: when a test fails in a file that drew from the seeded generator
 * (test/helpers/seed.ts), say which seed it ran with and how to replay it. The seed also goes
 * into the test's meta, for the failure summary at the end of the run.
 */
import { relative } from 'node:path';
import { beforeEach } from 'vitest';
import { seedInUse } from '../helpers/seed.js';

declare module 'vitest' {
  interface TaskMeta {
    seed?: number;
  }
}

beforeEach(({ onTestFailed, task }) => {
  onTestFailed(() => {
    const seed = seedInUse();
    if (seed === undefined) return;
    task.meta.seed = seed;
    const file = relative(process.cwd(), task.file.filepath);
    process.stderr.write(`\n${task.name}: failed with seed ${seed}; replay with RILL_TEST_SEED=${seed} npm test -- ${file}\n`);
  });
});
