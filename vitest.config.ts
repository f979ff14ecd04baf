import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // One PostgreSQL server for the run (sharedDatabase() in test/helpers/postgres.ts).
    globalSetup: ['test/helpers/postgres-global.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    reporters: ['default'],
    projects: [
      { extends: true, test: { name: 'main', include: ['test/**/*.test.ts'] } },
      {
        // The HTTP and client tiers again, every server they start on PostgreSQL (test/helpers/server.ts).
        extends: true,
        test: {
          name: 'postgres',
          include: ['test/http/**/*.test.ts', 'test/client/**/*.test.ts'],
          // SQLite's own settings (--stream-cache) and files; and the processor crash test, whose
          // SIGKILLs test the client's fencing, not the engine (PostgreSQL under SIGKILL:
          // test/multinode/postgres-kill.test.ts), and which took 130 of the run's 800 test-file seconds here.
          exclude: ['test/http/stream-cache.test.ts', 'test/client/processor-crash.test.ts'],
          env: { RILL_TEST_STORE: 'postgres' },
        },
      },
    ],
  },
});
