/**
 * Group transactions in the storage contract, on every engine: the operations commit
 * together in one batch, or none of them does, whatever refuses one of them and wherever
 * it stands in the transaction; operations on one stream chain; a retry is recognised
 * through its producer operations; a refused transaction leaves the other commands of
 * its batch committed. Every expectation is counted from what the test wrote.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { TransactionOutcome } from '../../src/core/transaction.js';
import type { AppendRequest, StreamState } from '../../src/core/types.js';
import { bucketStreamKey } from '../../src/protocol/ids.js';
import type { CommitEvent, Store } from '../../src/storage/store.js';
import {
  appendRequest,
  createRequest,
  expectAppended,
  JSON_TYPE,
  memoryEngine,
  mustGet,
  OCTET,
  postgresEngine,
  readAll,
  sqliteEngine,
  TestClock,
  type EngineUnderTest,
} from './fixtures.js';

const BUCKET = 'txns';
const key = (stream: string) => bucketStreamKey(BUCKET, `run-1/${stream}`);
const ndjson = (...values: unknown[]) => Buffer.from(values.map((v) => `${JSON.stringify(v)}\n`).join(''));
const json = (data: Buffer, overrides: Partial<AppendRequest> = {}) => appendRequest(data, { contentType: JSON_TYPE, ...overrides });
const op = (stream: string, request: AppendRequest) => ({ name: key(stream), request });

function committed(outcome: TransactionOutcome) {
  if (outcome.kind !== 'committed') throw new Error(`expected committed, got ${JSON.stringify(outcome)}`);
  return outcome.operations;
}

/** What a refused transaction must not have changed: every stream's state and bytes. */
async function snapshotOf(store: Store, streams: string[]): Promise<Array<{ state: StreamState; bytes: string }>> {
  return Promise.all(
    streams.map(async (s) => {
      const state = await mustGet(store, key(s));
      return { state: { ...state, lastAccessMs: 0 } as StreamState, bytes: (await readAll(store, key(s))).toString() };
    }),
  );
}

