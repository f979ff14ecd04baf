/**
 * The storage contract: one suite, run for every engine. It drives the Store interface
 * directly (commands, reads, listings, touches, commit events) with an injected clock,
 * and states what any engine must do; expected values come from the protocol (byte
 * positions, message framing, TTL arithmetic), never from an engine.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { bucketStreamKey, v1StreamKey } from '../../src/protocol/ids.js';
import { absenceError } from '../../src/core/stream.js';
import { countRecords, hasRecords, messagesHeld } from '../../src/core/records.js';
import type { StreamState } from '../../src/core/types.js';
import type { Store } from '../../src/storage/store.js';
import {
  appendRequest,
  createRequest,
  expectAppended,
  expectCreated,
  JSON_TYPE,
  memoryEngine,
  postgresEngine,
  mustGet,
  randomBytes,
  readAll,
  refusal,
  seededRandom,
  spanContaining,
  sqliteEngine,
  TestClock,
  type AppendLog,
  type EngineUnderTest,
} from './fixtures.js';
import { retentionPolicyTests } from './retention-policy-contract.js';

const T0 = 1_700_000_000_000;

function storeContract(engine: EngineUnderTest): void {
  describe(`Store contract: ${engine.name}`, () => {
    const ctx = { clock: new TestClock(T0), store: undefined as unknown as Store };

    beforeEach(async () => {
      ctx.clock = new TestClock(T0);
      ctx.store = await engine.open(ctx.clock);
    });
    afterEach(async () => {
      await ctx.store.close();
      engine.cleanup();
    });

    rangeTests(ctx);
    jsonTests(ctx);
    forkTests(ctx);
    deleteTests(ctx);
    expiryTests(ctx);
    durabilityTests(ctx, engine);
    batchTests(ctx);
    bucketTests(ctx);
    lifecycleTests(ctx, engine);
    messageCountTests(ctx, engine);
    retentionPolicyTests(ctx, engine);
  });
}

interface Ctx {
  clock: TestClock;
  store: Store;
}

/** Appends `count` random chunks and returns what was written where. */
async function fillRandom(store: Store, name: string, seed: number, count: number, maxChunk: number): Promise<AppendLog> {
  const random = seededRandom(seed);
  const spans: AppendLog['spans'] = [];
  let tail = (await mustGet(store, name)).tail;
  for (let i = 0; i < count; i++) {
    const data = randomBytes(random, 1 + random(maxChunk));
    const receipt = expectAppended(await store.run('append', { name, request: appendRequest(data) }));
    expect(receipt).toEqual({ start: tail, next: tail + data.length, closed: false, records: null });
    spans.push({ start: tail, data });
    tail += data.length;
  }
  return { bytes: Buffer.concat(spans.map((s) => s.data)), spans };
}

/** Checks readRange against `expected` (the stream's whole history) at many positions and sizes. */
async function checkRanges(store: Store, name: string, expected: Buffer, seed: number, samples: number): Promise<void> {
  const stream = await mustGet(store, name);
  expect(stream.tail).toBe(expected.length);
  const random = seededRandom(seed);
  const tail = expected.length;
  const cases: Array<[number, number]> = [[0, tail], [0, tail + 100], [0, 1], [tail - 1, 1], [tail - 1, 50], [tail, 10]];
  for (let i = 0; i < samples; i++) cases.push([random(tail + 1), 1 + random(Math.max(1, tail))]);
  for (const [from, maxBytes] of cases) {
    const got = await store.readRange(stream, from, maxBytes);
    expect(got.equals(expected.subarray(from, Math.min(tail, from + maxBytes))), `readRange(${from}, ${maxBytes})`).toBe(true);
  }
}

function rangeTests(ctx: Ctx): void {
  describe('create, append, read', () => {
    it('stores appends contiguously and reads any range back byte for byte', async () => {
      const name = v1StreamKey('ranges');
      const created = expectCreated(await ctx.store.run('createStream', createRequest(name)));
      expect(created.tail).toBe(0);
      const log = await fillRandom(ctx.store, name, 1, 60, 300);
      await checkRanges(ctx.store, name, log.bytes, 2, 300);
    });

    it('answers the append that starts at or contains a position, and null at the tail', async () => {
      const name = v1StreamKey('chunks');
      await ctx.store.run('createStream', createRequest(name));
      const log = await fillRandom(ctx.store, name, 3, 25, 40);
      const stream = await mustGet(ctx.store, name);
      for (let p = 0; p < log.bytes.length; p++) {
        const expected = spanContaining(log, p)!;
        const got = await ctx.store.chunkAt(stream, p);
        expect(got?.start).toBe(expected.start);
        expect(got?.data.equals(expected.data)).toBe(true);
      }
      expect(await ctx.store.chunkAt(stream, log.bytes.length)).toBeNull();
    });

    it('clips a read to the tail of the state the reader holds', async () => {
      const name = v1StreamKey('snapshot-read');
      await ctx.store.run('createStream', createRequest(name));
      await ctx.store.run('append', { name, request: appendRequest('first|') });
      const before = await mustGet(ctx.store, name);
      await ctx.store.run('append', { name, request: appendRequest('second') });
      expect((await ctx.store.readRange(before, 0, 1000)).toString()).toBe('first|');
      expect((await readAll(ctx.store, name)).toString()).toBe('first|second');
    });

    it('stores the initial body of a create and a create-closed stream refuses appends', async () => {
      const name = v1StreamKey('initial');
      const created = expectCreated(await ctx.store.run('createStream', createRequest(name, { data: Buffer.from('hello'), close: true })));
      expect(created).toMatchObject({ tail: 5, closed: true });
      expect((await readAll(ctx.store, name)).toString()).toBe('hello');
      expect(refusal(await ctx.store.run('append', { name, request: appendRequest('more') }))).toBe('STREAM_CLOSED');
      expect((await mustGet(ctx.store, name)).tail).toBe(5);
    });

    it('answers an existing stream for an equal create and refuses a different one', async () => {
      const name = v1StreamKey('idempotent');
      const first = expectCreated(await ctx.store.run('createStream', createRequest(name)));
      await ctx.store.run('append', { name, request: appendRequest('abc') });
      const again = await ctx.store.run('createStream', createRequest(name));
      expect(again.kind).toBe('exists');
      expect(again.kind === 'exists' && again.stream.incarnation).toBe(first.incarnation);
      expect(refusal(await ctx.store.run('createStream', createRequest(name, { contentType: 'text/plain' })))).toBe('STREAM_CONFIG_CONFLICT');
      expect((await readAll(ctx.store, name)).toString()).toBe('abc');
    });

    it('refuses appends to a missing stream or with another content type, storing nothing', async () => {
      const name = v1StreamKey('refusals');
      expect(refusal(await ctx.store.run('append', { name, request: appendRequest('x') }))).toBe('STREAM_NOT_FOUND');
      expect(await ctx.store.getStream(name)).toBeUndefined();
      await ctx.store.run('createStream', createRequest(name));
      const mismatch = await ctx.store.run('append', { name, request: appendRequest('x', { contentType: 'text/plain' }) });
      expect(refusal(mismatch)).toBe('CONTENT_TYPE_MISMATCH');
      expect((await mustGet(ctx.store, name)).tail).toBe(0);
    });

    it('closes a stream with a close-only append and keeps its bytes', async () => {
      const name = v1StreamKey('close');
      await ctx.store.run('createStream', createRequest(name));
      await ctx.store.run('append', { name, request: appendRequest('abc') });
      const receipt = expectAppended(await ctx.store.run('append', { name, request: appendRequest('', { close: true, contentType: null }) }));
      expect(receipt).toEqual({ start: 3, next: 3, closed: true, records: null });
      expect(await mustGet(ctx.store, name)).toMatchObject({ closed: true, tail: 3 });
      expect(refusal(await ctx.store.run('append', { name, request: appendRequest('d') }))).toBe('STREAM_CLOSED');
    });
  });
}

