/**
 * Differential test of the stream rules storage answers by query (`isListed` and
 * `isCollectable`, src/core/stream.ts): random streams of a bucket (sliding TTLs renewed by
 * appends, absolute expiries, none; deleted, or soft-deleted under a fork) are made in each
 * engine by real commands at random times, and at random moments each engine's listing,
 * bucket count and expiry queries must answer what the core functions say of the stored
 * streams. Every state comes from the file's seed (test/helpers/seed.ts).
 */
import { describe, expect, it } from 'vitest';
import { isCollectable, isListed } from '../../src/core/stream.js';
import type { StreamState } from '../../src/core/types.js';
import type { Store } from '../../src/storage/store.js';
import { byBytes } from '../helpers/order.js';
import { seededRandom, testSeed, type Rng } from '../helpers/seed.js';
import { appendRequest, createRequest, everyEngine, storeForBlock, TestClock, type EngineUnderTest } from './fixtures.js';
import { inTxn } from './txn-harness.js';

const T0 = 1_700_000_000_000;
const BUCKETS = 8;

/** Makes a bucket of random streams, the clock moving between writes; answers their names. */
async function fillBucket(store: Store, clock: TestClock, rng: Rng, bucket: string): Promise<string[]> {
  expect((await store.run('createBucket', { id: bucket })).kind).toBe('created');
  const names: string[] = [];
  const expiring: string[] = [];
  for (let i = 0; i < rng.int(2, 7); i++) {
    const name = `b/${bucket}/s${i}`;
    const expiry = rng.int(0, 2);
    if (expiry !== 0) expiring.push(name);
    const ttlSeconds = expiry === 1 ? rng.int(1, 4) : null;
    const expiresAtMs = expiry === 2 ? clock.nowMs + rng.int(1, 6) * 1_000 : null;
    await store.run('createStream', createRequest(name, { bucket, ttlSeconds, expiresAtMs, data: Buffer.from('ab') }));
    names.push(name);
    clock.advance(rng.int(0, 2) * 500);
    // An append renews a sliding TTL: the stored expiry moves.
    if (rng.int(0, 1) === 0) await store.run('append', { name, request: appendRequest('cd') });
  }
  // Mostly one that expires: a deleted stream past its expiry is neither listed nor collectable.
  const doomed = rng.pick(expiring.length > 0 && rng.int(0, 3) > 0 ? expiring : names);
  if (rng.int(0, 1) === 0) {
    // A fork keeps its deleted source stored (soft-deleted).
    const fork = `b/${bucket}/fork`;
    await store.run('createStream', createRequest(fork, { bucket, fork: { sourceName: doomed, offset: null, subOffset: 0 } }));
    names.push(fork);
  }
  await store.run('deleteStream', { name: doomed, incarnation: null });
  return names;
}

function differentialTest(engine: EngineUnderTest): void {
  describe(`stream rules: ${engine.name}`, () => {
    const clock = new TestClock(T0);
    const storeOf = storeForBlock(engine, clock);

    it('listings, bucket counts and expiry queries take the streams isListed and isCollectable say, for random states', async () => {
      const store = storeOf();
      const rng = seededRandom(testSeed() + 23);
      for (let n = 0; n < BUCKETS; n++) {
        const bucket = `lx-${n}`;
        const names = await fillBucket(store, clock, rng, bucket);
        clock.advance(rng.int(0, 8) * 500);
        const nowMs = clock.nowMs;
        const stored = (await Promise.all(names.map((name) => store.getStream(name)))).filter((s): s is StreamState => s !== undefined);
        const context = `bucket ${n} at +${nowMs - T0} ms: ${JSON.stringify(stored.map((s) => [s.name, s.deleted, s.config.ttlSeconds, s.config.expiresAtMs, s.lastAccessMs]))}`;
        const listed = stored.filter((s) => isListed(s, nowMs)).map((s) => s.name.slice(`b/${bucket}/`.length)).sort(byBytes);
        const collectable = stored.filter((s) => isCollectable(s, nowMs)).map((s) => s.name).sort(byBytes);
        expect((await store.listStreams(bucket, '', null, 1_000)).names, context).toEqual(listed);
        expect((await store.getBucket(bucket))?.streamCount, context).toBe(listed.length);
        const inBucket = await inTxn(store, (txn) => txn.expiredBucketStreams(bucket, nowMs).map((s) => s.name));
        expect(inBucket.sort(byBytes), context).toEqual(collectable);
        const anywhere = await inTxn(store, (txn) => txn.expiredStreams(nowMs, 10_000).map((s) => s.name));
        expect(anywhere.filter((name) => name.startsWith(`b/${bucket}/`)).sort(byBytes), context).toEqual(collectable);
      }
    });
  });
}

for (const engine of everyEngine()) differentialTest(engine);