function transactionContract(engine: EngineUnderTest): void {
  describe(`group transactions: ${engine.name}`, () => {
    const ctx = { clock: new TestClock(), store: undefined as unknown as Store };
    beforeEach(async () => {
      ctx.clock = new TestClock();
      ctx.store = await engine.open(ctx.clock);
      await ctx.store.run('createBucket', { id: BUCKET });
      for (const [stream, data] of [
        ['journal', ndjson('j0')],
        ['queue', ndjson('q0', 'q1')],
      ] as const) {
        await ctx.store.run('createStream', createRequest(key(stream), { bucket: BUCKET, contentType: JSON_TYPE, data }));
      }
      await ctx.store.run('createStream', createRequest(key('bytes'), { bucket: BUCKET, contentType: OCTET }));
    });
    afterEach(async () => {
      await ctx.store.close();
      engine.cleanup();
    });
    const run = (operations: Array<{ name: string; request: AppendRequest }>) => ctx.store.run('appendTransaction', { operations });

    it('commits every operation in one batch, each with its own range, and survives a reopen', async () => {
      const seen: CommitEvent[][] = [];
      ctx.store.onCommit((events) => seen.push(events));
      const acks = committed(await run([op('journal', json(ndjson('j1'), { recordMatch: 1 })), op('queue', json(ndjson('q2', 'q3'), { recordMatch: 2 })), op('bytes', appendRequest('raw'))]));
      expect(acks.map((a) => a.kind)).toEqual(['appended', 'appended', 'appended']);
      expect(acks.map((a) => (a.kind === 'appended' ? a.receipt.records : null))).toEqual([{ start: 1, next: 2 }, { start: 2, next: 4 }, null]);
      expect(seen).toHaveLength(1);
      expect(seen[0]!.map((e) => e.name).sort()).toEqual([key('bytes'), key('journal'), key('queue')]);
      ctx.store = await engine.reopen(ctx.store, ctx.clock);
      expect((await readAll(ctx.store, key('queue'))).toString()).toBe(ndjson('q0', 'q1', 'q2', 'q3').toString());
      expect(await mustGet(ctx.store, key('journal'))).toMatchObject({ recordNext: 2 });
      expect((await readAll(ctx.store, key('bytes'))).toString()).toBe('raw');
    });

    const refusals: Array<{ name: string; last: AppendRequest | { stream: string; request: AppendRequest }; code: string }> = [
      { name: 'a failed record precondition', last: json(ndjson('x'), { recordMatch: 7 }), code: 'RECORD_MATCH_FAILED' },
      { name: 'a content type that is not the stream’s', last: appendRequest('x'), code: 'CONTENT_TYPE_MISMATCH' },
      { name: 'a Stream-Seq not above the last', last: json(ndjson('x'), { streamSeq: '0' }), code: 'STREAM_SEQ_CONFLICT' },
      { name: 'a producer sequence gap', last: json(ndjson('x'), { producer: { id: 'p', epoch: 0, seq: 5 } }), code: 'PRODUCER_SEQ_GAP' },
      { name: 'a missing stream', last: { stream: 'missing', request: json(ndjson('x')) }, code: 'STREAM_NOT_FOUND' },
    ];
    for (const { name, last, code } of refusals) {
      it(`refuses everything, at any position, for ${name}`, async () => {
        await ctx.store.run('append', { name: key('queue'), request: json(ndjson('seq'), { streamSeq: '5' }) });
        const before = await snapshotOf(ctx.store, ['journal', 'queue', 'bytes']);
        const refused = 'stream' in last ? op(last.stream, last.request) : op('queue', last);
        const good = [op('journal', json(ndjson('a'))), op('bytes', appendRequest('b')), op('journal', json(ndjson('c'), { producer: { id: 'p', epoch: 0, seq: 0 } }))];
        for (let at = 0; at <= good.length; at++) {
          const operations = [...good.slice(0, at), refused, ...good.slice(at)];
          const outcome = await run(operations);
          expect(outcome).toMatchObject({ kind: 'rejected', operation: at, error: { code } });
          expect(await snapshotOf(ctx.store, ['journal', 'queue', 'bytes'])).toEqual(before);
        }
        // The producer of the refused transactions was never recorded: its first sequence is still 0.
        expectAppended(await ctx.store.run('append', { name: key('journal'), request: json(ndjson('p0'), { producer: { id: 'p', epoch: 0, seq: 0 } }) }));
      });
    }

    it('refuses everything when a closed stream is named, and close_after closes a stream with its append', async () => {
      const acks = committed(await run([op('journal', json(ndjson('last'), { close: true })), op('queue', json(ndjson('q2')))]));
      expect(acks[0]).toMatchObject({ kind: 'appended', receipt: { closed: true } });
      expect(await mustGet(ctx.store, key('journal'))).toMatchObject({ closed: true });
      const before = await snapshotOf(ctx.store, ['journal', 'queue']);
      expect(await run([op('queue', json(ndjson('q3'))), op('journal', json(ndjson('more')))])).toMatchObject({ kind: 'rejected', operation: 1, error: { code: 'STREAM_CLOSED' } });
      expect(await snapshotOf(ctx.store, ['journal', 'queue'])).toEqual(before);
    });

    it('chains operations on one stream: the second sees the tail the first left', async () => {
      const acks = committed(await run([op('queue', json(ndjson('a'), { recordMatch: 2 })), op('queue', json(ndjson('b', 'c'), { recordMatch: 3 }))]));
      expect(acks.map((a) => (a.kind === 'appended' ? a.receipt.records : null))).toEqual([{ start: 2, next: 3 }, { start: 3, next: 5 }]);
      const before = await snapshotOf(ctx.store, ['queue']);
      // The second expects the tail before the first: refused, and the first undone.
      expect(await run([op('queue', json(ndjson('d'), { recordMatch: 5 })), op('queue', json(ndjson('e'), { recordMatch: 5 }))])).toMatchObject({
        kind: 'rejected',
        operation: 1,
        error: { code: 'RECORD_MATCH_FAILED' },
      });
      expect(await snapshotOf(ctx.store, ['queue'])).toEqual(before);
    });

    it('chains producers on one stream, new ones included', async () => {
      const operations = [
        op('queue', json(ndjson('a'), { producer: { id: 'p', epoch: 0, seq: 0 } })),
        op('queue', json(ndjson('b'), { producer: { id: 'p', epoch: 0, seq: 1 } })),
        op('queue', json(ndjson('c'), { producer: { id: 'r', epoch: 0, seq: 0 } })),
      ];
      expect(committed(await run(operations)).map((a) => a.kind)).toEqual(['appended', 'appended', 'appended']);
      expect(await ctx.store.countProducers(await mustGet(ctx.store, key('queue')))).toBe(2);
    });

    it('answers a retry of a committed transaction with its receipts, applying nothing', async () => {
      const operations = [
        op('journal', json(ndjson('a'), { producer: { id: 'w', epoch: 1, seq: 0 } })),
        op('queue', json(ndjson('b', 'c'), { producer: { id: 'w', epoch: 1, seq: 0 } })),
      ];
      const first = committed(await run(operations));
      const before = await snapshotOf(ctx.store, ['journal', 'queue']);
      ctx.store = await engine.reopen(ctx.store, ctx.clock);
      const retry = committed(await run(operations));
      expect(retry.map((a) => a.kind)).toEqual(['duplicate', 'duplicate']);
      expect(retry.map((a) => a.receipt?.records)).toEqual(first.map((a) => a.receipt?.records));
      expect(await snapshotOf(ctx.store, ['journal', 'queue'])).toEqual(before);
    });

    it('refuses a retry that would apply only part of a transaction again', async () => {
      const operations = [op('journal', json(ndjson('a'), { producer: { id: 'w', epoch: 0, seq: 0 } })), op('queue', json(ndjson('b')))];
      committed(await run(operations));
      const before = await snapshotOf(ctx.store, ['journal', 'queue']);
      expect(await run(operations)).toMatchObject({ kind: 'rejected', operation: 1, error: { code: 'TRANSACTION_PARTLY_APPLIED' } });
      expect(await snapshotOf(ctx.store, ['journal', 'queue'])).toEqual(before);
    });

    it('a refused transaction leaves the other commands of its batch committed', async () => {
      const [plain, refused, other] = await Promise.all([
        ctx.store.run('append', { name: key('journal'), request: json(ndjson('before')) }),
        run([op('queue', json(ndjson('x'))), op('journal', json(ndjson('y'), { recordMatch: 99 }))]),
        ctx.store.run('append', { name: key('queue'), request: json(ndjson('after')) }),
      ]);
      expect(expectAppended(plain).records).toEqual({ start: 1, next: 2 });
      expect(refused).toMatchObject({ kind: 'rejected', operation: 1, error: { code: 'RECORD_MATCH_FAILED' } });
      expect(expectAppended(other).records).toEqual({ start: 2, next: 3 });
      expect((await readAll(ctx.store, key('queue'))).toString()).toBe(ndjson('q0', 'q1', 'after').toString());
    });
  });
}

for (const engine of [sqliteEngine(), sqliteEngine({ streamCacheEntries: 2, recentIndexing: { sealRows: 3, sealBytes: 400, stepRows: 2 } }), memoryEngine(), postgresEngine()]) {
  transactionContract(engine);
}
