/**
 * Group commit while both WAL fsyncs are in flight: a commit made then could only wait
 * for one of them to end, so the commands that arrive meanwhile are held uncommitted and
 * then share one commit and one fsync. The fsync is a stand-in the test holds; what is
 * committed is read through a second SQLite connection, as another process would.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { protocolError } from '../../src/protocol/errors.js';
import { v1StreamKey } from '../../src/protocol/ids.js';
import { storageRefusal } from '../../src/storage/errors.js';
import type { SqliteStore } from '../../src/storage/sqlite/engine.js';
import { appendRequest, createRequest } from './fixtures.js';
import { HeldStores, ticks, watch, type HeldFlush } from './held-flush.js';

const stores = new HeldStores();
afterEach(() => stores.closeAll());

const open = () => stores.open('rill-held-commits-');

/** Committed batches of appends, as a second connection sees them. */
function committedBatches(dir: string): number {
  const reader = new Database(join(dir, 'rill.db'), { readonly: true });
  try {
    return (reader.prepare('SELECT count(*) AS n FROM recent_batches').get() as { n: number }).n;
  } finally {
    reader.close();
  }
}

const name = v1StreamKey('held');
const append = (store: SqliteStore, data: string) => store.run('append', { name, request: appendRequest(data) });

/** Holds the disk and starts two appends, one turn apart, so that both fsyncs are in flight. */
async function fillBothFsyncs(store: SqliteStore, disk: HeldFlush, dir: string) {
  await store.run('createStream', createRequest(name));
  disk.hold();
  const firstAppend = append(store, 'a');
  await ticks();
  const secondAppend = append(store, 'b');
  await ticks();
  expect(disk.heldCount).toBe(2);
  expect(committedBatches(dir)).toBe(2);
  return [firstAppend, secondAppend] as const;
}

describe('commands arriving while both fsyncs are in flight', () => {
  it('wait uncommitted, then commit together once an fsync ends, and are answered after theirs', async () => {
    const { store, disk, dir } = open();
    const [first, second] = (await fillBothFsyncs(store, disk, dir)).map(watch);
    const third = watch(append(store, 'c'));
    await ticks();
    const fourth = watch(append(store, 'd'));
    await ticks();
    // No third fsync could start, so nothing more was committed.
    expect(disk.heldCount).toBe(2);
    expect(committedBatches(dir)).toBe(2);
    disk.releaseFirst(1);
    await ticks();
    expect(first!.answered()).toBe(true);
    // The two held appends: one commit, one fsync for both, not yet durable.
    expect(committedBatches(dir)).toBe(3);
    expect(disk.heldCount).toBe(2);
    expect(third.answered() || fourth.answered()).toBe(false);
    disk.release();
    await ticks();
    expect([second!.answered(), third.answered(), fourth.answered()]).toEqual([true, true, true]);
    const receipts = [first!, second!, third, fourth].map((w) => w.value());
    expect(receipts.map((r) => (r.kind === 'appended' ? r.receipt.start : -1))).toEqual([0, 1, 2, 3]);
  });

  it('are answered with a refusal, not left waiting, when the fsync they waited for fails', async () => {
    const { store, disk, dir } = open();
    const both = Promise.allSettled(await fillBothFsyncs(store, disk, dir));
    const held = store.run('append', { name, request: appendRequest('c') }).then(
      () => null,
      (error: unknown) => storageRefusal(error),
    );
    await ticks();
    disk.releaseFirst(1, Object.assign(new Error('EIO: i/o error'), { code: 'EIO' }));
    await ticks();
    const refusal = await held;
    expect(refusal?.code).toBe(protocolError('STORAGE_UNAVAILABLE', '').code);
    // The two appends the failed fsyncs covered are refused too: their outcome is unknown.
    disk.release();
    expect((await both).map((r) => r.status)).toEqual(['rejected', 'rejected']);
  });
});
