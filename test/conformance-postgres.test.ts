/**
 * The upstream Durable Streams conformance suite (@durable-streams/server-conformance-tests
 * 0.3.6), run unmodified against the real rill binary on PostgreSQL (a fresh database of
 * the run's PostgreSQL server). As on SQLite, the long-poll wait is shortened to 500 ms.
 */
import { afterAll, beforeAll, describe } from 'vitest';
import { runConformanceTests } from '@durable-streams/server-conformance-tests';
import { sharedDatabase } from './helpers/postgres.js';
import { removeDir, startServer, type ServerProcess } from './helpers/server.js';

const config = { baseUrl: '', longPollTimeoutMs: 500 };
let server: ServerProcess;

beforeAll(async () => {
  server = await startServer({ postgresUrl: await sharedDatabase(), args: ['--long-poll-timeout', '500ms'] });
  config.baseUrl = server.url;
});

afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

describe('Durable Streams conformance (upstream 0.3.6) on PostgreSQL', () => {
  runConformanceTests(config);
});
