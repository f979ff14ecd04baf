/**
 * A data directory written by the rill of schema 3 (one `recent_chunks` row per append,
 * every append writing its stream's row) opens in this one with nothing lost: appends a
 * crash left unindexed there are indexed by the upgrade, and rows of deleted streams are
 * dropped. Schemas 8 and 9 get their message ordinals (records, then the appends of
 * streams without records) counted once. A directory of a newer schema than this rill
 * knows is refused.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, expect, it } from 'vitest';
import { DEFAULT_PRODUCER_SETTINGS } from '../../src/core/types.js';
import { v1StreamKey } from '../../src/protocol/ids.js';
import { SqliteStore } from '../../src/storage/sqlite/engine.js';
import { SCHEMA_VERSION } from '../../src/storage/sqlite/schema.js';
import { removeDir, tempDataDir } from '../helpers/server.js';
import { appendRequest, createRequest } from './fixtures.js';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach(removeDir));

const open = (dataDir: string) => new SqliteStore({ dataDir, producers: DEFAULT_PRODUCER_SETTINGS });

/** Turns a closed data directory back into schema 3, as a crash of that rill left it. */
function asSchema3WithCrashLeftovers(dataDir: string, streamId: number, tail: number): void {
  const db = new Database(join(dataDir, 'rill.db'));
  try {
    db.exec(`
      DROP TABLE subscriptions;
      DROP TABLE subscription_links;
      DROP TABLE recent_batches;
      ALTER TABLE chunks DROP COLUMN bounds;
      ALTER TABLE streams DROP COLUMN record_first;
      ALTER TABLE streams DROP COLUMN record_next;
      ALTER TABLE producers DROP COLUMN receipt_record_start;
      ALTER TABLE producers DROP COLUMN receipt_record_next;
      CREATE TABLE recent_chunks (id INTEGER PRIMARY KEY AUTOINCREMENT, stream_id INTEGER NOT NULL, start INTEGER NOT NULL, data BLOB NOT NULL);
      ALTER TABLE buckets DROP COLUMN settings; DROP TABLE cold_segments; DROP INDEX streams_age_due; ALTER TABLE streams DROP COLUMN retention_policy; ALTER TABLE streams DROP COLUMN time_marks; ALTER TABLE streams DROP COLUMN age_due_ms;
    `);
    // Schema 3 wrote the tail with every append, so the row says where its last one ended.
    db.prepare('UPDATE streams SET tail = ? WHERE id = ?').run(tail, streamId);
    const insert = db.prepare('INSERT INTO recent_chunks (stream_id, start, data) VALUES (?, ?, ?)');
    insert.run(streamId, tail - 2, Buffer.from('cd'));
    // A row of a stream deleted since (ids are never reused): the upgrade must drop it.
    insert.run(streamId + 1000, 0, Buffer.from('ghost'));
    db.pragma('user_version = 3');
  } finally {
    db.close();
  }
}

it('upgrades a schema 3 directory, indexing what its crash left recent', async () => {
  const dataDir = tempDataDir();
  dirs.push(dataDir);
  const name = v1StreamKey('old');
  let store = open(dataDir);
  await store.run('createStream', createRequest(name, { data: Buffer.from('ab') }));
  const { id } = (await store.getStream(name))!;
  await store.close();
  asSchema3WithCrashLeftovers(dataDir, id, 4);

  store = open(dataDir);
  try {
    const stream = (await store.getStream(name))!;
    expect(stream.tail).toBe(4);
    expect((await store.readRange(stream, 0, 100)).toString()).toBe('abcd');
    expect(await store.run('append', { name, request: appendRequest('e') })).toMatchObject({ kind: 'appended', receipt: { start: 4, next: 5 } });
  } finally {
    await store.close();
  }
  const db = new Database(join(dataDir, 'rill.db'), { readonly: true });
  try {
    expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    expect(db.prepare(`SELECT count(*) AS n FROM sqlite_master WHERE name = 'recent_chunks'`).get()).toEqual({ n: 0 });
    expect(db.prepare('SELECT count(*) AS n FROM chunks WHERE stream_id NOT IN (SELECT id FROM streams)').get()).toEqual({ n: 0 });
  } finally {
    db.close();
  }
});

