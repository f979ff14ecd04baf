/**
 * The upstream Durable Streams conformance suite (@durable-streams/server-conformance-tests
 * 0.3.6), run unmodified against the real rill binary on PostgreSQL (a fresh database of
 * the run's PostgreSQL server), its subscription group included. Configured as on SQLite
 * (test/helpers/conformance.ts).
 */
import { afterAll, beforeAll, describe } from 'vitest';
import { runConformanceTests } from '@durable-streams/server-conformance-tests';
import { sharedDatabase } from './helpers/postgres.js';
import { CONFORMANCE_SERVER_ARGS, conformanceConfig } from './helpers/conformance.js';
import { removeDir, startServer, type RunningServer } from './helpers/server.js';

const config = conformanceConfig();
let server: RunningServer;

beforeAll(async () => {
  // A process of its own, as the suite's servers are deployed. In the test's own process, on a
  // loaded machine, one full run had a PUT answered ECONNRESET (a pooled keep-alive connection
  // closed as the suite reused it); it never recurred alone. See docs/testing.md.
  server = await startServer({ process: true, postgresUrl: await sharedDatabase(), args: CONFORMANCE_SERVER_ARGS });
  config.baseUrl = server.url;
});

afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

describe('Durable Streams conformance (upstream 0.3.6) on PostgreSQL', () => {
  runConformanceTests(config);
});
