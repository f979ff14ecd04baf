/**
 * Retention policies in the storage contract (called from contract.test.ts for every
 * engine): after each append, a stream holds at most what its policy keeps, cut at the
 * lowest message boundary that does so (never a byte the policy keeps), with its message
 * count, snapshot and forks as core/retention-policy.ts says.
 */
import { describe, expect, it } from 'vitest';
import { bucketStreamKey, v1StreamKey } from '../../src/protocol/ids.js';
import { countRecords, messagesHeld } from '../../src/core/records.js';
import type { RetentionPolicy } from '../../src/core/retention-policy.js';
import type { StreamState } from '../../src/core/types.js';
import type { Store } from '../../src/storage/store.js';
import { appendRequest, createRequest, expectAppended, expectCreated, JSON_TYPE, mustGet, randomBytes, seededRandom, type EngineUnderTest, type TestClock } from './fixtures.js';

interface Ctx {
  clock: TestClock;
  store: Store;
}

const policy = (p: Partial<RetentionPolicy>): RetentionPolicy => ({ maxBytes: null, maxMessages: null, maxAgeMs: null, ...p });

/** What a stream holds from its earliest offset, read back, and its message count by reading. */
async function retained(store: Store, stream: StreamState): Promise<{ bytes: string; messages: number }> {
  const chunks = await store.readChunks(stream, stream.earliestOffset, stream.tail - stream.earliestOffset);
  const json = stream.config.contentType === JSON_TYPE;
  const messages = chunks.reduce((n, c) => n + (json ? countRecords(c.data) : 1), 0);
  return { bytes: Buffer.concat(chunks.map((c) => c.data)).toString(), messages };
}

/**
 * The model: message boundaries written so far (each message's start and end), and the
 * lowest boundary at or past the previous cut leaving at most the policy after it.
 */
function expectedCut(ends: number[], previous: number, tail: number, p: RetentionPolicy): number {
  for (const boundary of [0, ...ends]) {
    if (boundary < previous) continue;
    const messages = ends.filter((end) => end > boundary).length;
    if ((p.maxBytes === null || tail - boundary <= p.maxBytes) && (p.maxMessages === null || messages <= p.maxMessages)) return boundary;
  }
  return tail;
}