/** Frames JSON messages the way the protocol stores them: compact text and a newline each. */
function ndjson(...messages: string[]): Buffer {
  return Buffer.from(messages.map((m) => `${m}\n`).join(''));
}

function jsonTests(ctx: Ctx): void {
  describe('JSON streams', () => {
    it('keeps message framing and every digit of big numbers', async () => {
      const name = bucketStreamKey('jsonb', 'doc');
      await ctx.store.run('createBucket', { id: 'jsonb' });
      const first = ndjson('{"a":1}', '[1,2]');
      await ctx.store.run('createStream', createRequest(name, { bucket: 'jsonb', contentType: JSON_TYPE, data: first }));
      const second = ndjson('"x"', '12345678901234567890123456789', '1.000000000000000000001');
      const receipt = expectAppended(await ctx.store.run('append', { name, request: appendRequest(second, { contentType: JSON_TYPE }) }));
      // Records: the first append made two (0 and 1), this one three more.
      expect(receipt).toEqual({ start: first.length, next: first.length + second.length, closed: false, records: { start: 2, next: 5 } });
      expect((await readAll(ctx.store, name)).equals(Buffer.concat([first, second]))).toBe(true);
      const stream = await mustGet(ctx.store, name);
      // A position inside the second message of the first append answers that whole append.
      const chunk = await ctx.store.chunkAt(stream, first.indexOf('[') + 1);
      expect(chunk).toEqual({ start: 0, data: first });
    });

    it('forks at message boundaries only, and a sub-offset counts messages', async () => {
      const src = v1StreamKey('json-src');
      const a = ndjson('{"n":1}', '{"n":2}');
      const b = ndjson('{"n":3}', '{"n":4}', '{"n":5}');
      await ctx.store.run('createStream', createRequest(src, { contentType: JSON_TYPE, data: a }));
      await ctx.store.run('append', { name: src, request: appendRequest(b, { contentType: JSON_TYPE }) });
      const inside = createRequest(v1StreamKey('json-bad'), { contentType: null, fork: { sourceName: src, offset: 3, subOffset: 0 } });
      expect(refusal(await ctx.store.run('createStream', inside))).toBe('INVALID_FORK');
      const boundary = ndjson('{"n":1}').length;
      const atBoundary = createRequest(v1StreamKey('json-f1'), { contentType: null, fork: { sourceName: src, offset: boundary, subOffset: 0 } });
      expect(expectCreated(await ctx.store.run('createStream', atBoundary))).toMatchObject({ tail: boundary, config: { contentType: JSON_TYPE } });
      const twoOfB = createRequest(v1StreamKey('json-f2'), { contentType: null, fork: { sourceName: src, offset: a.length, subOffset: 2 } });
      const fork = expectCreated(await ctx.store.run('createStream', twoOfB));
      const expected = Buffer.concat([a, ndjson('{"n":3}', '{"n":4}')]);
      expect(fork.tail).toBe(expected.length);
      expect((await readAll(ctx.store, fork.name)).equals(expected)).toBe(true);
      const tooMany = createRequest(v1StreamKey('json-f3'), { contentType: null, fork: { sourceName: src, offset: a.length, subOffset: 4 } });
      expect(refusal(await ctx.store.run('createStream', tooMany))).toBe('INVALID_FORK');
    });
  });
}

function forkTests(ctx: Ctx): void {
  describe('forks', () => {
    it('reads below the fork point from the source and above it from the fork', async () => {
      const s = v1StreamKey('src');
      await ctx.store.run('createStream', createRequest(s));
      for (const part of ['aaaa', 'bbbb', 'cccc']) await ctx.store.run('append', { name: s, request: appendRequest(part) });
      // Binary streams may fork inside an append.
      const f1 = expectCreated(await ctx.store.run('createStream', createRequest(v1StreamKey('f1'), { fork: { sourceName: s, offset: 6, subOffset: 0 } })));
      expect(f1.tail).toBe(6);
      expect(expectAppended(await ctx.store.run('append', { name: f1.name, request: appendRequest('XY') }))).toEqual({ start: 6, next: 8, closed: false, records: null });
      await ctx.store.run('append', { name: s, request: appendRequest('dddd') });
      expect((await readAll(ctx.store, s)).toString()).toBe('aaaabbbbccccdddd');
      expect((await readAll(ctx.store, f1.name)).toString()).toBe('aaaabbXY');
      const fork = await mustGet(ctx.store, f1.name);
      expect((await ctx.store.readRange(fork, 4, 3)).toString()).toBe('bbX');
      expect((await ctx.store.readRange(fork, 5, 100)).toString()).toBe('bXY');
      expect(await ctx.store.chunkAt(fork, 5)).toEqual({ start: 4, data: Buffer.from('bb') });
      expect(await ctx.store.chunkAt(fork, 6)).toEqual({ start: 6, data: Buffer.from('XY') });
      expect((await mustGet(ctx.store, s)).forkRefs).toBe(1);
    });

    it('follows a chain of forks, and a fork without an offset forks at the tail', async () => {
      const s = v1StreamKey('chain-a');
      await ctx.store.run('createStream', createRequest(s, { data: Buffer.from('0123') }));
      await ctx.store.run('append', { name: s, request: appendRequest('4567') });
      const b = v1StreamKey('chain-b');
      expect(expectCreated(await ctx.store.run('createStream', createRequest(b, { fork: { sourceName: s, offset: null, subOffset: 0 } }))).tail).toBe(8);
      await ctx.store.run('append', { name: b, request: appendRequest('BBBB') });
      const c = v1StreamKey('chain-c');
      await ctx.store.run('createStream', createRequest(c, { fork: { sourceName: b, offset: 10, subOffset: 0 } }));
      await ctx.store.run('append', { name: c, request: appendRequest('CC') });
      await ctx.store.run('append', { name: s, request: appendRequest('zz') });
      await ctx.store.run('append', { name: b, request: appendRequest('yy') });
      expect((await readAll(ctx.store, s)).toString()).toBe('01234567zz');
      expect((await readAll(ctx.store, b)).toString()).toBe('01234567BBBByy');
      expect((await readAll(ctx.store, c)).toString()).toBe('01234567BBCC');
      await checkRanges(ctx.store, c, Buffer.from('01234567BBCC'), 9, 80);
      const chain = await mustGet(ctx.store, c);
      expect(await ctx.store.chunkAt(chain, 2)).toEqual({ start: 0, data: Buffer.from('0123') });
      expect(await ctx.store.chunkAt(chain, 9)).toEqual({ start: 8, data: Buffer.from('BB') });
    });

    it('copies a sub-offset prefix of the append at the fork offset', async () => {
      const s = v1StreamKey('sub-src');
      await ctx.store.run('createStream', createRequest(s, { data: Buffer.from('aaaa') }));
      await ctx.store.run('append', { name: s, request: appendRequest('bbbbbb') });
      const fork = expectCreated(await ctx.store.run('createStream', createRequest(v1StreamKey('sub-f'), { fork: { sourceName: s, offset: 4, subOffset: 2 } })));
      expect(fork.tail).toBe(6);
      await ctx.store.run('append', { name: fork.name, request: appendRequest('Q') });
      expect((await readAll(ctx.store, fork.name)).toString()).toBe('aaaabbQ');
      const beyond = createRequest(v1StreamKey('sub-g'), { fork: { sourceName: s, offset: 4, subOffset: 7 } });
      expect(refusal(await ctx.store.run('createStream', beyond))).toBe('INVALID_FORK');
      const past = createRequest(v1StreamKey('sub-h'), { fork: { sourceName: s, offset: 11, subOffset: 0 } });
      expect(refusal(await ctx.store.run('createStream', past))).toBe('INVALID_FORK');
      const missing = createRequest(v1StreamKey('sub-i'), { fork: { sourceName: v1StreamKey('nope'), offset: null, subOffset: 0 } });
      expect(refusal(await ctx.store.run('createStream', missing))).toBe('STREAM_NOT_FOUND');
    });

    it('reads random ranges of a fork of a randomly written source', async () => {
      const s = v1StreamKey('rnd-src');
      await ctx.store.run('createStream', createRequest(s));
      const source = await fillRandom(ctx.store, s, 11, 30, 64);
      const random = seededRandom(12);
      const offset = random(source.bytes.length + 1);
      const f = v1StreamKey('rnd-fork');
      await ctx.store.run('createStream', createRequest(f, { fork: { sourceName: s, offset, subOffset: 0 } }));
      const own = await fillRandom(ctx.store, f, 13, 20, 64);
      await fillRandom(ctx.store, s, 14, 5, 64);
      await checkRanges(ctx.store, f, Buffer.concat([source.bytes.subarray(0, offset), own.bytes]), 15, 200);
    });
  });
}