it('upgrades a schema 8 directory: retained records are numbered from the earliest offset, receipts keep no range', async () => {
  const dataDir = tempDataDir();
  dirs.push(dataDir);
  const name = v1StreamKey('json-before');
  const json = { contentType: 'application/json' };
  let store = open(dataDir);
  await store.run('createStream', createRequest(name, { ...json, data: Buffer.from('"a"\n"b"\n"c"\n') }));
  await store.run('append', { name, request: appendRequest('"d"\n', { ...json, producer: { id: 'p', epoch: 0, seq: 0 } }) });
  await store.run('publishSnapshot', { name, request: { offset: 4, contentType: 'text/plain', digest: 'x', match: null, incarnation: null }, body: Buffer.from('s') });
  await store.run('setRetention', { name, request: { offset: 4, incarnation: null } });
  await store.close();
  const db = new Database(join(dataDir, 'rill.db'));
  db.exec(`ALTER TABLE streams DROP COLUMN record_first; ALTER TABLE streams DROP COLUMN record_next;
    ALTER TABLE producers DROP COLUMN receipt_record_start; ALTER TABLE producers DROP COLUMN receipt_record_next;
    ALTER TABLE buckets DROP COLUMN settings; DROP TABLE cold_segments; DROP INDEX streams_age_due; ALTER TABLE streams DROP COLUMN retention_policy; ALTER TABLE streams DROP COLUMN time_marks; ALTER TABLE streams DROP COLUMN age_due_ms;`);
  db.pragma('user_version = 8');
  db.close();

  store = open(dataDir);
  try {
    expect(await store.getStream(name)).toMatchObject({ recordFirst: 0, recordNext: 3, earliestOffset: 4 });
    expect(await store.run('append', { name, request: appendRequest('"d"\n', { ...json, producer: { id: 'p', epoch: 0, seq: 0 } }) })).toMatchObject({ kind: 'duplicate', receipt: { records: null } });
    expect(await store.run('append', { name, request: appendRequest('"e"\n', json) })).toMatchObject({ kind: 'appended', receipt: { records: { start: 3, next: 4 } } });
  } finally {
    await store.close();
  }
});

it('upgrades a schema 9 directory: streams without records get their retained appends counted, a fork its inherited ones too; JSON ordinals stay', async () => {
  const dataDir = tempDataDir();
  dirs.push(dataDir);
  const bin = v1StreamKey('bin-before');
  const fork = v1StreamKey('bin-fork-before');
  const json = v1StreamKey('json-kept');
  const jsonType = { contentType: 'application/json' };
  let store = open(dataDir);
  await store.run('createStream', createRequest(bin, { data: Buffer.from('aa') }));
  for (const body of ['bb', 'cc', 'dd']) await store.run('append', { name: bin, request: appendRequest(body) });
  await store.run('publishSnapshot', { name: bin, request: { offset: 2, contentType: 'text/plain', digest: 'x', match: null, incarnation: null }, body: Buffer.from('s') });
  await store.run('setRetention', { name: bin, request: { offset: 2, incarnation: null } });
  await store.run('append', { name: bin, request: appendRequest('ee') });
  await store.run('createStream', createRequest(fork, { fork: { sourceName: bin, offset: 5, subOffset: 0 }, data: Buffer.from('f') }));
  await store.run('createStream', createRequest(json, { ...jsonType, data: Buffer.from('1\n2\n') }));
  await store.run('publishSnapshot', { name: json, request: { offset: 2, contentType: 'text/plain', digest: 'x', match: null, incarnation: null }, body: Buffer.from('s') });
  await store.run('setRetention', { name: json, request: { offset: 2, incarnation: null } });
  await store.close();
  const db = new Database(join(dataDir, 'rill.db'));
  // Schema 9 kept 0 and 0 on streams without records, and wrote their rows on no plain append.
  db.exec(`UPDATE streams SET record_first = 0, record_next = 0 WHERE content_type <> 'application/json'; ALTER TABLE buckets DROP COLUMN settings; DROP TABLE cold_segments; DROP INDEX streams_age_due; ALTER TABLE streams DROP COLUMN retention_policy; ALTER TABLE streams DROP COLUMN time_marks; ALTER TABLE streams DROP COLUMN age_due_ms;`);
  db.prepare('UPDATE streams SET tail = 2 WHERE name = ?').run(bin);
  db.pragma('user_version = 9');
  db.close();

  store = open(dataDir);
  try {
    // bin retains bb cc dd ee; the fork reads bb and c of it, then its own f.
    expect(await store.getStream(bin)).toMatchObject({ tail: 10, earliestOffset: 2, recordFirst: 0, recordNext: 4 });
    expect(await store.getStream(fork)).toMatchObject({ recordFirst: 0, recordNext: 3 });
    expect(await store.getStream(json)).toMatchObject({ recordFirst: 1, recordNext: 2 });
    expect((await store.heldTotals()).messages).toBe(4 + 3 + 1);
    await store.run('append', { name: bin, request: appendRequest('g') });
    expect(await store.getStream(bin)).toMatchObject({ recordFirst: 0, recordNext: 5 });
  } finally {
    await store.close();
  }
  const reopened = open(dataDir);
  try {
    expect(await reopened.getStream(bin)).toMatchObject({ tail: 11, recordFirst: 0, recordNext: 5 });
  } finally {
    await reopened.close();
  }
});

it('refuses a directory written by a newer rill', async () => {
  const dataDir = tempDataDir();
  dirs.push(dataDir);
  await open(dataDir).close();
  const db = new Database(join(dataDir, 'rill.db'));
  db.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
  db.close();
  expect(() => open(dataDir)).toThrow(/newer rill/);
});
