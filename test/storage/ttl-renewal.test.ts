/**
 * A write renews a sliding TTL from when its writer hears of it. The batch stamps the time
 * it ran, but the answer waits for the WAL's fsync; on a busy disk that took over half a
 * second, and the stream then lived that much less than its TTL after the acknowledgement
 * (the upstream conformance suite's sliding-window tests leave 0.5 s). Real SQLite, with an
 * fsync stand-in the test holds and a clock the test moves.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { expiryMs } from '../../src/core/stream.js';
import { v1StreamKey } from '../../src/protocol/ids.js';
import { SqliteStore } from '../../src/storage/sqlite/engine.js';
import { DEFAULT_PRODUCER_SETTINGS } from '../../src/core/types.js';
import { appendRequest, createRequest } from './fixtures.js';
import { HeldStores, ticks, watch } from './held-flush.js';

const stores = new HeldStores();
afterEach(() => stores.closeAll());

const TTL_SECONDS = 2;

describe('sliding TTL renewed by a write', () => {
  it('counts from the answer, not from the batch, and the renewal is stored', async () => {
    let nowMs = 10_000;
    const { store, disk, dir } = stores.open('rill-ttl-renewal-', () => nowMs);
    const name = v1StreamKey('renewed');
    await store.run('createStream', createRequest(name, { ttlSeconds: TTL_SECONDS }));
    expect(expiryMs((await store.getStream(name))!)).toBe(12_000);

    nowMs = 11_000;
    disk.hold();
    const append = watch(store.run('append', { name, request: appendRequest('kept alive') }));
    await ticks();
    expect(append.answered()).toBe(false);
    // The fsync takes 800 ms: the writer hears of its append at 11,800.
    nowMs = 11_800;
    disk.release();
    await ticks();
    expect(append.answered()).toBe(true);
    expect(append.value()).toMatchObject({ kind: 'appended' });
    expect(expiryMs((await store.getStream(name))!)).toBe(11_800 + TTL_SECONDS * 1000);

    // Another stream's write carries the renewal to the database: a reopened store has it.
    nowMs = 12_000;
    await store.run('createStream', createRequest(v1StreamKey('other')));
    await store.close();
    const reopened = new SqliteStore({ dataDir: dir, producers: DEFAULT_PRODUCER_SETTINGS, nowMs: () => nowMs });
    try {
      expect(expiryMs((await reopened.getStream(name))!)).toBe(11_800 + TTL_SECONDS * 1000);
    } finally {
      await reopened.close();
    }
  });

  it('leaves a stream without a TTL and a refused write as they were', async () => {
    let nowMs = 10_000;
    const { store, disk } = stores.open('rill-ttl-renewal-', () => nowMs);
    const plain = v1StreamKey('plain');
    const closed = v1StreamKey('closed');
    await store.run('createStream', createRequest(plain));
    await store.run('createStream', createRequest(closed, { ttlSeconds: TTL_SECONDS, close: true }));
    nowMs = 11_000;
    disk.hold();
    const writes = Promise.all([
      store.run('append', { name: plain, request: appendRequest('x') }),
      store.run('append', { name: closed, request: appendRequest('refused') }),
    ]);
    await ticks();
    nowMs = 11_800;
    disk.release();
    const [appended, refused] = await writes;
    expect(appended).toMatchObject({ kind: 'appended' });
    expect(refused).not.toMatchObject({ kind: 'appended' });
    expect((await store.getStream(plain))!.lastAccessMs).toBe(10_000);
    expect(expiryMs((await store.getStream(closed))!)).toBe(12_000);
  });
});