async function forkOf(store: Store, source: string, name: string): Promise<string> {
  expectCreated(await store.run('createStream', createRequest(name, { fork: { sourceName: source, offset: null, subOffset: 0 } })));
  return name;
}

function deleteTests(ctx: Ctx): void {
  describe('delete', () => {
    it('drops a stream with its data; a new stream at the name starts empty', async () => {
      const name = v1StreamKey('del');
      const first = expectCreated(await ctx.store.run('createStream', createRequest(name, { data: Buffer.from('old bytes') })));
      expect(await ctx.store.run('deleteStream', { name, incarnation: null })).toEqual({ kind: 'dropped' });
      expect(await ctx.store.getStream(name)).toBeUndefined();
      expect(refusal(await ctx.store.run('deleteStream', { name, incarnation: null }))).toBe('STREAM_NOT_FOUND');
      const second = expectCreated(await ctx.store.run('createStream', createRequest(name)));
      expect(second.id).not.toBe(first.id);
      expect(second.incarnation).not.toBe(first.incarnation);
      expect(second.tail).toBe(0);
      await ctx.store.run('append', { name, request: appendRequest('new') });
      expect((await readAll(ctx.store, name)).toString()).toBe('new');
    });

    it('keeps a deleted fork source as gone (410) while forks read it, then collects it', async () => {
      const s = v1StreamKey('gone-src');
      await ctx.store.run('createStream', createRequest(s, { data: Buffer.from('history') }));
      const f = await forkOf(ctx.store, s, v1StreamKey('gone-fork'));
      expect((await ctx.store.run('deleteStream', { name: s, incarnation: null })).kind).toBe('soft-deleted');
      const gone = await mustGet(ctx.store, s);
      expect(gone.deleted).toBe(true);
      expect(absenceError(gone, ctx.clock.nowMs)?.code).toBe('STREAM_GONE');
      expect((await readAll(ctx.store, f)).toString()).toBe('history');
      expect(refusal(await ctx.store.run('append', { name: s, request: appendRequest('x') }))).toBe('STREAM_GONE');
      expect(refusal(await ctx.store.run('createStream', createRequest(s)))).toBe('STREAM_NAME_RESERVED');
      expect(refusal(await ctx.store.run('createStream', createRequest(v1StreamKey('late'), { fork: { sourceName: s, offset: null, subOffset: 0 } })))).toBe('FORK_SOURCE_GONE');
      expect(refusal(await ctx.store.run('deleteStream', { name: s, incarnation: null }))).toBe('STREAM_GONE');
      expect(await ctx.store.run('deleteStream', { name: f, incarnation: null })).toEqual({ kind: 'dropped' });
      expect(await ctx.store.getStream(s)).toBeUndefined();
      expectCreated(await ctx.store.run('createStream', createRequest(s)));
      expect((await readAll(ctx.store, s)).length).toBe(0);
    });

    it('collects a chain of deleted sources when the last fork goes', async () => {
      const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((n) => v1StreamKey(`cascade-${n}`)) as [string, string, string, string];
      await ctx.store.run('createStream', createRequest(a, { data: Buffer.from('A') }));
      await forkOf(ctx.store, a, b);
      await forkOf(ctx.store, b, c);
      await forkOf(ctx.store, a, d);
      const dropped: string[] = [];
      ctx.store.onCommit((events) => events.forEach((e) => e.stream === undefined && dropped.push(e.name)));
      expect((await ctx.store.run('deleteStream', { name: a, incarnation: null })).kind).toBe('soft-deleted');
      expect((await ctx.store.run('deleteStream', { name: b, incarnation: null })).kind).toBe('soft-deleted');
      expect((await ctx.store.run('deleteStream', { name: c, incarnation: null })).kind).toBe('dropped');
      expect(dropped.sort()).toEqual([b, c].sort());
      expect(await ctx.store.getStream(b)).toBeUndefined();
      expect(await mustGet(ctx.store, a)).toMatchObject({ deleted: true, forkRefs: 1 });
      expect((await readAll(ctx.store, d)).toString()).toBe('A');
      await ctx.store.run('deleteStream', { name: d, incarnation: null });
      expect(dropped.sort()).toEqual([a, b, c, d].sort());
      expect(await ctx.store.getStream(a)).toBeUndefined();
    });
  });
}

function expiryTests(ctx: Ctx): void {
  describe('TTL and expiry', () => {
    const sweep = async (atMs: number): Promise<number> => {
      ctx.clock.nowMs = atMs;
      return (await ctx.store.run('expireStreams', { limit: 100 })).expired;
    };

    it('expires a sliding TTL after the last write, not before', async () => {
      const name = v1StreamKey('ttl-write');
      await ctx.store.run('createStream', createRequest(name, { ttlSeconds: 10 }));
      expect(await sweep(T0 + 9_999)).toBe(0);
      ctx.clock.nowMs = T0 + 5_000;
      await ctx.store.run('append', { name, request: appendRequest('renew') });
      expect((await mustGet(ctx.store, name)).lastAccessMs).toBe(T0 + 5_000);
      expect(await sweep(T0 + 14_999)).toBe(0);
      expect((await readAll(ctx.store, name)).toString()).toBe('renew');
      expect(await sweep(T0 + 15_000)).toBe(1);
      expect(await ctx.store.getStream(name)).toBeUndefined();
    });

    it('renews a sliding TTL on touch (a read), and an earlier touch never shortens it', async () => {
      const name = v1StreamKey('ttl-touch');
      await ctx.store.run('createStream', createRequest(name, { ttlSeconds: 10 }));
      ctx.store.touch(await mustGet(ctx.store, name), T0 + 8_000);
      expect((await mustGet(ctx.store, name)).lastAccessMs).toBe(T0 + 8_000);
      expect(await sweep(T0 + 17_999)).toBe(0);
      ctx.store.touch(await mustGet(ctx.store, name), T0 + 3_000);
      expect(await sweep(T0 + 17_999)).toBe(0);
      expect((await mustGet(ctx.store, name)).lastAccessMs).toBe(T0 + 8_000);
      expect(await sweep(T0 + 18_000)).toBe(1);
      expect(await ctx.store.getStream(name)).toBeUndefined();
    });

    it('expires at an absolute time that writes and reads do not move', async () => {
      const name = v1StreamKey('abs');
      const untouched = v1StreamKey('no-ttl');
      await ctx.store.run('createStream', createRequest(name, { expiresAtMs: T0 + 3_000 }));
      await ctx.store.run('createStream', createRequest(untouched));
      ctx.clock.nowMs = T0 + 2_000;
      await ctx.store.run('append', { name, request: appendRequest('x') });
      ctx.store.touch(await mustGet(ctx.store, name), T0 + 2_500);
      ctx.store.touch(await mustGet(ctx.store, untouched), T0 + 2_500);
      expect(await sweep(T0 + 2_999)).toBe(0);
      expect(await sweep(T0 + 3_000)).toBe(1);
      expect(await ctx.store.getStream(name)).toBeUndefined();
      expect(await sweep(T0 + 10 * 365 * 86_400_000)).toBe(0);
      expect(await mustGet(ctx.store, untouched)).toMatchObject({ lastAccessMs: T0 });
    });

    it('sweeps at most `limit` streams per command', async () => {
      for (let i = 0; i < 5; i++) await ctx.store.run('createStream', createRequest(v1StreamKey(`many-${i}`), { ttlSeconds: 1 }));
      ctx.clock.nowMs = T0 + 1_000;
      expect((await ctx.store.run('expireStreams', { limit: 2 })).expired).toBe(2);
      expect((await ctx.store.run('expireStreams', { limit: 2 })).expired).toBe(2);
      expect((await ctx.store.run('expireStreams', { limit: 2 })).expired).toBe(1);
      expect((await ctx.store.run('expireStreams', { limit: 2 })).expired).toBe(0);
    });

    it('keeps an expired fork source as gone until its last fork goes', async () => {
      const s = v1StreamKey('exp-src');
      await ctx.store.run('createStream', createRequest(s, { ttlSeconds: 5, data: Buffer.from('kept') }));
      const f = v1StreamKey('exp-fork');
      await ctx.store.run('createStream', createRequest(f, { ttlSeconds: 3600, fork: { sourceName: s, offset: null, subOffset: 0 } }));
      expect(await sweep(T0 + 5_000)).toBe(1);
      expect(await mustGet(ctx.store, s)).toMatchObject({ deleted: true, forkRefs: 1 });
      expect((await readAll(ctx.store, f)).toString()).toBe('kept');
      await ctx.store.run('deleteStream', { name: f, incarnation: null });
      expect(await ctx.store.getStream(s)).toBeUndefined();
    });

    it('lets a new stream take the name of an expired one before the sweep, without its bytes', async () => {
      const name = v1StreamKey('reuse');
      const old = expectCreated(await ctx.store.run('createStream', createRequest(name, { ttlSeconds: 1, data: Buffer.from('stale') })));
      ctx.clock.nowMs = T0 + 1_000;
      const fresh = expectCreated(await ctx.store.run('createStream', createRequest(name)));
      expect(fresh.incarnation).not.toBe(old.incarnation);
      expect(fresh.tail).toBe(0);
      expect((await readAll(ctx.store, name)).length).toBe(0);
      expect(await sweep(T0 + 100_000)).toBe(0);
    });
  });
}

