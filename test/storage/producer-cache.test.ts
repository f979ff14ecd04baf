/**
 * The SQLite engine's producer-record cache: what it forgets and how it stays bounded.
 * (That the engine answers producers exactly as the memory engine does, through every
 * forget, eviction and rollback, is the storage contract suite's job.)
 */
import { describe, expect, it } from 'vitest';
import type { ProducerRecord } from '../../src/core/types.js';
import { ProducerCache } from '../../src/storage/sqlite/producer-cache.js';

const record = (id: string, lastSeenMs: number): ProducerRecord => ({
  id,
  epoch: 0,
  lastSeq: 0,
  receipt: { start: 0, next: 1, closed: false, records: null },
  digest: null,
  claim: { closedEpoch: null, closedSeq: null, digest: null },
  lastSeenMs,
});

describe('producer cache', () => {
  it('answers what was remembered, per stream, replacing a record by its id', () => {
    const cache = new ProducerCache(10);
    cache.remember(1, record('a', 5));
    cache.remember(1, record('a', 6));
    cache.remember(2, record('a', 7));
    expect(cache.get(1, 'a')?.lastSeenMs).toBe(6);
    expect(cache.get(2, 'a')?.lastSeenMs).toBe(7);
    expect(cache.get(1, 'b')).toBeUndefined();
    expect(cache.size).toBe(2);
  });

  it('forgets by id, by last-seen time and by stream', () => {
    const cache = new ProducerCache(10);
    for (const [id, seen] of [['a', 1], ['b', 2], ['c', 3]] as const) cache.remember(1, record(id, seen));
    cache.remember(2, record('z', 1));
    cache.forget(1, ['a', 'missing']);
    expect(cache.get(1, 'a')).toBeUndefined();
    cache.forgetSeenAtOrBefore(1, 2);
    expect(cache.get(1, 'b')).toBeUndefined();
    expect(cache.get(1, 'c')).toBeDefined();
    expect(cache.get(2, 'z')).toBeDefined();
    cache.forgetStream(2);
    expect(cache.get(2, 'z')).toBeUndefined();
    expect(cache.size).toBe(1);
    cache.clear();
    expect(cache.get(1, 'c')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('stays within its bound by dropping the streams cached first', () => {
    const cache = new ProducerCache(100);
    for (let stream = 0; stream < 50; stream++) for (const id of ['p', 'q', 'r']) cache.remember(stream, record(id, stream));
    expect(cache.size).toBeLessThanOrEqual(100);
    expect(cache.get(49, 'r')).toBeDefined();
    expect(cache.get(0, 'p')).toBeUndefined();
  });
});
