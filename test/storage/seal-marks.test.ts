/**
 * When held appends are sealed for indexing (storage/sqlite/recent.ts): small appends wait
 * for the row or byte mark, large ones for the lower mark of large appends, so that
 * holding many small appends (which saves an index page per stream) does not also let
 * large ones fill memory; spread over many streams, the row mark grows with them. Every
 * byte stays readable either way, and after a reopen.
 */
import { afterEach, expect, test } from 'vitest';
import { DEFAULT_PRODUCER_SETTINGS } from '../../src/core/types.js';
import { SqliteStore, type RecentIndexing } from '../../src/storage/sqlite/engine.js';
import { LARGE_APPEND_BYTES } from '../../src/storage/sqlite/recent.js';
import { removeDir, tempDataDir } from '../helpers/server.js';
import { appendRequest, createRequest, readAll } from './fixtures.js';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach(removeDir));

// Large appends seal at 4 of them; small ones would need 1,000 rows or 1 MB.
const MARKS: RecentIndexing = { sealRows: 1000, sealBytes: 1 << 20, sealLargeBytes: 4 * LARGE_APPEND_BYTES, stepRows: 1000 };

async function openStore(recentIndexing = MARKS, names = ['s']): Promise<SqliteStore> {
  const dataDir = tempDataDir('rill-seal-marks-');
  dirs.push(dataDir);
  const store = new SqliteStore({ dataDir, producers: DEFAULT_PRODUCER_SETTINGS, recentIndexing });
  for (const name of names) await store.run('createStream', createRequest(name));
  return store;
}

async function append(store: SqliteStore, body: string, name = 's'): Promise<void> {
  expect((await store.run('append', { name, request: appendRequest(body) })).kind).toBe('appended');
}

test('small appends stay held below the row and byte marks', async () => {
  const store = await openStore();
  let expected = '';
  // 200 appends of LARGE_APPEND_BYTES - 1 bytes (819,000): past the large mark in bytes, none large.
  for (let i = 0; i < 200; i++) {
    const body = String(i % 10).repeat(LARGE_APPEND_BYTES - 1);
    expected += body;
    await append(store, body);
  }
  expect(store.recentRows).toBe(200);
  expect((await readAll(store, 's')).toString()).toBe(expected);
  await store.close();
});

test('large appends are sealed and indexed at the mark of large appends', async () => {
  const store = await openStore();
  let expected = '';
  let most = 0;
  for (let i = 0; i < 20; i++) {
    const body = String.fromCharCode(97 + i).repeat(LARGE_APPEND_BYTES);
    expected += body;
    await append(store, body);
    most = Math.max(most, store.recentRows);
  }
  // The 4th large append reaches the mark; the seal is indexed in one step (stepRows 1000).
  expect(most).toBeLessThanOrEqual(4);
  expect(store.recentRows).toBeLessThan(4);
  expect((await readAll(store, 's')).toString()).toBe(expected);
  const dataDir = dirs[dirs.length - 1]!;
  await store.close();
  const reopened = new SqliteStore({ dataDir, producers: DEFAULT_PRODUCER_SETTINGS });
  expect((await readAll(reopened, 's')).toString()).toBe(expected);
  await reopened.close();
});

test('spread over many streams, the row mark grows with them up to its most', async () => {
  // 8 rows, or 4 a stream held, up to 40. Each append commits alone and a seal is
  // indexed at once, so the most held is one below the mark.
  const spread: RecentIndexing = { sealRows: 8, spreadRows: { perStream: 4, max: 40 }, sealBytes: 1 << 30, stepRows: 1000 };
  const mostHeld = async (streams: number): Promise<number> => {
    const names = Array.from({ length: streams }, (_, i) => `s${i}`);
    const store = await openStore(spread, names);
    const expected = new Map(names.map((n) => [n, '']));
    let most = 0;
    for (let i = 0; i < 100; i++) {
      const name = names[i % streams]!;
      expected.set(name, `${expected.get(name)}[${i}]`);
      await append(store, `[${i}]`, name);
      most = Math.max(most, store.recentRows);
    }
    for (const name of names) expect((await readAll(store, name)).toString()).toBe(expected.get(name));
    await store.close();
    return most;
  };
  expect(await mostHeld(1)).toBe(7);
  expect(await mostHeld(5)).toBe(19);
  expect(await mostHeld(20)).toBe(39);
});
