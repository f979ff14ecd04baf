/**
 * vitest globalSetup: one PostgreSQL server for the whole `vitest run`, started before any test
 * file and stopped after the last. Test files get a fresh database of their own on it with
 * sharedDatabase() from ./postgres.ts (which reads the admin URL with inject('postgresUrl')).
 * If the server cannot start, the run fails here, loudly: PostgreSQL tests are never skipped.
 *
 * With `projects` that inherit the root config (extends: true), vitest runs this setup once per
 * project, possibly from separate module instances: they share one server through globalThis,
 * and the last teardown stops it.
 */
import type { TestProject } from 'vitest/node';
import { startPostgres, type PostgresServer } from './postgres.js';

interface Shared {
  server: Promise<PostgresServer>;
  users: number;
}

const KEY = Symbol.for('rill.test.postgres-global');
const store = globalThis as unknown as Record<symbol, Shared | undefined>;

export async function setup(project: TestProject): Promise<void> {
  const shared = (store[KEY] ??= { server: startPostgres(), users: 0 });
  shared.users += 1;
  const server = await shared.server;
  project.provide('postgresUrl', server.adminUrl);
}

export async function teardown(): Promise<void> {
  const shared = store[KEY];
  if (!shared) return;
  shared.users -= 1;
  if (shared.users > 0) return;
  store[KEY] = undefined;
  const server = await shared.server.catch(() => undefined);
  await server?.stop();
}
