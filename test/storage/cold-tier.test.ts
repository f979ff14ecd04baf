/**
 * The cold tier on the SQLite engine, in this process, against a real S3-compatible server
 * (s3rver, test/helpers/s3.ts): the crash between an upload and the hot store's trim,
 * made exact. The object store is the real one, wrapped so that the process "dies" right
 * after the store acknowledged a PUT and before the engine's transaction: the uploader
 * stops there, and the store is closed and opened again as a restart would.
 *
 * Then: the bytes are still hot and read back once; the restart's upload writes the same
 * key with the same bytes (no second object), commits, and everything reads back once,
 * from the cold tier now; `rill check`'s cold part finds nothing wrong.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DEFAULT_PRODUCER_SETTINGS } from '../../src/core/types.js';
import { checkColdTier } from '../../src/storage/cold/check.js';
import { openS3ObjectStore, type ObjectStore } from '../../src/storage/cold/object-store.js';
import { ColdTier, withColdTier, type TieredStore } from '../../src/storage/cold/tiered-store.js';
import { SqliteStore } from '../../src/storage/sqlite/engine.js';
import { v1StreamKey } from '../../src/protocol/ids.js';
import { seededRandom } from '../helpers/seed.js';
import { startTestS3, TEST_BUCKET, type TestS3 } from '../helpers/s3.js';
import { removeDir, tempDataDir } from '../helpers/server.js';
import { appendRequest, createRequest } from './fixtures.js';

const rng = seededRandom();
const SETTINGS = {
  window: { bytes: 8 * 1024, ageMs: 0 },
  segmentBytes: 8 * 1024,
  // Passes are run by the test, never by the timer.
  intervalMs: 3_600_000,
  backoffBaseMs: 3_600_000,
  backoffMaxMs: 3_600_000,
  cacheBytes: 1024 * 1024,
  maxBacklogBytes: 0,
};

let s3: TestS3;
const dirs: string[] = [];

beforeAll(async () => {
  s3 = await startTestS3();
});

afterAll(async () => {
  await s3.close();
  dirs.forEach(removeDir);
});

/** The real object store, with the process dying right after the store acknowledged a PUT. */
function dyingAfterPut(objects: ObjectStore): ObjectStore {
  return {
    ...objects,
    async put(key, body, sha256Hex) {
      await objects.put(key, body, sha256Hex);
      throw new Error(`the process died after the store acknowledged ${key}`);
    },
  };
}

async function openTiered(dataDir: string, objects: ObjectStore): Promise<{ store: TieredStore; tier: ColdTier; errors: unknown[] }> {
  const engine = new SqliteStore({ dataDir, producers: DEFAULT_PRODUCER_SETTINGS });
  const errors: unknown[] = [];
  const tier = new ColdTier(engine.coldRows(), objects, SETTINGS, Date.now, (error) => errors.push(error));
  engine.setColdChunks({
    end: (id) => tier.host.coldEnd(id),
    containing: (id, position) => tier.reads.containingNow(id, position),
    from: (id, from, before) => tier.reads.fromNow(id, from, before),
  });
  return { store: withColdTier(engine, tier), tier, errors };
}

async function readAll(store: TieredStore, name: string): Promise<Buffer> {
  const stream = (await store.getStream(name))!;
  return store.readRange(stream, 0, stream.tail);
}

it('a crash between the upload and the trim loses nothing and holds nothing twice', async () => {
  const dataDir = tempDataDir();
  dirs.push(dataDir);
  const objects = await openS3ObjectStore(`s3://${TEST_BUCKET}/crash-between`, s3.env);
  const name = v1StreamKey('between');
  // About 180 KiB: indexed at once, in rows of up to 64 KiB, of which the last stays hot.
  const appends = Array.from({ length: 60 }, () => Buffer.alloc(rng.int(2000, 4000), rng.int(0, 255)));
  const all = Buffer.concat(appends);

  const first = await openTiered(dataDir, dyingAfterPut(objects));
  await first.store.run('createStream', createRequest(name));
  for (const data of appends) await first.store.run('append', { name, request: appendRequest(data) });
  await first.tier.uploader.pass();
  expect(first.errors).toHaveLength(1);
  const uploaded = [...s3.objectFiles().keys()].filter((k) => k.startsWith('crash-between/'));
  expect(uploaded).toHaveLength(1);
  // The object is in the store, but nothing names it: the bytes are hot, once.
  expect(first.tier.stats().coldBytes).toBe(0);
  expect((await readAll(first.store, name)).equals(all)).toBe(true);
  await first.store.close();

  const second = await openTiered(dataDir, objects);
  await second.tier.uploader.pass();
  expect(second.errors).toEqual([]);
  const stats = second.tier.stats();
  expect(stats.uploads).toBeGreaterThan(0);
  expect(stats.coldBytes).toBeGreaterThan(0);
  // The same range was uploaded again to the same key, with the same bytes: one object for it.
  const after = [...s3.objectFiles().keys()].filter((k) => k.startsWith('crash-between/'));
  expect(after).toContain(uploaded[0]);
  expect(after).toHaveLength(stats.uploads);
  expect((await readAll(second.store, name)).equals(all)).toBe(true);
  await second.store.close();
  expect((await checkColdTier(`${dataDir}/rill.db`, objects)).problems).toEqual([]);
  objects.close();
});

it('the uploader reaches every stream: past a page of streams with nothing to move', async () => {
  const dataDir = tempDataDir();
  dirs.push(dataDir);
  const objects = await openS3ObjectStore(`s3://${TEST_BUCKET}/paged`, s3.env);
  const { store, tier, errors } = await openTiered(dataDir, objects);
  // More than a page (500) of empty streams first, so that the one to move comes after them.
  for (let i = 0; i < 520; i++) await store.run('createStream', createRequest(v1StreamKey(`empty-${i}`)));
  const name = v1StreamKey('long');
  await store.run('createStream', createRequest(name));
  const appends = Array.from({ length: 60 }, () => Buffer.alloc(rng.int(2000, 4000), rng.int(0, 255)));
  for (const data of appends) await store.run('append', { name, request: appendRequest(data) });
  await tier.uploader.pass();
  expect(errors).toEqual([]);
  expect(tier.stats().uploads).toBeGreaterThan(0);
  expect((await readAll(store, name)).equals(Buffer.concat(appends))).toBe(true);
  await store.close();
  objects.close();
});