function durabilityTests(ctx: Ctx, engine: EngineUnderTest): void {
  describe('state that must survive (reopen for durable engines)', () => {
    it('bucket settings round-trip: a change merges into the stored ones, survives a reopen, and needs the bucket', async () => {
      await ctx.store.run('createBucket', { id: 'tuned' });
      const first = await ctx.store.run('setBucketSettings', { id: 'tuned', change: { publicRead: true, limits: { maxStreams: 3 } } });
      const set = { publicRead: true, limits: { maxStreams: 3, maxSubscriptions: null, maxBytes: null } };
      expect(first).toEqual({ kind: 'set', bucket: { id: 'tuned', createdAtMs: T0, settings: set } });
      // A change names only what it changes; null puts a limit back to the server-wide one.
      const second = await ctx.store.run('setBucketSettings', { id: 'tuned', change: { limits: { maxSubscriptions: 0, maxBytes: 2 ** 40 } } });
      const merged = { publicRead: true, limits: { maxStreams: 3, maxSubscriptions: 0, maxBytes: 2 ** 40 } };
      expect(second).toMatchObject({ kind: 'set', bucket: { settings: merged } });
      expect(await ctx.store.run('createBucket', { id: 'tuned' })).toEqual({ kind: 'exists', bucket: { id: 'tuned', createdAtMs: T0, settings: merged } });
      expect(refusal(await ctx.store.run('setBucketSettings', { id: 'absent', change: { publicRead: true } }))).toBe('BUCKET_NOT_FOUND');
      expect(await ctx.store.getBucket('absent')).toBeUndefined();

      ctx.store = await engine.reopen(ctx.store, ctx.clock);

      expect(await ctx.store.getBucket('tuned')).toEqual({ id: 'tuned', createdAtMs: T0, streamCount: 0, settings: merged });
      expect(await ctx.store.bucketSettings('tuned')).toEqual(merged);
      expect(await ctx.store.bucketSettings('absent')).toBeUndefined();
      await ctx.store.run('setBucketSettings', { id: 'tuned', change: { publicRead: false, limits: { maxStreams: null } } });
      expect((await ctx.store.getBucket('tuned'))?.settings).toEqual({ publicRead: false, limits: { maxStreams: null, maxSubscriptions: 0, maxBytes: 2 ** 40 } });
      // A deleted bucket takes its settings with it: created again, it has none.
      await ctx.store.run('deleteBucket', { id: 'tuned' });
      await ctx.store.run('createBucket', { id: 'tuned' });
      expect(await ctx.store.getBucket('tuned')).toEqual({ id: 'tuned', createdAtMs: T0, streamCount: 0 });
      expect(await ctx.store.bucketSettings('tuned')).toBeUndefined();
    });

    it('keeps streams, bytes, producers, Stream-Seq, incarnations and forks', async () => {
      await ctx.store.run('createBucket', { id: 'keep' });
      const name = bucketStreamKey('keep', 'log');
      await ctx.store.run('createStream', createRequest(name, { bucket: 'keep', ttlSeconds: 3600 }));
      const producer = { id: 'writer-1', epoch: 0, seq: 0 };
      const r0 = expectAppended(await ctx.store.run('append', { name, request: appendRequest('p0|', { producer }) }));
      const r1 = expectAppended(await ctx.store.run('append', { name, request: appendRequest('p1|', { producer: { ...producer, seq: 1 }, streamSeq: '0005' }) }));
      const closedName = v1StreamKey('closed');
      await ctx.store.run('createStream', createRequest(closedName, { data: Buffer.from('end'), close: true }));
      await forkOf(ctx.store, name, v1StreamKey('kept-fork'));
      await ctx.store.run('deleteStream', { name, incarnation: null });
      const before = await Promise.all([name, closedName, v1StreamKey('kept-fork')].map((n) => mustGet(ctx.store, n)));

      ctx.store = await engine.reopen(ctx.store, ctx.clock);

      const after = await Promise.all(before.map((s) => mustGet(ctx.store, s.name)));
      expect(after).toEqual(before);
      expect(after[0]).toMatchObject({ tail: 6, lastStreamSeq: '0005', deleted: true, forkRefs: 1 });
      expect((await readAll(ctx.store, v1StreamKey('kept-fork'))).toString()).toBe('p0|p1|');
      expect((await readAll(ctx.store, closedName)).toString()).toBe('end');
      expect(r1).toEqual({ start: 3, next: 6, closed: false, records: null });
      expect(r0.start).toBe(0);
      const bucket = await ctx.store.getBucket('keep');
      expect(bucket).toMatchObject({ id: 'keep', streamCount: 0 });
    });

    it('answers a repeated producer write as a duplicate with its original receipt', async () => {
      const name = v1StreamKey('dedupe');
      await ctx.store.run('createStream', createRequest(name));
      const producer = { id: 'p', epoch: 3, seq: 0 };
      await ctx.store.run('append', { name, request: appendRequest('aa', { producer }) });
      const receipt = expectAppended(await ctx.store.run('append', { name, request: appendRequest('bbb', { producer: { ...producer, seq: 1 } }) }));
      const incarnation = (await mustGet(ctx.store, name)).incarnation;

      ctx.store = await engine.reopen(ctx.store, ctx.clock);

      const again = await ctx.store.run('append', { name, request: appendRequest('bbb', { producer: { ...producer, seq: 1 } }) });
      expect(again).toMatchObject({ kind: 'duplicate', incarnation, receipt, producer: { epoch: 3, seq: 1 } });
      expect(refusal(await ctx.store.run('append', { name, request: appendRequest('old', { producer: { ...producer, epoch: 2 } }) }))).toBe('PRODUCER_FENCED');
      expect(expectAppended(await ctx.store.run('append', { name, request: appendRequest('c', { producer: { ...producer, seq: 2 } }) }))).toEqual({ start: 5, next: 6, closed: false, records: null });
      expect((await readAll(ctx.store, name)).toString()).toBe('aabbbc');
    });

    it('lists a stream\'s producer records in UTF-8 byte order of their ids, paged by after and limit, before and after a reopen', async () => {
      const name = v1StreamKey('writers');
      await ctx.store.run('createStream', createRequest(name));
      // UTF-16 puts the emoji (a surrogate pair, 0xD83D) before the fullwidth letter (0xFF21); UTF-8 bytes put it after (0xF0 > 0xEF).
      const ids = ['b', '\u{1F600}', 'a', '\uFF21', 'Z'];
      const seenMs: Record<string, number> = {};
      for (const [i, id] of ids.entries()) {
        seenMs[id] = ctx.clock.advance(1000);
        expectAppended(await ctx.store.run('append', { name, request: appendRequest(`m${i}|`, { producer: { id, epoch: i, seq: 0 } }) }));
      }
      expectAppended(await ctx.store.run('append', { name, request: appendRequest('again|', { producer: { id: 'a', epoch: 2, seq: 1 } }) }));
      const order = ['Z', 'a', 'b', '\uFF21', '\u{1F600}'];
      const expectListing = async (): Promise<void> => {
        const stream = await mustGet(ctx.store, name);
        const first = await ctx.store.listProducers(stream, null, 2);
        expect(first.producers.map((p) => p.id)).toEqual(order.slice(0, 2));
        expect(first.nextAfter).toBe('a');
        expect(first.producers[1]).toMatchObject({ id: 'a', epoch: 2, lastSeq: 1, lastSeenMs: seenMs['Z'] });
        const second = await ctx.store.listProducers(stream, first.nextAfter, 2);
        expect(second.producers.map((p) => p.id)).toEqual(order.slice(2, 4));
        const last = await ctx.store.listProducers(stream, second.nextAfter, 2);
        expect(last.producers.map((p) => ({ id: p.id, epoch: p.epoch, lastSeq: p.lastSeq, lastSeenMs: p.lastSeenMs }))).toEqual([{ id: '\u{1F600}', epoch: 1, lastSeq: 0, lastSeenMs: seenMs['\u{1F600}'] }]);
        expect(last.nextAfter).toBeNull();
        expect((await ctx.store.listProducers(stream, null, 10)).producers).toHaveLength(5);
      };
      await expectListing();
      ctx.store = await engine.reopen(ctx.store, ctx.clock);
      await expectListing();
      await ctx.store.run('createStream', createRequest(v1StreamKey('quiet')));
      expect(await ctx.store.listProducers(await mustGet(ctx.store, v1StreamKey('quiet')), null, 10)).toEqual({ producers: [], nextAfter: null });
    });

    it('never reuses a stream id or an incarnation', async () => {
      const seen = new Set<string>();
      const ids = new Set<number>();
      const name = v1StreamKey('reborn');
      for (let round = 0; round < 3; round++) {
        const s = expectCreated(await ctx.store.run('createStream', createRequest(name)));
        expect(seen.has(s.incarnation) || ids.has(s.id)).toBe(false);
        seen.add(s.incarnation);
        ids.add(s.id);
        await ctx.store.run('deleteStream', { name, incarnation: null });
        ctx.store = await engine.reopen(ctx.store, ctx.clock);
      }
    });
  });
}