export function retentionPolicyTests(ctx: Ctx, engine: EngineUnderTest): void {
  describe('retention policies', () => {
    it('a byte limit cuts at the first append boundary that fits; a JSON stream inside an append, at a message', async () => {
      const bin = v1StreamKey('policy-bytes');
      await ctx.store.run('createStream', createRequest(bin, { retention: policy({ maxBytes: 10 }) }));
      for (const body of ['aaaa', 'bbbb', 'cccc']) await ctx.store.run('append', { name: bin, request: appendRequest(body) });
      const stream = await mustGet(ctx.store, bin);
      expect(stream).toMatchObject({ earliestOffset: 4, tail: 12, recordFirst: 1, recordNext: 3 });
      expect(await retained(ctx.store, stream)).toEqual({ bytes: 'bbbbcccc', messages: 2 });

      const json = v1StreamKey('policy-bytes-json');
      await ctx.store.run('createStream', createRequest(json, { contentType: JSON_TYPE, retention: policy({ maxBytes: 5 }) }));
      await ctx.store.run('append', { name: json, request: appendRequest('1\n2\n3\n4\n', { contentType: JSON_TYPE }) });
      const cut = await mustGet(ctx.store, json);
      expect(cut).toMatchObject({ earliestOffset: 4, recordFirst: 2, recordNext: 4 });
      expect(await retained(ctx.store, cut)).toEqual({ bytes: '3\n4\n', messages: 2 });
    });

    it('a message limit keeps the newest messages; the stream own policy replaces its bucket default', async () => {
      const name = v1StreamKey('policy-messages');
      await ctx.store.run('createStream', createRequest(name, { contentType: JSON_TYPE, retention: policy({ maxMessages: 3 }) }));
      const bucketRetention = policy({ maxMessages: 1 });
      await ctx.store.run('append', { name, request: appendRequest('1\n2\n', { contentType: JSON_TYPE }), bucketRetention });
      await ctx.store.run('append', { name, request: appendRequest('3\n4\n5\n', { contentType: JSON_TYPE }), bucketRetention });
      const stream = await mustGet(ctx.store, name);
      expect(stream).toMatchObject({ earliestOffset: 4, recordFirst: 2, recordNext: 5 });
      expect(messagesHeld(stream)).toBe(3);

      const plain = v1StreamKey('policy-default');
      await ctx.store.run('createStream', createRequest(plain));
      for (const body of ['a', 'bb', 'ccc']) await ctx.store.run('append', { name: plain, request: appendRequest(body), bucketRetention });
      expect(await mustGet(ctx.store, plain)).toMatchObject({ earliestOffset: 3, recordFirst: 2, recordNext: 3 });
      expect(await retained(ctx.store, await mustGet(ctx.store, plain))).toEqual({ bytes: 'ccc', messages: 1 });
    });

    it('a last message larger than the byte limit leaves nothing; the policy and the cut survive a reopen', async () => {
      const name = v1StreamKey('policy-reopen');
      await ctx.store.run('createStream', createRequest(name, { retention: policy({ maxBytes: 4, maxMessages: 2 }) }));
      await ctx.store.run('append', { name, request: appendRequest('ab') });
      await ctx.store.run('append', { name, request: appendRequest('toolong') });
      const before = await mustGet(ctx.store, name);
      expect(before).toMatchObject({ earliestOffset: 9, tail: 9, config: { retention: { maxBytes: 4, maxMessages: 2 } } });
      ctx.store = await engine.reopen(ctx.store, ctx.clock);
      expect(await mustGet(ctx.store, name)).toEqual(before);
      expect(expectAppended(await ctx.store.run('append', { name, request: appendRequest('cd') }))).toMatchObject({ start: 9, next: 11 });
      expect(await mustGet(ctx.store, name)).toMatchObject({ earliestOffset: 9, tail: 11 });
    });

    it('withdraws a snapshot the cut passed, keeps one it did not', async () => {
      const name = v1StreamKey('policy-snapshot');
      await ctx.store.run('createStream', createRequest(name, { data: Buffer.from('aa'), retention: policy({ maxMessages: 2 }) }));
      await ctx.store.run('append', { name, request: appendRequest('bb') });
      const publish = (offset: number) =>
        ctx.store.run('publishSnapshot', { name, request: { offset, contentType: 'text/plain', digest: `d${offset}`, match: null, incarnation: null }, body: Buffer.from('s') });
      expect(await publish(2)).toMatchObject({ kind: 'published' });
      await ctx.store.run('append', { name, request: appendRequest('cc') });
      expect(await mustGet(ctx.store, name)).toMatchObject({ earliestOffset: 2, snapshot: { offset: 2 } });
      await ctx.store.run('append', { name, request: appendRequest('dd') });
      expect(await mustGet(ctx.store, name)).toMatchObject({ earliestOffset: 4, snapshot: null });
    });

    it('bytes a fork reads stay stored when the source is cut past them', async () => {
      const src = v1StreamKey('policy-src');
      const big = (fill: number) => Buffer.alloc(700 * 1024, fill);
      await ctx.store.run('createStream', createRequest(src, { retention: policy({ maxBytes: 1024 * 1024 }) }));
      await ctx.store.run('append', { name: src, request: appendRequest(big(1)) });
      const fork = v1StreamKey('policy-fork');
      expectCreated(await ctx.store.run('createStream', createRequest(fork, { fork: { sourceName: src, offset: null, subOffset: 0 } })));
      await ctx.store.run('append', { name: src, request: appendRequest(big(2)) });
      await ctx.store.run('append', { name: src, request: appendRequest(big(3)) });
      expect(await mustGet(ctx.store, src)).toMatchObject({ earliestOffset: 2 * 700 * 1024 });
      const forked = await mustGet(ctx.store, fork);
      expect((await ctx.store.readRange(forked, 0, forked.tail)).equals(big(1))).toBe(true);
    });

    it('an age limit cuts at the newest time mark older than it: on an append, and by the sweep on a stream not written', async () => {
      const name = v1StreamKey('policy-age');
      await ctx.store.run('createStream', createRequest(name, { retention: policy({ maxAgeMs: 60_000 }) }));
      const append = (body: string) => ctx.store.run('append', { name, request: appendRequest(body) });
      const t0 = ctx.clock.nowMs;
      await append('aa');
      ctx.clock.advance(30_000);
      await append('bb');
      expect(await mustGet(ctx.store, name)).toMatchObject({ earliestOffset: 0, ageDueMs: t0 + 60_001 });
      ctx.clock.advance(31_000);
      await append('cc');
      expect(await mustGet(ctx.store, name)).toMatchObject({ earliestOffset: 2, recordFirst: 1, ageDueMs: t0 + 90_001 });
      // Nothing is written from now on: the sweep cuts, never a byte younger than the limit.
      ctx.clock.advance(60_000);
      expect(await ctx.store.run('trimAged', { limit: 100 })).toEqual({ trimmed: 1 });
      expect(await mustGet(ctx.store, name)).toMatchObject({ earliestOffset: 4, recordFirst: 2, tail: 6 });
      expect(await ctx.store.run('trimAged', { limit: 100 })).toEqual({ trimmed: 0 });
      ctx.store = await engine.reopen(ctx.store, ctx.clock);
      ctx.clock.advance(1);
      expect(await ctx.store.run('trimAged', { limit: 100 })).toEqual({ trimmed: 1 });
      const emptied = await mustGet(ctx.store, name);
      expect(emptied).toMatchObject({ earliestOffset: 6, recordFirst: 3, tail: 6 });
      expect(emptied.timeMarks).toBeUndefined();
      expect(emptied.ageDueMs).toBeUndefined();
    });

    it("the sweep applies a bucket's default age limit, read from the bucket", async () => {
      expect(await ctx.store.run('createBucket', { id: 'aging' })).toMatchObject({ kind: 'created' });
      const bucketRetention = policy({ maxAgeMs: 10_000 });
      expect(await ctx.store.run('setBucketSettings', { id: 'aging', change: { retention: bucketRetention } })).toMatchObject({ kind: 'set' });
      const name = bucketStreamKey('aging', 'logs');
      await ctx.store.run('createStream', createRequest(name, { bucket: 'aging' }));
      await ctx.store.run('append', { name, request: appendRequest('old'), bucketRetention });
      ctx.clock.advance(5_000);
      await ctx.store.run('append', { name, request: appendRequest('new'), bucketRetention });
      ctx.clock.advance(5_001);
      expect(await ctx.store.run('trimAged', { limit: 100 })).toEqual({ trimmed: 1 });
      expect(await mustGet(ctx.store, name)).toMatchObject({ earliestOffset: 3, recordFirst: 1 });
    });

    for (const json of [false, true]) {
      it(`cuts exactly where the model does over random appends (${json ? 'JSON' : 'binary'})`, async () => {
        const random = seededRandom(json ? 41 : 42);
        const p = policy({ maxBytes: 20 + random(200), maxMessages: random(3) === 0 ? null : 1 + random(12) });
        const name = v1StreamKey(`policy-model-${json}`);
        const contentType = json ? JSON_TYPE : 'application/octet-stream';
        await ctx.store.run('createStream', createRequest(name, { contentType, retention: p }));
        const ends: number[] = [];
        let tail = 0;
        let cut = 0;
        for (let i = 0; i < 60; i++) {
          const parts = json ? Array.from({ length: 1 + random(4) }, () => `${random(1000)}`.padStart(1 + random(30), '0') + '\n') : [randomBytes(random, 1 + random(60)).toString('latin1')];
          for (const part of parts) ends.push((tail += Buffer.byteLength(part, 'latin1')));
          await ctx.store.run('append', { name, request: appendRequest(Buffer.from(parts.join(''), 'latin1'), { contentType }) });
          cut = expectedCut(ends, cut, tail, p);
          const stream = await mustGet(ctx.store, name);
          expect([i, stream.earliestOffset]).toEqual([i, cut]);
          expect(messagesHeld(stream)).toBe(ends.filter((end) => end > cut).length);
          expect((await retained(ctx.store, stream)).messages).toBe(messagesHeld(stream));
        }
      });
    }
  });
}
