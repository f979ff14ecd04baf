/**
 * The SQLite database holds the webhook signing keys and the wake-token secret, so it and
 * every copy of it are made readable by their owner only (0600), whatever the umask.
 * SQLite gives a database's `-wal`, `-shm` and journal files the mode of the database
 * file itself, so making that file private before SQLite opens it covers them too.
 */
import { chmodSync, closeSync, existsSync, openSync } from 'node:fs';

export const PRIVATE_FILE_MODE = 0o600;

/** Creates `path` empty if it is missing, and sets its mode to 0600 (an existing file's too). */
export function makePrivateFile(path: string): void {
  closeSync(openSync(path, 'a', PRIVATE_FILE_MODE));
  chmodSync(path, PRIVATE_FILE_MODE);
}

/**
 * Before SQLite opens `dbPath`: the database file exists with mode 0600, and the WAL and
 * shared-memory files a server made before this rule are made private as well.
 */
export function makeDatabasePrivate(dbPath: string): void {
  makePrivateFile(dbPath);
  for (const companion of [`${dbPath}-wal`, `${dbPath}-shm`]) {
    if (existsSync(companion)) chmodSync(companion, PRIVATE_FILE_MODE);
  }
}