function batchTests(ctx: Ctx): void {
  describe('group commit', () => {
    it('commits concurrent commands together, in arrival order, visible only once committed', async () => {
      const name = v1StreamKey('batch');
      await ctx.store.run('createStream', createRequest(name));
      const bodies = Array.from({ length: 300 }, (_, i) => Buffer.from(`${i}:${'x'.repeat(i % 17)};`));
      const total = bodies.reduce((n, b) => n + b.length, 0);
      const commits: number[] = [];
      ctx.store.onCommit((events) => commits.push(...events.filter((e) => e.name === name).map((e) => e.stream!.tail)));
      const pending = bodies.map((data) => ctx.store.run('append', { name, request: appendRequest(data) }));
      // A read issued now may finish before the batch commits or after it (PostgreSQL answers
      // it over the network, and the commit can win): it sees none of the batch or all of it,
      // never a part. A run with two files at once saw 3757, the whole batch, here.
      expect([0, total]).toContain((await mustGet(ctx.store, name)).tail);
      const tailAtFirstAck = pending[0]!.then(async () => (await mustGet(ctx.store, name)).tail);
      const receipts = (await Promise.all(pending)).map(expectAppended);
      expect(await tailAtFirstAck).toBe(total);
      expect(commits).toEqual([total]);
      let position = 0;
      receipts.forEach((r, i) => {
        expect(r).toEqual({ start: position, next: position + bodies[i]!.length, closed: false, records: null });
        position += bodies[i]!.length;
      });
      expect((await readAll(ctx.store, name)).equals(Buffer.concat(bodies))).toBe(true);
    });

    it('keeps arrival order across batches and between commands on the same stream', async () => {
      const name = v1StreamKey('ordered');
      const early = ctx.store.run('append', { name, request: appendRequest('too early') });
      const create = ctx.store.run('createStream', createRequest(name));
      const bodies = Array.from({ length: 2_100 }, (_, i) => Buffer.from(`${i},`));
      const appends = bodies.map((data) => ctx.store.run('append', { name, request: appendRequest(data) }));
      const wrongType = ctx.store.run('append', { name, request: appendRequest('t', { contentType: 'text/plain' }) });
      expect(refusal(await early)).toBe('STREAM_NOT_FOUND');
      expectCreated(await create);
      const receipts = (await Promise.all(appends)).map(expectAppended);
      expect(refusal(await wrongType)).toBe('CONTENT_TYPE_MISMATCH');
      for (let i = 1; i < receipts.length; i++) expect(receipts[i]!.start).toBe(receipts[i - 1]!.next);
      expect((await readAll(ctx.store, name)).equals(Buffer.concat(bodies))).toBe(true);
    });

    it('tells commit listeners what changed and stops when they unsubscribe', async () => {
      const seen: Array<{ name: string; tail: number | null }> = [];
      const stop = ctx.store.onCommit((events) => seen.push(...events.map((e) => ({ name: e.name, tail: e.stream?.tail ?? null }))));
      const a = v1StreamKey('ev-a');
      await ctx.store.run('createStream', createRequest(a, { data: Buffer.from('12') }));
      await ctx.store.run('append', { name: a, request: appendRequest('345') });
      const refused = await ctx.store.run('append', { name: v1StreamKey('ev-none'), request: appendRequest('x') });
      expect(refused.kind).toBe('rejected');
      await ctx.store.run('deleteStream', { name: a, incarnation: null });
      stop();
      await ctx.store.run('createStream', createRequest(v1StreamKey('ev-b')));
      expect(seen).toEqual([
        { name: a, tail: 2 },
        { name: a, tail: 5 },
        { name: a, tail: null },
      ]);
    });

    it('refuses commands after close', async () => {
      await ctx.store.close();
      await expect(ctx.store.run('createBucket', { id: 'late' })).rejects.toThrow();
    });
  });
}

async function createIn(store: Store, bucket: string, ids: string[], overrides = {}): Promise<void> {
  for (const id of ids) expectCreated(await store.run('createStream', createRequest(bucketStreamKey(bucket, id), { bucket, ...overrides })));
}

/** Every page of a listing, following `nextAfter`. */
async function pages(store: Store, bucket: string, prefix: string, limit: number): Promise<string[][]> {
  const out: string[][] = [];
  let after: string | null = null;
  for (let guard = 0; guard < 100; guard++) {
    const page = await store.listStreams(bucket, prefix, after, limit);
    out.push(page.names);
    if (page.nextAfter === null) return out;
    expect(page.nextAfter).toBe(page.names[page.names.length - 1]);
    after = page.nextAfter;
  }
  throw new Error('listing did not end');
}

