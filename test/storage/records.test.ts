/**
 * Record ordinals in the storage contract, on every engine: appends move N by their
 * messages, a receipt keeps its range, retention moves F to the ordinal at its offset,
 * a fork keeps its source's ordinals, and everything survives a reopen, including a
 * SQLite row whose record tail lags its appends (StreamRows, RECORD_ROW_LAG_BYTES).
 * Expected ordinals are counted from the messages written, never read from the engine.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { v1StreamKey } from '../../src/protocol/ids.js';
import type { Store } from '../../src/storage/store.js';
import { RECORD_ROW_LAG_BYTES } from '../../src/storage/sqlite/stream-rows.js';
import { seededRandom } from '../helpers/seed.js';
import {
  appendRequest,
  createRequest,
  expectAppended,
  JSON_TYPE,
  memoryEngine,
  mustGet,
  postgresEngine,
  sqliteEngine,
  TestClock,
  type EngineUnderTest,
} from './fixtures.js';

const ndjson = (...values: unknown[]) => Buffer.from(values.map((v) => `${JSON.stringify(v)}\n`).join(''));
const json = (data: Buffer, overrides = {}) => appendRequest(data, { contentType: JSON_TYPE, ...overrides });

function recordContract(engine: EngineUnderTest): void {
  describe(`record ordinals: ${engine.name}`, () => {
    const ctx = { clock: new TestClock(), store: undefined as unknown as Store };
    beforeEach(async () => {
      ctx.clock = new TestClock();
      ctx.store = await engine.open(ctx.clock);
    });
    afterEach(async () => {
      await ctx.store.close();
      engine.cleanup();
    });
    const reopen = async () => (ctx.store = await engine.reopen(ctx.store, ctx.clock));

    it('appends take contiguous ranges; N and the ranges survive a reopen', async () => {
      const name = v1StreamKey('records');
      await ctx.store.run('createStream', createRequest(name, { contentType: JSON_TYPE, data: ndjson(0, 1) }));
      const rng = seededRandom();
      let expected = 2;
      for (let i = 0; i < 30; i++) {
        const count = rng.int(1, 5);
        const receipt = expectAppended(await ctx.store.run('append', { name, request: json(ndjson(...Array.from({ length: count }, (_, k) => ({ i, k })))) }));
        expect(receipt.records).toEqual({ start: expected, next: expected + count });
        expected += count;
      }
      expect(await mustGet(ctx.store, name)).toMatchObject({ recordFirst: 0, recordNext: expected });
      await reopen();
      expect(await mustGet(ctx.store, name)).toMatchObject({ recordFirst: 0, recordNext: expected });
      expect(expectAppended(await ctx.store.run('append', { name, request: json(ndjson('after')) })).records).toEqual({ start: expected, next: expected + 1 });
    });

    it('a record tail carried past the row-lag bytes by small appends alone is right after a reopen', async () => {
      const name = v1StreamKey('lagging');
      await ctx.store.run('createStream', createRequest(name, { contentType: JSON_TYPE }));
      const message = ndjson({ pad: 'x'.repeat(200) });
      const appends = Math.ceil((2.5 * RECORD_ROW_LAG_BYTES) / message.length);
      await Promise.all(Array.from({ length: appends }, () => ctx.store.run('append', { name, request: json(message) })));
      await reopen();
      expect(await mustGet(ctx.store, name)).toMatchObject({ recordNext: appends, tail: appends * message.length });
    });

    it("a producer's receipt keeps its range across a reopen, and its retry answers it", async () => {
      const name = v1StreamKey('receipts');
      await ctx.store.run('createStream', createRequest(name, { contentType: JSON_TYPE, data: ndjson('a') }));
      const producer = { id: 'p', epoch: 0, seq: 0 };
      const first = expectAppended(await ctx.store.run('append', { name, request: json(ndjson('b', 'c'), { producer }) }));
      expect(first.records).toEqual({ start: 1, next: 3 });
      await reopen();
      const retry = await ctx.store.run('append', { name, request: json(ndjson('b', 'c'), { producer }) });
      expect(retry).toMatchObject({ kind: 'duplicate', receipt: { records: { start: 1, next: 3 } } });
    });

    it('Stream-Record-Match applies only at the record tail', async () => {
      const name = v1StreamKey('match');
      await ctx.store.run('createStream', createRequest(name, { contentType: JSON_TYPE, data: ndjson(1, 2) }));
      expect(await ctx.store.run('append', { name, request: json(ndjson(3), { recordMatch: 1 }) })).toMatchObject({ kind: 'rejected', error: { code: 'RECORD_MATCH_FAILED', fields: { recordNext: 2 } } });
      expect(expectAppended(await ctx.store.run('append', { name, request: json(ndjson(3), { recordMatch: 2 }) })).records).toEqual({ start: 2, next: 3 });
    });

    it('retention moves F to the ordinal at its offset, counted from either end, and survives a reopen', async () => {
      const name = v1StreamKey('retained');
      const values = Array.from({ length: 40 }, (_, i) => ({ i }));
      await ctx.store.run('createStream', createRequest(name, { contentType: JSON_TYPE, data: ndjson(...values) }));
      const offsetOf = (record: number) => ndjson(...values.slice(0, record)).length;
      await ctx.store.run('publishSnapshot', { name, request: { offset: offsetOf(35), contentType: JSON_TYPE, digest: 'd', match: null, incarnation: null }, body: Buffer.from('{}') });
      // Near the start (counted up from F), then near the tail (counted down from N).
      for (const record of [3, 35]) {
        expect(await ctx.store.run('setRetention', { name, request: { offset: offsetOf(record), incarnation: null } })).toMatchObject({ kind: 'retained', stream: { recordFirst: record, recordNext: 40 } });
      }
      await reopen();
      expect(await mustGet(ctx.store, name)).toMatchObject({ recordFirst: 35, recordNext: 40, earliestOffset: offsetOf(35) });
    });

    it("a fork numbers the source's records up to the fork point, and its own after", async () => {
      const source = v1StreamKey('source');
      await ctx.store.run('createStream', createRequest(source, { contentType: JSON_TYPE, data: ndjson(0, 1, 2) }));
      await ctx.store.run('append', { name: source, request: json(ndjson(3, 4)) });
      const fork = v1StreamKey('fork');
      const at = ndjson(0, 1, 2).length;
      const created = await ctx.store.run('createStream', createRequest(fork, { contentType: JSON_TYPE, fork: { sourceName: source, offset: at, subOffset: 0 }, data: ndjson('f') }));
      expect(created).toMatchObject({ kind: 'created', stream: { recordFirst: 0, recordNext: 4 } });
      const sub = v1StreamKey('sub');
      const made = await ctx.store.run('createStream', createRequest(sub, { contentType: JSON_TYPE, fork: { sourceName: source, offset: at, subOffset: 1 } }));
      expect(made).toMatchObject({ kind: 'created', stream: { recordNext: 4 } });
      await reopen();
      expect(await mustGet(ctx.store, fork)).toMatchObject({ recordFirst: 0, recordNext: 4 });
      expect(expectAppended(await ctx.store.run('append', { name: fork, request: json(ndjson('g')) })).records).toEqual({ start: 4, next: 5 });
    });

    it('a stream of another type numbers its appends, not its lines, and answers no record range', async () => {
      const name = v1StreamKey('bytes');
      await ctx.store.run('createStream', createRequest(name, { data: Buffer.from('a\nb\n') }));
      const receipt = expectAppended(await ctx.store.run('append', { name, request: appendRequest('c\n') }));
      expect(receipt.records).toBeNull();
      expect(await mustGet(ctx.store, name)).toMatchObject({ recordFirst: 0, recordNext: 2 });
    });
  });
}

for (const engine of [sqliteEngine(), sqliteEngine({ streamCacheEntries: 2, recentIndexing: { sealRows: 3, sealBytes: 400, stepRows: 2 } }), memoryEngine(), postgresEngine()]) recordContract(engine);
