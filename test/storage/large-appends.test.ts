/**
 * Large appends kept for the reads that go on through them (storage/large-appends.ts):
 * the cache's own rules, then a real SQLite store read in windows smaller than an append
 * (written by it, or loaded after a reopen), trimmed inside one by a retention policy,
 * and dropped and made again.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_PRODUCER_SETTINGS } from '../../src/core/types.js';
import type { RetentionPolicy } from '../../src/core/retention-policy.js';
import { v1StreamKey } from '../../src/protocol/ids.js';
import { LARGE_APPEND_MIN_BYTES, LargeAppendCache, WRITTEN_MIN_BYTES } from '../../src/storage/large-appends.js';
import { SqliteStore } from '../../src/storage/sqlite/engine.js';
import { removeDir, tempDataDir } from '../helpers/server.js';
import { appendRequest, createRequest, expectAppended, JSON_TYPE, mustGet, randomBytes, seededRandom } from './fixtures.js';

const MIB = 1024 * 1024;
const chunk = (start: number, length: number, fill = 1) => ({ start, data: Buffer.alloc(length, fill) });

describe('the large-append cache', () => {
  it('keeps an append of 1 MiB or more and finds it from any position inside it, on its stream only', () => {
    const cache = new LargeAppendCache(4 * MIB);
    cache.keep(1, chunk(100, LARGE_APPEND_MIN_BYTES - 1));
    expect(cache.size).toBe(0);
    cache.keep(1, chunk(100, MIB));
    expect(cache.containing(1, 100)?.start).toBe(100);
    expect(cache.containing(1, 100 + MIB - 1)?.start).toBe(100);
    expect(cache.containing(1, 99)).toBeUndefined();
    expect(cache.containing(1, 100 + MIB)).toBeUndefined();
    expect(cache.containing(2, 100)).toBeUndefined();
    expect(cache.hits).toBe(2);
    // Kept once, however often it is loaded.
    cache.keep(1, chunk(100, MIB));
    expect(cache.size).toBe(MIB);
  });

  it('stays within its bytes, the least recently used going first', () => {
    const cache = new LargeAppendCache(3 * MIB);
    cache.keep(1, chunk(0, MIB));
    cache.keep(1, chunk(MIB, MIB));
    cache.keep(2, chunk(0, MIB));
    cache.containing(1, 0); // the first is now the most recently used
    cache.keep(3, chunk(0, MIB));
    expect(cache.size).toBe(3 * MIB);
    expect(cache.containing(1, MIB)).toBeUndefined();
    expect(cache.containing(1, 0)).toBeDefined();
    expect(cache.containing(2, 0)).toBeDefined();
    expect(cache.containing(3, 0)).toBeDefined();
    // An append larger than the whole bound is not kept, and pushes nothing out.
    cache.keep(4, chunk(0, 4 * MIB));
    expect(cache.containing(4, 0)).toBeUndefined();
    expect(cache.size).toBe(3 * MIB);
  });

  it('keeps what a transaction wrote larger than a default read once it commits, nothing when it rolls back, and no view of a larger buffer', () => {
    const cache = new LargeAppendCache(32 * MIB);
    const written = WRITTEN_MIN_BYTES;
    cache.begin();
    cache.written(1, chunk(0, written));
    expect(cache.containing(1, 0)).toBeUndefined();
    cache.rollback();
    cache.commit();
    expect(cache.size).toBe(0);
    cache.begin();
    cache.written(1, chunk(0, written));
    cache.written(2, chunk(0, written));
    // A trim or a drop in the same transaction: that stream's write is not kept.
    cache.forget(2);
    // A view would hold all of the buffer it is cut from, which the bound does not count.
    cache.written(3, { start: 0, data: Buffer.alloc(2 * written).subarray(written) });
    // An append a default read takes whole is kept only if a read cuts it.
    cache.written(4, chunk(0, written - 1));
    cache.commit();
    expect(cache.containing(1, 0)).toBeDefined();
    expect(cache.containing(2, 0)).toBeUndefined();
    expect(cache.containing(3, 0)).toBeUndefined();
    expect(cache.containing(4, 0)).toBeUndefined();
    expect(cache.size).toBe(written);
  });

  it('drops one append when asked, and no other', () => {
    const cache = new LargeAppendCache(8 * MIB);
    const first = chunk(0, MIB);
    cache.keep(1, first);
    cache.keep(1, chunk(MIB, MIB));
    cache.drop(1, first);
    expect(cache.containing(1, 0)).toBeUndefined();
    expect(cache.containing(1, MIB)).toBeDefined();
    expect(cache.size).toBe(MIB);
  });

  it('forgets every append of a stream at once', () => {
    const cache = new LargeAppendCache(8 * MIB);
    cache.keep(1, chunk(0, MIB));
    cache.keep(1, chunk(MIB, 2 * MIB));
    cache.keep(2, chunk(0, MIB));
    cache.forget(1);
    expect(cache.containing(1, 0)).toBeUndefined();
    expect(cache.containing(1, MIB)).toBeUndefined();
    expect(cache.containing(2, 0)).toBeDefined();
    expect(cache.size).toBe(MIB);
  });
});

describe('large appends in a real SQLite store', () => {
  const dirs: string[] = [];
  afterEach(() => dirs.splice(0).forEach(removeDir));
  /** Runs `test` on a fresh store in a directory of its own, and closes the store after it. */
  const withStore = async (test: (store: SqliteStore) => Promise<void>) => {
    const dataDir = tempDataDir();
    dirs.push(dataDir);
    const store = new SqliteStore({ dataDir, producers: DEFAULT_PRODUCER_SETTINGS });
    try {
      await test(store);
    } finally {
      await store.close();
    }
  };
  const largeHits = (store: SqliteStore) => store.cacheCounters().largeAppendHits;

  it('reads an append larger than the window in many windows: kept as written, and loaded once after a reopen', async () => {
    const dataDir = tempDataDir();
    dirs.push(dataDir);
    const name = v1StreamKey('big');
    // Larger than a read at the default window: kept as written.
    const big = randomBytes(seededRandom(1), WRITTEN_MIN_BYTES + 7);
    const all = Buffer.concat([big, Buffer.from('after')]);
    const readInWindows = async (store: SqliteStore) => {
      const stream = await mustGet(store, name);
      const window = MIB;
      const parts: Buffer[] = [];
      for (let at = 0; at < stream.tail; at += window) {
        parts.push(await store.readRange(stream, at, window));
        if (at !== MIB) continue;
        // Any position inside it is the whole append, kept as it was stored.
        const held = await store.chunkAt(stream, 2 * MIB);
        expect(held?.start).toBe(0);
        expect(held?.data.equals(big)).toBe(true);
      }
      expect(Buffer.concat(parts).equals(all)).toBe(true);
    };
    let store = new SqliteStore({ dataDir, producers: DEFAULT_PRODUCER_SETTINGS });
    await store.run('createStream', createRequest(name));
    expectAppended(await store.run('append', { name, request: appendRequest(big) }));
    expectAppended(await store.run('append', { name, request: appendRequest('after') }));
    expect(store.cacheCounters().largeAppendBytes).toBe(big.length);
    await readInWindows(store);
    // Each of the five windows, and chunkAt, found the append kept when it was written; the
    // last window took it to its end, and dropped it.
    expect(largeHits(store)).toBe(6);
    expect(store.cacheCounters().largeAppendBytes).toBe(0);
    await store.close();
    store = new SqliteStore({ dataDir, producers: DEFAULT_PRODUCER_SETTINGS });
    try {
      expect(store.cacheCounters().largeAppendBytes).toBe(0);
      await readInWindows(store);
      // The first window loaded it and, cutting it, kept it; the four after it and chunkAt found it.
      expect(largeHits(store)).toBe(5);
      expect(store.cacheCounters().largeAppendBytes).toBe(0);
    } finally {
      await store.close();
    }
  });

  it('a retention cut stored inside a kept append reads as the stored cut, not as the append kept before', () =>
    withStore(async (store) => {
      const name = v1StreamKey('cut');
      const retention: RetentionPolicy = { maxBytes: MIB, maxMessages: null, maxAgeMs: null };
      await store.run('createStream', createRequest(name, { contentType: JSON_TYPE, retention }));
      // JSON messages of 1,000 bytes each (with their newline); the first append is 1.2 MB.
      const message = `"${'m'.repeat(997)}"\n`;
      const body = message.repeat(1200);
      // The first message boundary that leaves at most the policy's 1 MiB after it.
      const cutFor = (tail: number) => Math.ceil((tail - MIB) / message.length) * message.length;
      expectAppended(await store.run('append', { name, request: appendRequest(body, { contentType: JSON_TYPE }) }));
      const whole = await mustGet(store, name);
      expect(whole.earliestOffset).toBe(cutFor(body.length));
      // Read in two windows: the first loads the append and, cut, keeps it; the second finds it.
      await store.readRange(whole, whole.earliestOffset, 64 * 1024);
      await store.readRange(whole, whole.earliestOffset + 64 * 1024, 64 * 1024);
      expect(largeHits(store)).toBe(1);
      // 949 more messages move the cut past 1 MiB, still inside the first append, where the
      // bytes before it are deleted (PHYSICAL_TRIM_STEP_BYTES) and the append stored from the cut.
      const more = message.repeat(949);
      expectAppended(await store.run('append', { name, request: appendRequest(more, { contentType: JSON_TYPE }) }));
      const cut = await mustGet(store, name);
      expect(cut.earliestOffset).toBe(cutFor(body.length + more.length));
      expect(cut.earliestOffset).toBeGreaterThan(MIB);
      expect(cut.earliestOffset).toBeLessThan(body.length);
      const stored = await store.chunkAt(cut, cut.earliestOffset);
      expect(stored?.start).toBe(cut.earliestOffset);
      expect(stored?.data.toString()).toBe(body.slice(cut.earliestOffset));
      const rest = await store.readRange(cut, cut.earliestOffset, cut.tail - cut.earliestOffset);
      expect(rest.toString()).toBe(body.slice(cut.earliestOffset) + more);
    }));

  it('keeps no append a read takes whole, only one a read cuts', () =>
    withStore(async (store) => {
      const name = v1StreamKey('whole');
      await store.run('createStream', createRequest(name));
      const body = randomBytes(seededRandom(2), MIB + 3);
      expectAppended(await store.run('append', { name, request: appendRequest(body) }));
      const stream = await mustGet(store, name);
      expect((await store.readRange(stream, 0, 4 * MIB)).equals(body)).toBe(true);
      expect(Buffer.concat((await store.readChunks(stream, 5, 4 * MIB)).map((c) => c.data)).equals(body.subarray(5))).toBe(true);
      expect(store.cacheCounters().largeAppendBytes).toBe(0);
      expect((await store.readRange(stream, 5, 1000)).equals(body.subarray(5, 1005))).toBe(true);
      expect(store.cacheCounters().largeAppendBytes).toBe(body.length);
    }));

  it('a stream dropped and made again under its name reads its new bytes', () =>
    withStore(async (store) => {
      const name = v1StreamKey('again');
      await store.run('createStream', createRequest(name));
      expectAppended(await store.run('append', { name, request: appendRequest(Buffer.alloc(MIB + 1, 1)) }));
      // Too small to keep as written; a read that cuts it keeps it.
      expect(store.cacheCounters().largeAppendBytes).toBe(0);
      await store.readRange(await mustGet(store, name), 0, 1024);
      expect(store.cacheCounters().largeAppendBytes).toBe(MIB + 1);
      await store.run('deleteStream', { name, incarnation: null });
      expect(store.cacheCounters().largeAppendBytes).toBe(0);
      await store.run('createStream', createRequest(name));
      expectAppended(await store.run('append', { name, request: appendRequest(Buffer.alloc(MIB + 1, 2)) }));
      const second = await mustGet(store, name);
      expect((await store.readRange(second, 1024, 1024)).equals(Buffer.alloc(1024, 2))).toBe(true);
    }));
});