/** UTF-8 byte order: what a listing sorts by. */
const byBytes = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

function bucketTests(ctx: Ctx): void {
  describe('buckets and listings', () => {
    it('creates a bucket once and counts only its live streams', async () => {
      const created = await ctx.store.run('createBucket', { id: 'count' });
      expect(created).toEqual({ kind: 'created', bucket: { id: 'count', createdAtMs: T0 } });
      ctx.clock.advance(5);
      expect(await ctx.store.run('createBucket', { id: 'count' })).toEqual({ kind: 'exists', bucket: { id: 'count', createdAtMs: T0 } });
      expect(await ctx.store.getBucket('count')).toEqual({ id: 'count', createdAtMs: T0, streamCount: 0 });
      expect(await ctx.store.getBucket('nope')).toBeUndefined();
      await ctx.store.run('createBucket', { id: 'count-other' });
      await createIn(ctx.store, 'count', ['a', 'b', 'c']);
      await createIn(ctx.store, 'count', ['short'], { ttlSeconds: 1 });
      await createIn(ctx.store, 'count-other', ['a']);
      expect((await ctx.store.getBucket('count'))?.streamCount).toBe(4);
      ctx.clock.nowMs = T0 + 1_005;
      expect((await ctx.store.getBucket('count'))?.streamCount).toBe(3);
      await ctx.store.run('deleteStream', { name: bucketStreamKey('count', 'a'), incarnation: null });
      expect((await ctx.store.getBucket('count'))?.streamCount).toBe(2);
      expect((await ctx.store.getBucket('count-other'))?.streamCount).toBe(1);
    });

    it('refuses to delete a bucket that holds streams; one whose streams are deleted but kept for forks is deleted, the forks still reading them', async () => {
      await ctx.store.run('createBucket', { id: 'holder' });
      await createIn(ctx.store, 'holder', ['src']);
      const src = bucketStreamKey('holder', 'src');
      await ctx.store.run('append', { name: src, request: appendRequest('history') });
      await forkOf(ctx.store, src, v1StreamKey('outside-fork'));
      expect(refusal(await ctx.store.run('deleteBucket', { id: 'holder' }))).toBe('BUCKET_NOT_EMPTY');
      await ctx.store.run('deleteStream', { name: src, incarnation: null });
      expect((await ctx.store.getBucket('holder'))?.streamCount).toBe(0);
      expect((await ctx.store.listStreams('holder', '', null, 10)).names).toEqual([]);
      // What the listing shows is what holds the bucket: nothing.
      expect(await ctx.store.run('deleteBucket', { id: 'holder' })).toEqual({ kind: 'deleted' });
      expect((await readAll(ctx.store, v1StreamKey('outside-fork'))).toString()).toBe('history');
      expect(await ctx.store.getBucket('holder')).toBeUndefined();
      expect(refusal(await ctx.store.run('deleteBucket', { id: 'holder' }))).toBe('BUCKET_NOT_FOUND');
      expect(refusal(await ctx.store.run('createStream', createRequest(bucketStreamKey('holder', 'x'), { bucket: 'holder' })))).toBe('BUCKET_NOT_FOUND');
    });

    it('deletes a bucket whose streams all expired, before the sweep: collects them, keeping one a fork reads', async () => {
      await ctx.store.run('createBucket', { id: 'expiring' });
      await createIn(ctx.store, 'expiring', ['a', 'b'], { ttlSeconds: 1 });
      await createIn(ctx.store, 'expiring', ['kept-src'], { ttlSeconds: 1 });
      await ctx.store.run('append', { name: bucketStreamKey('expiring', 'kept-src'), request: appendRequest('kept') });
      const fork = createRequest(v1StreamKey('long-fork'), { ttlSeconds: 3600, fork: { sourceName: bucketStreamKey('expiring', 'kept-src'), offset: null, subOffset: 0 } });
      expectCreated(await ctx.store.run('createStream', fork));
      ctx.clock.nowMs = T0 + 1_000;
      expect((await ctx.store.getBucket('expiring'))?.streamCount).toBe(0);
      expect(await mustGet(ctx.store, bucketStreamKey('expiring', 'a'))).toMatchObject({ tail: 0 });
      expect(await ctx.store.run('deleteBucket', { id: 'expiring' })).toEqual({ kind: 'deleted' });
      for (const id of ['a', 'b']) expect(await ctx.store.getStream(bucketStreamKey('expiring', id))).toBeUndefined();
      // The expired source a fork reads is soft-deleted, as the sweep would, not dropped.
      expect(await mustGet(ctx.store, bucketStreamKey('expiring', 'kept-src'))).toMatchObject({ deleted: true });
      expect((await readAll(ctx.store, v1StreamKey('long-fork'))).toString()).toBe('kept');
      await ctx.store.run('createBucket', { id: 'expiring' });
      expect(await ctx.store.listStreams('expiring', '', null, 10)).toEqual({ names: [], nextAfter: null });
    });

    it('lists a bucket sorted by bytes, filtered by prefix, paginated by after and limit', async () => {
      const ids = ['b', 'a', 'a1', 'a10', 'a2', 'ab', 'b-x', 'B', 'c', 'é', 'z', '\u{ff61}', '\u{1f600}', 'a a'];
      await ctx.store.run('createBucket', { id: 'list' });
      await ctx.store.run('createBucket', { id: 'lis' });
      await ctx.store.run('createBucket', { id: 'list2' });
      await createIn(ctx.store, 'list', ids);
      await createIn(ctx.store, 'lis', ['a0', 't-a']);
      await createIn(ctx.store, 'list2', ['a3']);
      const sorted = [...ids].sort(byBytes);
      expect((await ctx.store.listStreams('list', '', null, 1000)).names).toEqual(sorted);
      for (const limit of [1, 3, 5, ids.length, ids.length + 1]) {
        const all = await pages(ctx.store, 'list', '', limit);
        expect(all.flat()).toEqual(sorted);
        expect(all.every((p) => p.length <= limit)).toBe(true);
        expect(all.length).toBe(Math.max(1, Math.ceil(ids.length / limit)));
      }
      expect((await ctx.store.listStreams('list', 'a', null, 1000)).names).toEqual(['a', 'a a', 'a1', 'a10', 'a2', 'ab']);
      expect(await ctx.store.listStreams('list', 'a', 'a10', 1000)).toEqual({ names: ['a2', 'ab'], nextAfter: null });
      expect(await ctx.store.listStreams('list', 'a', 'a10', 1)).toEqual({ names: ['a2'], nextAfter: 'a2' });
      expect((await ctx.store.listStreams('list', 'a', 'b', 1000)).names).toEqual([]);
      expect((await ctx.store.listStreams('list', 'b', 'a', 1000)).names).toEqual(['b', 'b-x']);
      expect((await ctx.store.listStreams('list', 'b', 'b', 1000)).names).toEqual(['b-x']);
      expect((await ctx.store.listStreams('list', 'é', null, 1000)).names).toEqual(['é']);
      expect((await ctx.store.listStreams('list', 'q', null, 1000)).names).toEqual([]);
      // U+1F600 sorts after U+FF61 in UTF-8 bytes (though not in UTF-16 code units).
      expect((await ctx.store.listStreams('list', '', '\u{ff61}', 1000)).names).toEqual(['\u{1f600}']);
      expect((await ctx.store.listStreams('list', '\u{ff61}', '\u{1f600}', 1000)).names).toEqual([]);
      expect(await pages(ctx.store, 'list', 'a', 2)).toEqual([['a', 'a a'], ['a1', 'a10'], ['a2', 'ab']]);
      expect((await ctx.store.listStreams('lis', '', null, 10)).names).toEqual(['a0', 't-a']);
    });

    it('totals count the streams not deleted, and the bytes and messages they hold', async () => {
      await ctx.store.run('createBucket', { id: 'tot' });
      await createIn(ctx.store, 'tot', ['x', 'gone']);
      const x = bucketStreamKey('tot', 'x');
      // Ten appends: with tiny seal marks some are indexed and some still recent.
      for (let i = 0; i < 10; i++) await ctx.store.run('append', { name: x, request: appendRequest(`x${i}`) });
      await ctx.store.run('append', { name: bucketStreamKey('tot', 'gone'), request: appendRequest('doomed') });
      const src = v1StreamKey('tot-src');
      expectCreated(await ctx.store.run('createStream', createRequest(src)));
      await ctx.store.run('append', { name: src, request: appendRequest('hello') });
      const fork = await forkOf(ctx.store, src, v1StreamKey('tot-fork'));
      await ctx.store.run('append', { name: fork, request: appendRequest('!!') });
      await ctx.store.run('deleteStream', { name: bucketStreamKey('tot', 'gone'), incarnation: null });
      // x holds 20 bytes, the source 5, the fork its 5 inherited and 2 of its own.
      expect(await ctx.store.totals()).toEqual({ buckets: 1, streams: 3, producers: 0 });
      // Messages: x's ten appends, the source's one, the fork's inherited one and its own.
      expect(await ctx.store.heldTotals()).toEqual({ bytes: 20 + 5 + 7, messages: 10 + 1 + 2 });
      // A deleted source the fork still reads is kept, but no longer counted.
      await ctx.store.run('deleteStream', { name: src, incarnation: null });
      expect(await ctx.store.totals()).toMatchObject({ streams: 2 });
      expect(await ctx.store.heldTotals()).toEqual({ bytes: 20 + 7, messages: 10 + 2 });
    });

    it("bucketHeldBytes sums the bytes a bucket's streams hold themselves: a fork from its fork point, no deleted stream, no other bucket", async () => {
      await ctx.store.run('createBucket', { id: 'held' });
      await ctx.store.run('createBucket', { id: 'held-other' });
      expect(await ctx.store.bucketHeldBytes('held')).toBe(0);
      await createIn(ctx.store, 'held', ['a', 'b', 'gone']);
      const a = bucketStreamKey('held', 'a');
      // Ten appends: with tiny seal marks some are indexed and some still recent.
      for (let i = 0; i < 10; i++) await ctx.store.run('append', { name: a, request: appendRequest(`a${i}`) });
      await ctx.store.run('append', { name: bucketStreamKey('held', 'gone'), request: appendRequest('doomed') });
      const fork = bucketStreamKey('held', 'fork');
      expectCreated(await ctx.store.run('createStream', createRequest(fork, { bucket: 'held', fork: { sourceName: a, offset: null, subOffset: 0 } })));
      await ctx.store.run('append', { name: fork, request: appendRequest('!!!') });
      await createIn(ctx.store, 'held-other', ['x']);
      await ctx.store.run('append', { name: bucketStreamKey('held-other', 'x'), request: appendRequest('elsewhere') });
      expectCreated(await ctx.store.run('createStream', createRequest(v1StreamKey('held-v1'), { data: Buffer.from('none') })));
      // a holds 20 bytes, gone 6, the fork 3 of its own (its 20 inherited are a's).
      expect(await ctx.store.bucketHeldBytes('held')).toBe(20 + 6 + 3);
      await ctx.store.run('deleteStream', { name: bucketStreamKey('held', 'gone'), incarnation: null });
      // a, deleted while its fork reads it, is kept but no longer counted.
      await ctx.store.run('deleteStream', { name: a, incarnation: null });
      expect(await ctx.store.bucketHeldBytes('held')).toBe(3);
      expect(await ctx.store.bucketHeldBytes('held-other')).toBe(9);
      expect(await ctx.store.bucketHeldBytes('no-such-bucket')).toBe(0);
    });

    it('leaves deleted and expired streams out of a listing', async () => {
      await ctx.store.run('createBucket', { id: 'hide' });
      await createIn(ctx.store, 'hide', ['keep', 'gone']);
      await createIn(ctx.store, 'hide', ['ttl'], { ttlSeconds: 2 });
      await forkOf(ctx.store, bucketStreamKey('hide', 'keep'), v1StreamKey('hide-fork'));
      await ctx.store.run('deleteStream', { name: bucketStreamKey('hide', 'gone'), incarnation: null });
      expect((await ctx.store.listStreams('hide', '', null, 10)).names).toEqual(['keep', 'ttl']);
      await ctx.store.run('deleteStream', { name: bucketStreamKey('hide', 'keep'), incarnation: null });
      ctx.clock.nowMs = T0 + 2_000;
      expect(await ctx.store.listStreams('hide', '', null, 10)).toEqual({ names: [], nextAfter: null });
    });
  });
}

