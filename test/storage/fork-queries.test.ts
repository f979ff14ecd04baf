/**
 * Differential test of the fork rule storage answers by query (`descendantsEarliest`,
 * src/core/snapshot.ts): random fork trees (forks of forks at random offsets, retention
 * moving earliest offsets, deleted streams that forks still read) are made in each engine
 * by real commands, and each engine's `descendantsEarliest` (a recursive query on SQLite
 * and PostgreSQL) must answer what the core function says of the stored streams. Every
 * tree comes from the file's seed (test/helpers/seed.ts).
 */
import { describe, expect, it } from 'vitest';
import { descendantsEarliest } from '../../src/core/snapshot.js';
import type { StreamState } from '../../src/core/types.js';
import { v1StreamKey } from '../../src/protocol/ids.js';
import type { Store } from '../../src/storage/store.js';
import { seededRandom, testSeed, type Rng } from '../helpers/seed.js';
import { appendRequest, createRequest, everyEngine, mustGet, storeForBlock, TestClock, type EngineUnderTest } from './fixtures.js';
import { inTxn } from './txn-harness.js';

const TREES = 10;

/** Every append here is 2 bytes, so that every even offset is a message boundary (where forks and snapshots may be). */
function evenBetween(rng: Rng, from: number, to: number): number {
  return 2 * rng.int(Math.ceil(from / 2), Math.floor(to / 2));
}

/** Makes a random tree of forks under a root; answers the names made. */
async function growTree(store: Store, rng: Rng, n: number): Promise<string[]> {
  const names = [v1StreamKey(`tree-${n}/root`)];
  await store.run('createStream', createRequest(names[0]!, { data: Buffer.from('ab') }));
  for (const pair of ['cd', 'ef', 'gh']) await store.run('append', { name: names[0]!, request: appendRequest(pair) });
  for (let i = 0; i < rng.int(1, 6); i++) {
    const source = await mustGet(store, rng.pick(names));
    const name = v1StreamKey(`tree-${n}/f${i}`);
    const offset = evenBetween(rng, source.earliestOffset, source.tail);
    await store.run('createStream', createRequest(name, { fork: { sourceName: source.name, offset, subOffset: 0 } }));
    for (let k = rng.int(1, 3); k > 0; k--) await store.run('append', { name, request: appendRequest('xy') });
    names.push(name);
  }
  for (const name of names) if (rng.int(0, 2) === 0) await retain(store, name, rng);
  // Deleting a stream that forks read keeps it stored (soft-deleted); a leaf goes.
  if (rng.int(0, 1) === 0) await store.run('deleteStream', { name: rng.pick(names), incarnation: null });
  return names;
}

/** Moves the stream's earliest offset to a random point, under a snapshot there. */
async function retain(store: Store, name: string, rng: Rng): Promise<void> {
  const stream = await mustGet(store, name);
  const offset = evenBetween(rng, stream.earliestOffset, stream.tail);
  if (offset === stream.earliestOffset) return;
  const request = { offset, contentType: 'text/x-fold', digest: `d-${offset}`, match: null, incarnation: null };
  expect((await store.run('publishSnapshot', { name, request, body: Buffer.from('fold') })).kind).toBe('published');
  expect((await store.run('setRetention', { name, request: { offset, incarnation: null } })).kind).toBe('retained');
}

function differentialTest(engine: EngineUnderTest): void {
  describe(`fork rule: ${engine.name}`, () => {
    const storeOf = storeForBlock(engine, new TestClock());

    it('descendantsEarliest is the core function over the stored streams, for random fork trees', async () => {
      const store = storeOf();
      const rng = seededRandom(testSeed() + 17);
      for (let n = 0; n < TREES; n++) {
        const names = await growTree(store, rng, n);
        const stored = (await Promise.all(names.map((name) => store.getStream(name)))).filter((s): s is StreamState => s !== undefined);
        for (const stream of stored) {
          const answered = await inTxn(store, (txn) => txn.descendantsEarliest(stream.id));
          const tree = stored.map((s) => [s.name, s.fork?.sourceId ?? null, s.id, s.earliestOffset, s.deleted]);
          expect(answered, `tree ${n}, ${stream.name}: ${JSON.stringify(tree)}`).toBe(descendantsEarliest(stored, stream.id));
        }
      }
    });
  });
}

for (const engine of everyEngine()) differentialTest(engine);
