/**
 * Real PostgreSQL servers for tests. startPostgres(), createDatabase() and PostgresServer live in
 * bench/postgres.ts (the bench starts a server too, and is compiled on its own from bench/); read
 * its header comment. Here, what only the tests need:
 *
 * - sharedDatabase(): a fresh database on the one server that test/helpers/postgres-global.ts
 *   (vitest globalSetup) starts for the whole run.
 *
 * Servers started for tests run with fsync=off (startPostgres's default), for speed.
 */
import { createDatabase } from '../../bench/postgres.js';

export {
  createDatabase,
  POSTGRES_PASSWORD,
  POSTGRES_USER,
  startPostgres,
  type PostgresServer,
  type StartPostgresOptions,
} from '../../bench/postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Admin URL (database `postgres`) of the PostgreSQL server shared by the whole run. */
    postgresUrl: string;
  }
}

/**
 * A fresh database on the PostgreSQL server shared by the whole `vitest run`
 * (started by test/helpers/postgres-global.ts); returns its URL.
 */
export async function sharedDatabase(): Promise<string> {
  const { inject } = await import('vitest');
  const adminUrl = inject('postgresUrl');
  if (!adminUrl) {
    throw new Error('sharedDatabase(): no shared PostgreSQL server: test/helpers/postgres-global.ts must be in globalSetup of vitest.config.ts');
  }
  return createDatabase(adminUrl);
}
