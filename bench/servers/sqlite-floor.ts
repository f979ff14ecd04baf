/**
 * The SQLite floor: the least a group commit through SQLite costs, as DESIGN.md has rill
 * store (better-sqlite3, WAL, synchronous NORMAL, the WAL fdatasynced from the thread
 * pool before answering; group-commit.ts). Each batch of POST bodies is one transaction
 * of one INSERT per body into a plain rowid table, with rill's checkpoint setting.
 * No stream rows, no index, no producers, no reads: no real server on SQLite can be
 * this cheap, so rill's distance from it is what its own bookkeeping costs.
 * Usage: node sqlite-floor.js PORT DATA_DIR
 */
import Database from 'better-sqlite3';
import { openSync } from 'node:fs';
import { join } from 'node:path';
import { serveGroupCommit } from './group-commit.js';

const path = join(process.argv[3]!, 'floor.db');
const db = new Database(path);
db.pragma('journal_mode = WAL');
db.pragma('synchronous = NORMAL');
db.pragma('wal_autocheckpoint = 250');
db.exec('CREATE TABLE IF NOT EXISTS appends (id INTEGER PRIMARY KEY, data BLOB NOT NULL)');
const insert = db.prepare<[Buffer]>('INSERT INTO appends (data) VALUES (?)');
const writeAll = db.transaction((bodies: Buffer[]) => {
  for (const body of bodies) insert.run(body);
});
// The CREATE TABLE above was written to the WAL, so the file exists from here on.
let wal: number | null = null;

serveGroupCommit(Number(process.argv[2]), {
  write: writeAll,
  fd: () => (wal ??= openSync(`${path}-wal`, 'r')),
});
