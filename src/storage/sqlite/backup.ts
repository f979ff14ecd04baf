/**
 * Online backup and restore of a SQLite data directory, beside a running server.
 *
 * A backup reads `rill.db` through a connection of its own with SQLite's online backup
 * API: WAL mode lets it read while the server writes, and what it copies is one committed
 * state, as a crash would leave it (appends held in `recent_batches` included), so the
 * server recovers it as after a restart. Every write acknowledged before the backup
 * began was committed before it, so the copy holds it.
 *
 * SQLite restarts a stepwise backup when another connection writes the source between
 * steps; under steady writes it would never end. The copy therefore goes in steps (for
 * progress) only until the first restart, and then in one step, which holds a read
 * snapshot for its whole length (the server's writes go on; its WAL waits for the
 * checkpoint).
 */
import { closeSync, createReadStream, createWriteStream, existsSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import Database from 'better-sqlite3';
import { checkDataFile } from './check.js';
import { lockDataDir } from './dir-lock.js';
import { makePrivateFile } from './private-files.js';

export const DATA_FILE = 'rill.db';
/** Pages per step while stepping (4 KB pages: 4 MB). */
const PAGES_PER_STEP = 1024;
const ALL_PAGES = 0x7fffffff;

export type Progress = (done: number, total: number) => void;

function fsyncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Copies the data directory's database to `file` (which must not exist); answers the pages copied. */
export async function backupDataDir(dataDir: string, file: string, progress: Progress = () => {}): Promise<{ pages: number; bytes: number }> {
  const source = join(dataDir, DATA_FILE);
  if (!existsSync(source)) throw new Error(`${dataDir} holds no rill database (${DATA_FILE})`);
  if (existsSync(file)) throw new Error(`${file} exists; a backup never overwrites a file`);
  const partial = `${file}.partial`;
  rmSync(partial, { force: true });
  // SQLite copies into the file as it is, so the copy is private from its first page.
  makePrivateFile(partial);
  const db = new Database(source, { readonly: true, fileMustExist: true });
  let lastRemaining = Infinity;
  try {
    db.pragma('busy_timeout = 5000');
    const result = await db.backup(partial, {
      progress({ totalPages, remainingPages }) {
        progress(totalPages - remainingPages, totalPages);
        const restarted = remainingPages >= lastRemaining;
        lastRemaining = remainingPages;
        return restarted ? ALL_PAGES : PAGES_PER_STEP;
      },
    });
    progress(result.totalPages, result.totalPages);
    fsyncPath(partial);
    renameSync(partial, file);
    fsyncPath(dirname(resolve(file)));
    return { pages: result.totalPages, bytes: statSync(file).size };
  } catch (error) {
    rmSync(partial, { force: true });
    throw error;
  } finally {
    db.close();
  }
}

export interface RestoreOptions {
  /** Replace a database the directory already holds. */
  force?: boolean;
}

/**
 * Restores a backup into `dataDir`, which no server may have open (its lock is taken).
 * The backup must pass `rill check` first. The file is copied beside the database and
 * renamed over it, so a failed restore leaves the directory as it was.
 */
export async function restoreDataDir(file: string, dataDir: string, options: RestoreOptions = {}, progress: Progress = () => {}): Promise<void> {
  const report = checkDataFile(file);
  if (report.problems.length > 0) throw new Error(`${file} fails its check, so it is not restored:\n  ${report.problems.join('\n  ')}`);
  mkdirSync(dataDir, { recursive: true });
  const lock = lockDataDir(dataDir, 0);
  try {
    const target = join(dataDir, DATA_FILE);
    if (existsSync(target) && !options.force) throw new Error(`${dataDir} already holds a database; pass --force to replace it`);
    const incoming = `${target}.restoring`;
    const total = statSync(file).size;
    let done = 0;
    const reader = createReadStream(file);
    reader.on('data', (chunk) => progress((done += chunk.length), total));
    makePrivateFile(incoming);
    await pipeline(reader, createWriteStream(incoming));
    fsyncPath(incoming);
    // The replaced database's WAL and index belong to it, not to the restored file.
    rmSync(`${target}-wal`, { force: true });
    rmSync(`${target}-shm`, { force: true });
    renameSync(incoming, target);
    fsyncPath(dataDir);
  } finally {
    lock.close();
  }
}
