/**
 * Recent appends stored one row per batch (storage/sqlite/recent-batches.ts): the packed
 * form reads back exactly and refuses a cut row; a batch of large appends is split into
 * rows of at most 1 MiB (or one larger append), and a copy of the data directory taken
 * while they are still unindexed (what a power cut would leave) reopens with every byte.
 */
import { copyFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, expect, it } from 'vitest';
import { DEFAULT_PRODUCER_SETTINGS } from '../../src/core/types.js';
import { v1StreamKey } from '../../src/protocol/ids.js';
import { SqliteStore } from '../../src/storage/sqlite/engine.js';
import { packAppends, unpackAppends } from '../../src/storage/sqlite/recent-batches.js';
import { removeDir, tempDataDir } from '../helpers/server.js';
import { appendRequest, createRequest } from './fixtures.js';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach(removeDir));

function newDir(): string {
  const dir = tempDataDir();
  dirs.push(dir);
  return dir;
}

it('packs appends and reads them back exactly; a cut row is refused', () => {
  const appends = [
    { streamId: 7, start: 0, data: Buffer.from('first') },
    { streamId: 2 ** 40, start: 2 ** 52, data: Buffer.alloc(0) },
    { streamId: 7, start: 5, data: Buffer.from([0, 255, 10]) },
  ];
  const packed = packAppends(appends);
  expect(unpackAppends(packed)).toEqual(appends);
  expect(unpackAppends(Buffer.alloc(0))).toEqual([]);
  expect(() => unpackAppends(packed.subarray(0, packed.length - 1))).toThrow(/cut/);
  expect(() => unpackAppends(packed.subarray(0, 10))).toThrow(/cut/);
});

it('splits a batch of large appends into rows of at most 1 MiB, and a crash image keeps every byte', async () => {
  const dataDir = newDir();
  const name = v1StreamKey('large');
  // Sealed only far past what is written here, and none indexed by its own commit, so that the appends stay unindexed.
  const store = new SqliteStore({ dataDir, producers: DEFAULT_PRODUCER_SETTINGS, recentIndexing: { sealRows: 1e6, sealBytes: 1e9, stepRows: 256, directBytes: 1e9 } });
  const bodies = [600, 600, 2000, 1, 600].map((kib, i) => Buffer.alloc(kib * 1024, 65 + i));
  try {
    await store.run('createStream', createRequest(name));
    // Sent together, they are one batch: one transaction, one fsync.
    await Promise.all(bodies.map((body) => store.run('append', { name, request: appendRequest(body) })));
    const reader = new Database(join(dataDir, 'rill.db'), { readonly: true });
    try {
      const rows = reader.prepare<[], { appends: Buffer }>('SELECT appends FROM recent_batches ORDER BY id').all();
      const perRow = rows.map((r) => unpackAppends(r.appends).map((a) => a.data.length / 1024));
      expect(perRow).toEqual([[600], [600], [2000], [1, 600]]);
    } finally {
      reader.close();
    }
    // What a power cut leaves: the database and its WAL as they are now, all unindexed.
    const image = newDir();
    for (const file of ['rill.db', 'rill.db-wal']) if (existsSync(join(dataDir, file))) copyFileSync(join(dataDir, file), join(image, file));
    const reopened = new SqliteStore({ dataDir: image, producers: DEFAULT_PRODUCER_SETTINGS });
    try {
      const stream = (await reopened.getStream(name))!;
      expect(stream.tail).toBe(bodies.reduce((n, b) => n + b.length, 0));
      expect((await reopened.readRange(stream, 0, stream.tail)).equals(Buffer.concat(bodies))).toBe(true);
    } finally {
      await reopened.close();
    }
  } finally {
    await store.close();
  }
});
