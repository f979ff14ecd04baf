import { defineConfig } from 'vitest/config';
import { EVENT_TIMEOUT_MS } from './test/helpers/waits.js';
import { LongFirst } from './test/support/long-first.js';

/**
 * How `npm test` is laid out on this 2-core machine:
 *
 * - `main`: every file that needs no PostgreSQL server, two at a time (WORKERS).
 * - `postgres-engine`: the files that run PostgreSQL themselves (the storage contract, the
 *   seed-000 model on every engine, the conformance suite on PostgreSQL, ...), likewise.
 * - `postgres`: the HTTP and client files whose answers depend on what an engine stores
 *   (writes, producers, conditional appends, lifecycle, limits and refusals, live tailing,
 *   subscriptions), again
 *   with every server they start on PostgreSQL (test/helpers/server.ts). The other HTTP files
 *   test parsing, headers and the client, which no engine changes, and run on SQLite only.
 * - `serial`: the multi-node files, which load the machine with many processes killed on a
 *   schedule, one at a time after the others. No file measures the machine: latency, memory
 *   and CPU figures are `npm run bench`'s (docs/performance.md).
 *
 * The PostgreSQL server is started by globalSetup only in the projects that need it; vitest
 * runs a project's globalSetup only when that project has files to run, so `npm test --
 * test/http/sse.test.ts` starts none.
 */
const POSTGRES_SETUP = ['test/helpers/postgres-global.ts'];

/** Files that start PostgreSQL or a database on the shared server themselves. */
const USES_POSTGRES = [
  'test/conformance-postgres.test.ts',
  'test/crash/records-sigkill.test.ts',
  'test/crash/webhook-resume.test.ts',
  'test/crash/transactions-sigkill.test.ts',
  'test/postgres-smoke.test.ts',
  'test/core/producer-model.test.ts',
  'test/live/remote.test.ts',
  'test/live/remote-readers.test.ts',
  'test/ops/metrics.test.ts',
  'test/storage/contract.test.ts',
  'test/storage/cold-tier.test.ts',
  'test/http/cold-tier.test.ts',
  'test/http/postgres-catch-up.test.ts',
  'test/crash/cold-sigkill.test.ts',
  'test/storage/postgres-engine.test.ts',
  'test/storage/postgres-batches.test.ts',
  'test/storage/postgres-optimistic.test.ts',
  'test/storage/postgres-hints.test.ts',
  'test/storage/postgres-array-params.test.ts',
  'test/storage/records.test.ts',
  'test/storage/subscriptions.test.ts',
  'test/storage/subscription-queries.test.ts',
  'test/storage/producer-queries.test.ts',
  'test/storage/fork-queries.test.ts',
  'test/storage/stream-queries.test.ts',
  'test/storage/transactions.test.ts',
  'test/auth/bucket-settings-nodes.test.ts',
  'test/docs/console-examples.test.ts',
];

/** HTTP and client files run again on PostgreSQL: what they assert depends on the engine. */
const AGAIN_ON_POSTGRES = [
  'test/http/affinity.test.ts',
  'test/http/attrs-batch.test.ts',
  'test/http/buckets.test.ts',
  'test/http/conditional.test.ts',
  'test/http/errors.test.ts',
  'test/http/forks.test.ts',
  'test/http/incarnation.test.ts',
  'test/http/json-reads.test.ts',
  'test/http/producers.test.ts',
  'test/http/records-reads.test.ts',
  'test/http/records-writes.test.ts',
  'test/http/retention-policies.test.ts',
  'test/http/record-vectors.test.ts',
  'test/http/snapshots.test.ts',
  'test/http/sse-tail.test.ts',
  'test/http/transactions.test.ts',
  'test/client/producer.test.ts',
  'test/client/subscriptions.test.ts',
];

/**
 * Files that load the whole machine: three server processes and a database under writers and
 * readers, SIGKILLed on a schedule. Alone, their schedule means what it says.
 */
const SERIAL = ['test/multinode/cluster.test.ts', 'test/multinode/postgres-kill.test.ts'];

/**
 * Files run at once. Much of a file's time is waiting (child processes starting,
 * PostgreSQL round trips, servers' timers): with two the run used 1.2 of the 2 cores, and
 * three were faster (376-381 s of vitest on a quiet machine, against 403-423 s with two).
 * Three first showed races in two tests, both since understood and fixed (the console's
 * paging read its list before a re-render; a producer test's own timers made its appends
 * out of order after an event-loop stall, which the stream then held as made).
 */
const WORKERS = 3;

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: WORKERS,
    // Files share their worker process: starting a fresh one for each file cost about 100 s
    // of the run's 7 minutes. No test sets the environment or mocks a module.
    isolate: false,
    sequence: { sequencer: LongFirst },
    // expect.poll waits for an event, as `until` does (test/helpers/waits.ts): its default
    // of 1 s was a wall-clock bound a loaded machine could reach without a bug.
    expect: { poll: { timeout: EVENT_TIMEOUT_MS } },
    setupFiles: ['test/support/seed-report.ts'],
    reporters: ['default', './test/support/failure-summary.ts'],
    projects: [
      {
        extends: true,
        test: {
          name: 'main',
          include: ['test/**/*.test.ts'],
          exclude: [...USES_POSTGRES, ...SERIAL],
          maxWorkers: WORKERS,
        },
      },
      {
        extends: true,
        test: { name: 'postgres-engine', include: USES_POSTGRES, globalSetup: POSTGRES_SETUP, maxWorkers: WORKERS },
      },
      {
        extends: true,
        test: { name: 'postgres', include: AGAIN_ON_POSTGRES, globalSetup: POSTGRES_SETUP, maxWorkers: WORKERS, env: { RILL_TEST_STORE: 'postgres' } },
      },
      {
        extends: true,
        test: { name: 'serial', include: SERIAL, globalSetup: POSTGRES_SETUP, maxWorkers: 1, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
