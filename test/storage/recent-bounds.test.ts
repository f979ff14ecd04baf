/**
 * Appends wait in memory until they are indexed (storage/sqlite/recent.ts). Batches much
 * larger than an indexing slice must not outrun indexing: what is held stays bounded,
 * and every byte stays readable while and after it is indexed.
 */
import { afterEach, expect, test } from 'vitest';
import { DEFAULT_PRODUCER_SETTINGS } from '../../src/core/types.js';
import { SqliteStore } from '../../src/storage/sqlite/engine.js';
import { removeDir, tempDataDir } from '../helpers/server.js';
import { appendRequest, createRequest, readAll } from './fixtures.js';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach(removeDir));

const SEAL_ROWS = 16;
const BATCH = 40;
const BATCHES = 60;

test('batches larger than an indexing slice keep held appends bounded and readable', async () => {
  const dataDir = tempDataDir('rill-recent-bounds-');
  dirs.push(dataDir);
  const store = new SqliteStore({ dataDir, producers: DEFAULT_PRODUCER_SETTINGS, recentIndexing: { sealRows: SEAL_ROWS, sealBytes: 1 << 30, stepRows: 1 } });
  const names = ['a', 'b', 'c'];
  for (const name of names) await store.run('createStream', createRequest(name));
  const expected = new Map(names.map((n) => [n, ''] as [string, string]));
  let most = 0;
  for (let batch = 0; batch < BATCHES; batch++) {
    // Queued in one turn of the event loop, so they commit as one batch.
    const writes = Array.from({ length: BATCH }, (_, i) => {
      const name = names[i % names.length]!;
      const part = `[${batch}.${i}]`;
      expected.set(name, expected.get(name) + part);
      return store.run('append', { name, request: appendRequest(part) });
    });
    for (const outcome of await Promise.all(writes)) expect(outcome.kind).toBe('appended');
    most = Math.max(most, store.recentRows);
  }
  // At most two seals' worth and one batch: 2 * (16 + 40) + 40.
  expect(most).toBeLessThanOrEqual(2 * (SEAL_ROWS + BATCH) + BATCH);
  for (const name of names) expect((await readAll(store, name)).toString()).toBe(expected.get(name));
  await store.close();
  const reopened = new SqliteStore({ dataDir, producers: DEFAULT_PRODUCER_SETTINGS });
  for (const name of names) expect((await readAll(reopened, name)).toString()).toBe(expected.get(name));
  await reopened.close();
});