const engines = [
  sqliteEngine(),
  sqliteEngine({ thread: true }),
  sqliteEngine({ recentIndexing: { sealRows: 3, sealBytes: 40, stepRows: 2 } }),
  sqliteEngine({ streamCacheEntries: 3 }),
  memoryEngine(),
  postgresEngine(),
];
for (const engine of engines) storeContract(engine);

function lifecycleTests(ctx: Ctx, engine: EngineUnderTest): void {
  describe('snapshots, retention, attributes', () => {
    const publish = (name: string, offset: number, body: string, digest = `d-${body}`) =>
      ctx.store.run('publishSnapshot', {
        name,
        request: { offset, contentType: 'text/x-fold', digest, match: null, incarnation: null },
        body: Buffer.from(body),
      });

    it('keeps the visible snapshot and its body, replacing it with a newer one', async () => {
      const name = v1StreamKey('snap');
      await ctx.store.run('createStream', createRequest(name, { data: Buffer.from('aaaa') }));
      await ctx.store.run('append', { name, request: appendRequest('bbbb') });
      expect((await publish(name, 4, 'first')).kind).toBe('published');
      expect((await publish(name, 8, 'second')).kind).toBe('published');
      const stream = await mustGet(ctx.store, name);
      expect(stream.snapshot).toEqual({ offset: 8, contentType: 'text/x-fold', digest: 'd-second' });
      expect((await ctx.store.snapshotBody(stream))?.toString()).toBe('second');
      expect(refusal(await publish(name, 4, 'older'))).toBe('SNAPSHOT_CONFLICT');
      expect(refusal(await publish(name, 2, 'inside'))).toBe('MISALIGNED_OFFSET');
    });

    it('retention moves the earliest offset and removes the trimmed bytes; reads from it are whole', async () => {
      const name = v1StreamKey('trim');
      await ctx.store.run('createStream', createRequest(name, { contentType: JSON_TYPE, data: Buffer.from('1\n2\n3\n') }));
      await ctx.store.run('append', { name, request: appendRequest('4\n', { contentType: JSON_TYPE }) });
      await publish(name, 4, 'folded 1,2');
      const outcome = await ctx.store.run('setRetention', { name, request: { offset: 4, incarnation: null } });
      expect(outcome).toMatchObject({ kind: 'retained', changed: true, stream: { earliestOffset: 4 } });
      const stream = await mustGet(ctx.store, name);
      expect((await ctx.store.readRange(stream, 4, 100)).toString()).toBe('3\n4\n');
      expect(await ctx.store.readChunks(stream, 4, 100)).toEqual([
        { start: 4, data: Buffer.from('3\n') },
        { start: 6, data: Buffer.from('4\n') },
      ]);
      expect(await ctx.store.chunkAt(stream, 4)).toEqual({ start: 4, data: Buffer.from('3\n') });
      expect((await ctx.store.readRange(stream, 0, 4)).length).toBe(0);
      expect(refusal(await ctx.store.run('setRetention', { name, request: { offset: 0, incarnation: null } }))).toBe('RETENTION_CONFLICT');
    });

    it('attributes, snapshots and retention survive a reopen', async () => {
      const name = v1StreamKey('lasting');
      await ctx.store.run('createStream', createRequest(name, { data: Buffer.from('xxyy'), attrs: '{"title":"t"}' }));
      await publish(name, 4, 'all');
      await ctx.store.run('setRetention', { name, request: { offset: 4, incarnation: null } });
      await ctx.store.run('putAttrs', { name, attrs: '{"title":"u"}', incarnation: null });
      const before = await mustGet(ctx.store, name);

      ctx.store = await engine.reopen(ctx.store, ctx.clock);

      const after = await mustGet(ctx.store, name);
      expect(after).toEqual(before);
      expect(after).toMatchObject({ attrs: '{"title":"u"}', earliestOffset: 4, snapshot: { offset: 4 } });
      expect((await ctx.store.snapshotBody(after))?.toString()).toBe('all');
    });

    it('a stream whose every byte retention removed keeps its tail across a reopen', async () => {
      const name = v1StreamKey('emptied');
      await ctx.store.run('createStream', createRequest(name, { data: Buffer.from('xx') }));
      await ctx.store.run('append', { name, request: appendRequest('yy') });
      await ctx.store.run('append', { name, request: appendRequest('zz') });
      await publish(name, 6, 'all of it');
      expect(await ctx.store.run('setRetention', { name, request: { offset: 6, incarnation: null } })).toMatchObject({ kind: 'retained' });

      ctx.store = await engine.reopen(ctx.store, ctx.clock);

      expect(await mustGet(ctx.store, name)).toMatchObject({ tail: 6, earliestOffset: 6 });
      expect(expectAppended(await ctx.store.run('append', { name, request: appendRequest('w') }))).toEqual({ start: 6, next: 7, closed: false, records: null });
      expect((await ctx.store.readRange(await mustGet(ctx.store, name), 6, 100)).toString()).toBe('w');
    });
  });
}

