/**
 * Differential test of the producer summary rule (`summarizeProducers`, src/core/producer.ts):
 * random producer records (ids that sort differently as UTF-8 bytes and as UTF-16, equal
 * last-seen times, seen before, at and after the cutoff) are stored in each engine inside
 * real batches, and each engine's `producerSummary` (SQL on SQLite and PostgreSQL) must
 * answer what the core function says of the same records. Every state comes from the
 * file's seed (test/helpers/seed.ts).
 */
import { describe, expect, it } from 'vitest';
import { summarizeProducers } from '../../src/core/producer.js';
import type { ProducerRecord } from '../../src/core/types.js';
import { v1StreamKey } from '../../src/protocol/ids.js';
import { seededRandom, testSeed, type Rng } from '../helpers/seed.js';
import { createRequest, everyEngine, mustGet, storeForBlock, TestClock, type EngineUnderTest } from './fixtures.js';
import { inTxn } from './txn-harness.js';

const T0 = 1_700_000_000_000;
const STATES = 15;
/** '\u{1F600}' sorts after '\uFFFD' as UTF-8 bytes, before it as UTF-16 code units. */
const IDS = ['a', 'b', 'a1', 'Z', 'é', '\uFFFD', '\u{1F600}', 'p-7'];

function drawnRecord(rng: Rng, id: string): ProducerRecord {
  return {
    id,
    epoch: rng.int(0, 5),
    lastSeq: rng.int(0, 9),
    receipt: { start: 0, next: 1, closed: false, records: null },
    digest: null,
    claim: { closedEpoch: null, closedSeq: null, digest: null },
    // Few distinct times: ties are common, and decided by id.
    lastSeenMs: T0 + rng.int(-3, 3) * 1_000,
  };
}

function drawnRecords(rng: Rng): ProducerRecord[] {
  return IDS.filter(() => rng.int(0, 2) > 0).map((id) => drawnRecord(rng, id));
}

function differentialTest(engine: EngineUnderTest): void {
  describe(`producer summary rule: ${engine.name}`, () => {
    const clock = new TestClock(T0);
    const storeOf = storeForBlock(engine, clock);

    it('producerSummary is summarizeProducers for random producer records', async () => {
      const store = storeOf();
      const rng = seededRandom(testSeed() + 40);
      for (let n = 0; n < STATES; n++) {
        const name = v1StreamKey(`producers-${n}`);
        await store.run('createStream', createRequest(name));
        const streamId = (await mustGet(store, name)).id;
        const records = drawnRecords(rng);
        await inTxn(store, (txn) => {
          for (const record of records) txn.putProducer(streamId, record);
        });
        const cutoffMs = T0 + rng.int(-4, 4) * 1_000;
        const excludeId = rng.pick([...IDS, 'fresh']);
        const summary = await inTxn(store, (txn) => txn.producerSummary(streamId, cutoffMs, excludeId));
        const context = `state ${n}: cutoff ${cutoffMs - T0} ms, excluding ${excludeId}, ${JSON.stringify(records.map((r) => [r.id, r.epoch, r.lastSeenMs - T0]))}`;
        expect(summary, context).toEqual(summarizeProducers(records, cutoffMs, excludeId));
      }
    });
  });
}

for (const engine of everyEngine()) differentialTest(engine);
