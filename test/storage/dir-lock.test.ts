/**
 * One store per data directory (storage/sqlite/dir-lock.ts): a second store or server on
 * a directory in use is refused with a clear error instead of both writing it, and the
 * directory is free again once its holder closes, fails to open, or is killed.
 */
import { afterEach, expect, test } from 'vitest';
import { DEFAULT_PRODUCER_SETTINGS } from '../../src/core/types.js';
import { DataDirInUseError } from '../../src/storage/errors.js';
import { lockDataDir } from '../../src/storage/sqlite/dir-lock.js';
import { SqliteStore } from '../../src/storage/sqlite/engine.js';
import { SCHEMA_VERSION } from '../../src/storage/sqlite/schema.js';
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { removeDir, startServer, tempDataDir, type ServerProcess } from '../helpers/server.js';
import { appendRequest, createRequest, readAll } from './fixtures.js';

const dirs: string[] = [];
const servers: ServerProcess[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.kill();
  dirs.splice(0).forEach(removeDir);
});

function newDir(): string {
  const dir = tempDataDir('rill-dir-lock-');
  dirs.push(dir);
  return dir;
}

const open = (dataDir: string) => new SqliteStore({ dataDir, producers: DEFAULT_PRODUCER_SETTINGS });

test('a second store on an open directory is refused; after close it opens and reads the data', async () => {
  const dataDir = newDir();
  const first = open(dataDir);
  await first.run('createStream', createRequest('s'));
  expect((await first.run('append', { name: 's', request: appendRequest('kept') })).kind).toBe('appended');
  let refused: unknown;
  try {
    open(dataDir);
  } catch (error) {
    refused = error;
  }
  expect(refused).toBeInstanceOf(DataDirInUseError);
  expect((refused as DataDirInUseError).code).toBe('DATA_DIR_IN_USE');
  expect((refused as Error).message).toContain(dataDir);
  await first.close();
  const second = open(dataDir);
  expect((await readAll(second, 's')).toString()).toBe('kept');
  await second.close();
});

test('a store that fails to open leaves the directory free', async () => {
  const dataDir = newDir();
  const db = new Database(join(dataDir, 'rill.db'));
  db.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
  db.close();
  expect(() => open(dataDir)).toThrow(/newer rill/);
  // Taken at once (no wait): nothing of the failed store holds it.
  lockDataDir(dataDir, 0).close();
});

test('a second server on a directory in use exits with the reason; once the first is killed, one starts', async () => {
  const dataDir = newDir();
  const first = await startServer({ process: true, dataDir });
  servers.push(first);
  const stream = `${first.url}/v1/stream/s`;
  expect((await fetch(stream, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'durable' })).status).toBe(201);
  // A mistake of the operator: exit 2 (issue 36), naming the directory.
  await expect(startServer({ process: true, dataDir })).rejects.toThrow(/exited with 2[\s\S]*CONFIG: --data .*: the data directory is in use/);
  // SIGKILL: no close runs, the kernel drops the lock with the process.
  await first.kill();
  const next = await startServer({ process: true, dataDir });
  servers.push(next);
  const read = await fetch(`${next.url}/v1/stream/s?offset=-1`);
  expect(read.status).toBe(200);
  expect(await read.text()).toBe('durable');
});