/**
 * What stats once counted by reading a stream, as the reference a kept count must equal:
 * from the earliest offset to the tail, the lines of a JSON stream, the appends (each
 * stored append the stream reads, an inherited one cut at a fork offset included) of any
 * other.
 */
async function messagesByReading(store: Store, stream: StreamState): Promise<number> {
  const chunks = await store.readChunks(stream, stream.earliestOffset, stream.tail - stream.earliestOffset);
  let messages = 0;
  for (const chunk of chunks) messages += hasRecords(stream) ? countRecords(chunk.data) : 1;
  return messages;
}

function messageCountTests(ctx: Ctx, engine: EngineUnderTest): void {
  describe('message counts kept as streams are written (stats)', () => {
    const publish = (name: string, offset: number) =>
      ctx.store.run('publishSnapshot', { name, request: { offset, contentType: 'text/x-fold', digest: `d-${offset}`, match: null, incarnation: null }, body: Buffer.from('s') });
    const trim = async (name: string, offset: number) => {
      await publish(name, offset);
      expect(await ctx.store.run('setRetention', { name, request: { offset, incarnation: null } })).toMatchObject({ kind: 'retained', changed: true });
    };
    /** Each stream's kept count: as stated, equal to a read of it, and the same after a reopen. */
    const expectCounts = async (expected: Record<string, number>) => {
      for (const reopened of [false, true]) {
        if (reopened) ctx.store = await engine.reopen(ctx.store, ctx.clock);
        for (const [name, count] of Object.entries(expected)) {
          const stream = await mustGet(ctx.store, name);
          expect([name, messagesHeld(stream)]).toEqual([name, count]);
          expect([name, await messagesByReading(ctx.store, stream)]).toEqual([name, count]);
        }
      }
    };

    it('counts the appends of a stream without records (an empty one none) and the lines of a JSON batch', async () => {
      const bin = v1StreamKey('count-bin');
      const json = v1StreamKey('count-json');
      await ctx.store.run('createStream', createRequest(bin, { data: Buffer.from('first') }));
      for (const body of ['a\nb\n', '', 'c']) await ctx.store.run('append', { name: bin, request: appendRequest(body) });
      await ctx.store.run('append', { name: bin, request: appendRequest('', { close: true }) });
      await ctx.store.run('createStream', createRequest(json, { contentType: JSON_TYPE, data: Buffer.from('1\n2\n') }));
      await ctx.store.run('append', { name: json, request: appendRequest('3\n4\n5\n', { contentType: JSON_TYPE }) });
      await expectCounts({ [bin]: 3, [json]: 5 });
      expect((await ctx.store.heldTotals()).messages).toBe(8);
    });

    it('stays exact over many random appends, a large one among them, across the row lag and a reopen', async () => {
      const name = v1StreamKey('count-many');
      await ctx.store.run('createStream', createRequest(name));
      await fillRandom(ctx.store, name, 7, 300, 1500);
      await ctx.store.run('append', { name, request: appendRequest(Buffer.alloc(1024 * 1024 + 3, 1)) });
      await fillRandom(ctx.store, name, 8, 40, 900);
      await expectCounts({ [name]: 341 });
      ctx.store = await engine.reopen(ctx.store, ctx.clock);
      await ctx.store.run('append', { name, request: appendRequest('after') });
      await expectCounts({ [name]: 342 });
    });

    it('retention takes the trimmed appends and lines off the count', async () => {
      const bin = v1StreamKey('count-trim');
      const json = v1StreamKey('count-trim-json');
      await ctx.store.run('createStream', createRequest(bin, { data: Buffer.from('aa') }));
      for (const body of ['bbb', 'c', 'dddd']) await ctx.store.run('append', { name: bin, request: appendRequest(body) });
      await trim(bin, 5);
      await ctx.store.run('createStream', createRequest(json, { contentType: JSON_TYPE, data: Buffer.from('1\n2\n3\n') }));
      await ctx.store.run('append', { name: json, request: appendRequest('4\n', { contentType: JSON_TYPE }) });
      await trim(json, 4);
      await expectCounts({ [bin]: 2, [json]: 2 });
      await trim(bin, 10);
      await ctx.store.run('append', { name: bin, request: appendRequest('e') });
      await expectCounts({ [bin]: 1, [json]: 2 });
    });

    it('a fork counts what it reads of its source (an append cut at its offset too) and its own appends', async () => {
      const src = v1StreamKey('count-src');
      await ctx.store.run('createStream', createRequest(src, { data: Buffer.from('aaa') }));
      for (const body of ['bbb', 'ccc', 'ddd']) await ctx.store.run('append', { name: src, request: appendRequest(body) });
      const fork = (name: string, sourceName: string, offset: number, subOffset = 0) =>
        ctx.store.run('createStream', createRequest(name, { fork: { sourceName, offset, subOffset } })).then(expectCreated);
      const atBoundary = v1StreamKey('count-fork-6');
      const inside = v1StreamKey('count-fork-7');
      const prefixed = v1StreamKey('count-fork-sub');
      const deeper = v1StreamKey('count-fork-deeper');
      await fork(atBoundary, src, 6);
      await fork(prefixed, src, 6, 2);
      // Counted back from the fork's tail, an append cut at 7 belongs below it.
      await fork(inside, src, 7);
      await ctx.store.run('append', { name: inside, request: appendRequest('xy') });
      await ctx.store.run('append', { name: inside, request: appendRequest('zz') });
      // Below its parent's fork offset, counted back from the tail through two streams.
      await fork(deeper, inside, 6);
      await ctx.store.run('append', { name: src, request: appendRequest('eee') });
      await expectCounts({ [src]: 5, [atBoundary]: 2, [inside]: 5, [prefixed]: 3, [deeper]: 2 });
      await trim(src, 3);
      const late = v1StreamKey('count-fork-late');
      await fork(late, src, 11);
      await expectCounts({ [src]: 4, [atBoundary]: 2, [late]: 3 });
      expect((await ctx.store.heldTotals()).messages).toBe(4 + 2 + 5 + 3 + 2 + 3);
    });
  });
}
