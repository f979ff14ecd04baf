/**
 * What keeps a large append from holding the event loop longer than it must
 * (docs/decisions.md, "Large appends on the event loop"): WAL checkpoints run on a thread
 * of their own (src/storage/sqlite/checkpoints.ts), an append of 1 MiB or more goes
 * straight to the index in its own commit, and a large commit's indexing of held appends
 * waits for the next turn instead of following it in the same one.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { DEFAULT_PRODUCER_SETTINGS } from '../../src/core/types.js';
import { v1StreamKey } from '../../src/protocol/ids.js';
import type { Txn } from '../../src/storage/executor.js';
import { SqliteStore, type SqliteStoreOptions } from '../../src/storage/sqlite/engine.js';
import { WalCheckpointer } from '../../src/storage/sqlite/checkpoints.js';
import { until } from '../helpers/waits.js';
import { appendRequest, createRequest, expectAppended, expectCreated } from './fixtures.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'rill-checkpoints-'));
  dirs.push(dir);
  return dir;
}

const MiB = 1024 * 1024;

/** A mebibyte of bytes that differ from every other of `seed`'s, so that a misplaced one shows. */
function block(seed: number): Buffer {
  const bytes = Buffer.alloc(MiB);
  for (let i = 0; i < bytes.length; i += 4) bytes.writeUInt32LE((seed * 7919 + i) >>> 0, i);
  return bytes;
}

it('with checkpoints on their thread, committed pages reach the database file while the store serves, and every byte reads back after reopening', async () => {
  const dir = dataDir();
  const options: SqliteStoreOptions = { dataDir: dir, producers: DEFAULT_PRODUCER_SETTINGS, checkpoints: 'thread' };
  const name = v1StreamKey('big');
  const store = new SqliteStore(options);
  expectCreated(await store.run('createStream', createRequest(name)));
  const databaseBytes = statSync(join(dir, 'rill.db')).size;
  const blocks = [1, 2, 3, 4].map(block);
  for (const data of blocks) expectAppended(await store.run('append', { name, request: appendRequest(data) }));
  // 4 MiB is far below the backstop at which the event loop's own connection would
  // checkpoint: only the thread copies pages into the database file.
  await until(() => statSync(join(dir, 'rill.db')).size >= databaseBytes + 4 * MiB, 'the checkpoint thread to copy the appends into rill.db');
  const stream = (await store.getStream(name))!;
  expect((await store.readRange(stream, 0, 8 * MiB)).equals(Buffer.concat(blocks))).toBe(true);
  await store.close();

  const reopened = new SqliteStore(options);
  try {
    const again = (await reopened.getStream(name))!;
    expect(again.tail).toBe(4 * MiB);
    expect((await reopened.readRange(again, 0, 8 * MiB)).equals(Buffer.concat(blocks))).toBe(true);
  } finally {
    await reopened.close();
  }
});

it('a store starts using the checkpoint thread only once a mebibyte has been committed, and closes at once when it never did', async () => {
  const dir = dataDir();
  const store = new SqliteStore({ dataDir: dir, producers: DEFAULT_PRODUCER_SETTINGS });
  await store.close();
  const dbPath = join(dir, 'rill.db');

  const idle = new WalCheckpointer(dbPath);
  idle.committed(MiB - 1);
  expect(idle.onThread).toBe(false);
  await idle.close();
  expect(idle.onThread).toBe(false);

  const busy = new WalCheckpointer(dbPath);
  busy.committed(MiB - 1);
  expect(busy.onThread).toBe(false);
  busy.committed(1);
  expect(busy.onThread).toBe(true);
  await busy.close();
  expect(busy.lastFailure).toBeNull();
});

/** Notes, for each slice of indexing, whether it ran inside a batch's transaction call or in a turn of its own. */
class IndexingWatch extends SqliteStore {
  inBatch = false;
  readonly slices: Array<'with its batch' | 'in a later turn'> = [];

  protected override transact(body: (txn: Txn) => void): void {
    this.inBatch = true;
    try {
      super.transact(body);
    } finally {
      this.inBatch = false;
    }
  }

  protected override indexSealedSlice(maxRows: number): void {
    this.slices.push(this.inBatch ? 'with its batch' : 'in a later turn');
    super.indexSealedSlice(maxRows);
  }
}

it('a large commit leaves its indexing to a later turn; a small one that fills the seal indexes at once', async () => {
  const dir = dataDir();
  // Seals after 2 appends, or after 1 MiB of large ones; every append is held (none indexed by its own commit).
  const recentIndexing = { sealRows: 2, sealBytes: 64 * MiB, sealLargeBytes: MiB, stepRows: 16, directBytes: 64 * MiB };
  const store = new IndexingWatch({ dataDir: dir, producers: DEFAULT_PRODUCER_SETTINGS, recentIndexing });
  try {
    const name = v1StreamKey('s');
    expectCreated(await store.run('createStream', createRequest(name)));
    for (const text of ['a', 'b']) expectAppended(await store.run('append', { name, request: appendRequest(text) }));
    await until(() => store.recentRows === 0, 'the small appends to be indexed');
    expect(store.slices).toEqual(['with its batch']);

    const large = block(9);
    expectAppended(await store.run('append', { name, request: appendRequest(large) }));
    await until(() => store.recentRows === 0, 'the large append to be indexed');
    expect(store.slices).toEqual(['with its batch', 'in a later turn']);
    const stream = (await store.getStream(name))!;
    expect((await store.readRange(stream, 0, 2 * MiB)).equals(Buffer.concat([Buffer.from('ab'), large]))).toBe(true);
  } finally {
    await store.close();
  }
});

it('an append of 1 MiB or more is indexed by its own commit, after the held appends of its stream, and reads back in order before and after reopening', async () => {
  const dir = dataDir();
  const options: SqliteStoreOptions = { dataDir: dir, producers: DEFAULT_PRODUCER_SETTINGS };
  const store = new SqliteStore(options);
  const [name, other] = [v1StreamKey('s'), v1StreamKey('other')];
  const large = block(3);
  let expected: Buffer;
  try {
    for (const stream of [name, other]) expectCreated(await store.run('createStream', createRequest(stream)));
    // Held: two small appends of `name` and one of `other`, committed in one batch with the large one.
    const batch = ['a', 'b'].map((text) => store.run('append', { name, request: appendRequest(text) }));
    batch.push(store.run('append', { name: other, request: appendRequest('x') }));
    batch.push(store.run('append', { name, request: appendRequest(large) }));
    (await Promise.all(batch)).forEach(expectAppended);
    expectAppended(await store.run('append', { name, request: appendRequest('c') }));
    // Held now: `other`'s append and the one after the large append; `name`'s first two went to the index with it.
    expect(store.recentRows).toBe(2);
    expected = Buffer.concat([Buffer.from('ab'), large, Buffer.from('c')]);
    const stream = (await store.getStream(name))!;
    expect((await store.readRange(stream, 0, 2 * MiB)).equals(expected)).toBe(true);
  } finally {
    await store.close();
  }
  const reopened = new SqliteStore(options);
  try {
    const stream = (await reopened.getStream(name))!;
    expect((await reopened.readRange(stream, 0, 2 * MiB)).equals(expected)).toBe(true);
    expect((await reopened.readRange((await reopened.getStream(other))!, 0, 10)).toString()).toBe('x');
  } finally {
    await reopened.close();
  }
});
