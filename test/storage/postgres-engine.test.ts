/**
 * What the PostgreSQL engine must do beyond the shared contract: several stores (nodes)
 * on one database decide against committed rows under locks, a batch that must load
 * state mid-way (new producers, retention) answers as if it had it all along, trimmed
 * appends leave the table, and commits are hinted to the other nodes only.
 */
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isExpired } from '../../src/core/stream.js';
import { DEFAULT_PRODUCER_SETTINGS, type StreamState } from '../../src/core/types.js';
import { v1StreamKey } from '../../src/protocol/ids.js';
import { PostgresStore } from '../../src/storage/postgres/engine.js';
import { SCHEMA_VERSION } from '../../src/storage/postgres/schema.js';
import { sharedDatabase } from '../helpers/postgres.js';
import { until } from '../helpers/waits.js';
import { appendRequest, createRequest, emptyDatabase, expectAppended, expectCreated, mustGet, randomBytes, readAll, refusal, seededRandom, TestClock } from './fixtures.js';

let url: string;
const stores: PostgresStore[] = [];
const clock = new TestClock();

async function node(maxProducers = DEFAULT_PRODUCER_SETTINGS.maxProducers): Promise<PostgresStore> {
  const store = await PostgresStore.open({ url, producers: { ...DEFAULT_PRODUCER_SETTINGS, maxProducers }, nowMs: clock.read });
  stores.push(store);
  return store;
}

beforeAll(async () => {
  url = await sharedDatabase();
  await (await node()).close();
});

afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
  await emptyDatabase(url);
});

async function sql<R extends object>(text: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

describe('schema', () => {
  it('nodes starting together on a new database migrate it once, one at a time', async () => {
    url = await sharedDatabase();
    await Promise.all([node(), node(), node()]);
    expect(await sql(`SELECT value FROM rill_meta WHERE key = 'schema_version'`)).toEqual([{ value: String(SCHEMA_VERSION) }]);
  });

  it('refuses a database written by a newer rill, naming it without its password', async () => {
    const newer = await sharedDatabase();
    await (await PostgresStore.open({ url: newer, producers: DEFAULT_PRODUCER_SETTINGS })).close();
    const client = new pg.Client(newer);
    await client.connect();
    await client.query(`UPDATE rill_meta SET value = $1 WHERE key = 'schema_version'`, [String(SCHEMA_VERSION + 1)]);
    await client.end();
    const opening = PostgresStore.open({ url: newer, producers: DEFAULT_PRODUCER_SETTINGS });
    await expect(opening).rejects.toThrow(/newer rill \(schema \d+; this one knows \d+\)/);
    await expect(opening).rejects.toThrow(/postgres:\/\/postgres:\*\*\*@/);
  });
});

describe('chunk storage', () => {
  const storage = async () => (await sql<{ storage: string }>(`SELECT attstorage AS storage FROM pg_attribute WHERE attrelid = 'chunks'::regclass AND attname = 'data'`))[0]!.storage;

  it('stores chunk bytes out of line as they are, in a database made before too, so a slice reads only its part', async () => {
    await (await node()).close();
    expect(await storage()).toBe('e');
    // PostgreSQL's default, which a database made before this kept.
    await sql('ALTER TABLE chunks ALTER COLUMN data SET STORAGE EXTENDED');
    const store = await node();
    expect(await storage()).toBe('e');
    const name = v1StreamKey('uncompressed');
    await store.run('createStream', createRequest(name));
    const text = Buffer.from('a line that PostgreSQL would compress well\n'.repeat(50_000));
    expectAppended(await store.run('append', { name, request: appendRequest(text) }));
    const stream = await mustGet(store, name);
    expect(await sql('SELECT pg_column_compression(data) AS method, length(data) AS bytes FROM chunks WHERE stream_id = $1', [stream.id])).toEqual([{ method: null, bytes: text.length }]);
    expect((await store.readRange(stream, 1_500_000, 65_536)).equals(text.subarray(1_500_000, 1_565_536))).toBe(true);
  });

  it('opens without waiting behind a long read of chunks, and sets the storage at a later open', async () => {
    await (await node()).close();
    await sql('ALTER TABLE chunks ALTER COLUMN data SET STORAGE EXTENDED');
    // A catch-up's COPY holds the table this way for as long as it runs.
    const reader = new pg.Client(url);
    await reader.connect();
    await reader.query('BEGIN');
    await reader.query('LOCK TABLE chunks IN ACCESS SHARE MODE');
    try {
      const store = await node();
      expect(await storage()).toBe('x');
      const name = v1StreamKey('while-read');
      await store.run('createStream', createRequest(name));
      expectAppended(await store.run('append', { name, request: appendRequest('served') }));
      expect((await readAll(store, name)).toString()).toBe('served');
    } finally {
      await reader.query('ROLLBACK');
      await reader.end();
    }
    await (await node()).close();
    expect(await storage()).toBe('e');
  });
});

describe('schema 3: record coordinates', () => {
  it('numbers the retained records of streams stored before it, a fork\'s inherited ones too, and takes no receipt range it never had', async () => {
    const older = await sharedDatabase();
    const store = await PostgresStore.open({ url: older, producers: DEFAULT_PRODUCER_SETTINGS });
    const name = v1StreamKey('before');
    const fork = v1StreamKey('before-fork');
    await store.run('createStream', createRequest(name, { contentType: 'application/json', data: Buffer.from('1\n2\n3\n') }));
    await store.run('append', { name, request: appendRequest('4\n', { contentType: 'application/json', producer: { id: 'p', epoch: 0, seq: 0 } }) });
    await store.run('createStream', createRequest(fork, { contentType: 'application/json', fork: { sourceName: name, offset: 4, subOffset: 0 }, data: Buffer.from('"f"\n') }));
    await store.close();
    const client = new pg.Client(older);
    await client.connect();
    await client.query(`ALTER TABLE streams DROP COLUMN record_first, DROP COLUMN record_next;
      ALTER TABLE producers DROP COLUMN receipt_record_start, DROP COLUMN receipt_record_next;
      ALTER TABLE buckets DROP COLUMN settings; ALTER TABLE streams DROP COLUMN retention_policy, DROP COLUMN time_marks, DROP COLUMN age_due_ms; DROP TABLE cold_segments;
      UPDATE rill_meta SET value = '2' WHERE key = 'schema_version'`);
    await client.end();

    const upgraded = await PostgresStore.open({ url: older, producers: DEFAULT_PRODUCER_SETTINGS });
    stores.push(upgraded);
    expect(await mustGet(upgraded, name)).toMatchObject({ recordFirst: 0, recordNext: 4 });
    expect(await mustGet(upgraded, fork)).toMatchObject({ recordFirst: 0, recordNext: 3 });
    expect(await upgraded.run('append', { name, request: appendRequest('4\n', { contentType: 'application/json', producer: { id: 'p', epoch: 0, seq: 0 } }) })).toMatchObject({ kind: 'duplicate', receipt: { start: 6, next: 8, records: null } });
    expect(expectAppended(await upgraded.run('append', { name, request: appendRequest('5\n', { contentType: 'application/json' }) })).records).toEqual({ start: 4, next: 5 });
  });
});

describe('schema 4: appends counted on streams without records', () => {
  it('counts the retained appends of streams stored before it, a fork\'s inherited ones too, and leaves JSON ordinals as they were', async () => {
    const older = await sharedDatabase();
    const store = await PostgresStore.open({ url: older, producers: DEFAULT_PRODUCER_SETTINGS });
    const bin = v1StreamKey('bin-before');
    const fork = v1StreamKey('bin-fork-before');
    const json = v1StreamKey('json-kept');
    await store.run('createStream', createRequest(bin, { data: Buffer.from('aa') }));
    for (const body of ['bb', 'cc', 'dd']) await store.run('append', { name: bin, request: appendRequest(body) });
    await store.run('publishSnapshot', { name: bin, request: { offset: 2, contentType: 'text/plain', digest: 'x', match: null, incarnation: null }, body: Buffer.from('s') });
    await store.run('setRetention', { name: bin, request: { offset: 2, incarnation: null } });
    await store.run('createStream', createRequest(fork, { fork: { sourceName: bin, offset: 5, subOffset: 0 }, data: Buffer.from('f') }));
    await store.run('createStream', createRequest(json, { contentType: 'application/json; charset=utf-8', data: Buffer.from('1\n2\n') }));
    await store.run('publishSnapshot', { name: json, request: { offset: 2, contentType: 'text/plain', digest: 'x', match: null, incarnation: null }, body: Buffer.from('s') });
    await store.run('setRetention', { name: json, request: { offset: 2, incarnation: null } });
    await store.close();
    const client = new pg.Client(older);
    await client.connect();
    // Schema 3 kept 0 and 0 on streams without records.
    await client.query('UPDATE streams SET record_first = 0, record_next = 0 WHERE name = ANY($1)', [[bin, fork]]);
    await client.query(`ALTER TABLE buckets DROP COLUMN settings; ALTER TABLE streams DROP COLUMN retention_policy, DROP COLUMN time_marks, DROP COLUMN age_due_ms; DROP TABLE cold_segments; UPDATE rill_meta SET value = '3' WHERE key = 'schema_version'`);
    await client.end();

    const upgraded = await PostgresStore.open({ url: older, producers: DEFAULT_PRODUCER_SETTINGS });
    stores.push(upgraded);
    expect(await mustGet(upgraded, bin)).toMatchObject({ earliestOffset: 2, recordFirst: 0, recordNext: 3 });
    expect(await mustGet(upgraded, fork)).toMatchObject({ recordFirst: 0, recordNext: 3 });
    // A JSON stream (its content type with a parameter too) keeps its ordinals: its first retained record is 1.
    expect(await mustGet(upgraded, json)).toMatchObject({ recordFirst: 1, recordNext: 2 });
    expect((await upgraded.heldTotals()).messages).toBe(3 + 3 + 1);
    await upgraded.run('append', { name: bin, request: appendRequest('e') });
    expect(await mustGet(upgraded, bin)).toMatchObject({ recordNext: 4 });
  });
});

describe('two nodes on one database', () => {
  it('appends from both nodes to one stream land contiguously, none lost or doubled', async () => {
    const [a, b] = [await node(), await node()];
    const name = v1StreamKey('shared');
    await a.run('createStream', createRequest(name));
    const bodies = Array.from({ length: 200 }, (_, i) => `<${i}>`);
    const receipts = await Promise.all(bodies.map((body, i) => (i % 2 === 0 ? a : b).run('append', { name, request: appendRequest(body) })));
    const spans = receipts.map(expectAppended).sort((x, y) => x.start - y.start);
    let tail = 0;
    for (const span of spans) {
      expect(span.start).toBe(tail);
      tail = span.next;
    }
    const stored = (await readAll(b, name)).toString();
    expect(stored.length).toBe(tail);
    for (const body of bodies) expect(stored.split(body).length - 1).toBe(1);
  });

  it('a retention policy holds with appends from both nodes at once, and both sweeping cut by age once', async () => {
    const [a, b] = [await node(), await node()];
    const name = v1StreamKey('shared-policy');
    const retention = { maxBytes: null, maxMessages: 10, maxAgeMs: 60_000 };
    await a.run('createStream', createRequest(name, { retention }));
    const bodies = Array.from({ length: 100 }, (_, i) => `<${i}>`);
    await Promise.all(bodies.map((body, i) => (i % 2 === 0 ? a : b).run('append', { name, request: appendRequest(body) })));
    const stream = await mustGet(b, name);
    expect(stream.recordNext - stream.recordFirst).toBe(10);
    const kept = (await b.readRange(stream, stream.earliestOffset, stream.tail)).toString();
    expect(kept.match(/<\d+>/g)).toHaveLength(10);
    clock.advance(60_001);
    const swept = await Promise.all([a.run('trimAged', { limit: 10 }), b.run('trimAged', { limit: 10 })]);
    expect(swept.map((s) => s.trimmed).reduce((x, y) => x + y)).toBe(1);
    expect(await mustGet(a, name)).toMatchObject({ earliestOffset: stream.tail, recordFirst: stream.recordNext });
  });

  it('creates of one name on two nodes at once: one creates, the other finds it', async () => {
    const [a, b] = [await node(), await node()];
    const name = v1StreamKey('raced');
    const outcomes = await Promise.all([a, b].map((store) => store.run('createStream', createRequest(name, { contentType: 'text/plain' }))));
    const kinds = outcomes.map((o) => o.kind).sort();
    expect(kinds[0]).toBe('created');
    expect(kinds[1]).not.toBe('created');
    expect(await sql('SELECT id FROM streams WHERE name = $1', [name])).toHaveLength(1);
  });

  it('a producer write retried on the other node is a duplicate, stored once', async () => {
    const [a, b] = [await node(), await node()];
    const name = v1StreamKey('retried');
    await a.run('createStream', createRequest(name));
    const write = appendRequest('once', { producer: { id: 'p', epoch: 0, seq: 0 } });
    expect((await a.run('append', { name, request: write })).kind).toBe('appended');
    expect((await b.run('append', { name, request: write })).kind).toBe('duplicate');
    expect((await readAll(a, name)).toString()).toBe('once');
  });

  it('hints another node of the streams a commit changed, and not itself', async () => {
    const [a, b] = [await node(), await node()];
    const heardByA: string[] = [];
    const heardByB: string[] = [];
    a.remote.onHint((names) => heardByA.push(...(names ?? ['*'])));
    b.remote.onHint((names) => heardByB.push(...(names ?? ['*'])));
    // A node that counted itself alone hints nobody until it hears the other's hello (notify.ts):
    // a commit before that sends no hint, by design.
    await until(() => a.hinting, 'node A hinting, once it knows node B listens');
    const name = v1StreamKey('hinted');
    await a.run('createStream', createRequest(name));
    await a.run('append', { name, request: appendRequest('x') });
    await until(() => heardByB.includes(name), "node B hearing A's hint");
    expect(heardByA).toEqual([]);
    const versions = await b.remote.versions([name, v1StreamKey('absent')]);
    expect([...versions.keys()]).toEqual([name]);
  });
});

describe('TTL renewals', () => {
  it("a read's renewal is seen by reads while the batch storing it waits on PostgreSQL", async () => {
    const store = await node();
    const name = v1StreamKey('renewed-in-flight');
    await store.run('createStream', createRequest(name, { ttlSeconds: 10 }));
    clock.advance(9_000);
    store.touch(await mustGet(store, name), clock.read());
    // Another session holds the stream's row: the batch that stores the renewal waits on it.
    const holder = new pg.Client(url);
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT id FROM streams WHERE name = $1 FOR UPDATE', [name]);
      const storing = store.run('createStream', createRequest(v1StreamKey('kick'), { contentType: 'text/plain' }));
      // The batch is taken on the next turn of the event loop (setImmediate), this one after it.
      await new Promise((resolve) => setImmediate(resolve));
      clock.advance(6_000);
      const seen = await mustGet(store, name);
      expect(isExpired(seen, clock.read()), 'expired 1 s past its first TTL although read at 9 s').toBe(false);
      await holder.query('ROLLBACK');
      expect((await storing).kind).toBe('created');
    } finally {
      await holder.end();
    }
    expect(isExpired(await mustGet(store, name), clock.read())).toBe(false);
    expect(isExpired(await mustGet(await node(), name), clock.read()), 'another node reads the stored renewal').toBe(false);
  });
});

describe('state loaded in the middle of a batch', () => {
  it('new producers in one batch are counted against the limit as they arrive', async () => {
    const store = await node(3);
    const name = v1StreamKey('crowded');
    await store.run('createStream', createRequest(name));
    // One batch: each new producer's summary is asked after the earlier ones were written.
    const outcomes = await Promise.all(
      ['p1', 'p2', 'p3', 'p4'].map((id) => store.run('append', { name, request: appendRequest(id, { producer: { id, epoch: 0, seq: 0 } }) })),
    );
    expect(outcomes.slice(0, 3).map((o) => o.kind)).toEqual(['appended', 'appended', 'appended']);
    expect(refusal(outcomes[3]!)).toBe('PRODUCER_LIMIT');
    expect((await sql('SELECT producer_id FROM producers ORDER BY producer_id')).map((r) => (r as { producer_id: string }).producer_id)).toEqual(['p1', 'p2', 'p3']);
  });

  it('with more producers than the batch loads whole, a new one is counted by asking PostgreSQL', async () => {
    const store = await node(70);
    const name = v1StreamKey('many-producers');
    await store.run('createStream', createRequest(name));
    const first = Array.from({ length: 68 }, (_, i) => `p${String(i).padStart(2, '0')}`);
    for (const id of first) await store.run('append', { name, request: appendRequest(id, { producer: { id, epoch: 0, seq: 0 } }) });
    const outcomes = await Promise.all(
      ['q1', 'q2', 'q3'].map((id) => store.run('append', { name, request: appendRequest(id, { producer: { id, epoch: 0, seq: 0 } }) })),
    );
    expect(outcomes.slice(0, 2).map((o) => o.kind)).toEqual(['appended', 'appended']);
    expect(refusal(outcomes[2]!)).toBe('PRODUCER_LIMIT');
    expect(await sql('SELECT count(*)::int AS n FROM producers')).toEqual([{ n: 70 }]);
  });

  it("a new producer's forget deletes the rows of its own stream last seen before the cutoff, on each stream of the batch", async () => {
    const store = await node();
    const streams = ['forget-a', 'forget-b', 'forget-c'].map((s) => v1StreamKey(s));
    for (const name of streams) await store.run('createStream', createRequest(name));
    const write = (name: string, id: string) => store.run('append', { name, request: appendRequest(id, { producer: { id, epoch: 0, seq: 0 } }) });
    for (const name of streams) expectAppended(await write(name, 'old'));
    clock.advance(DEFAULT_PRODUCER_SETTINGS.forgetAfterMs - 1_000);
    // New producers too, but 'old' is not yet past the cutoff.
    for (const name of streams.slice(0, 2)) expectAppended(await write(name, 'recent'));
    clock.advance(1_001);
    // One batch: new producers on the first two streams, where 'old' is now past it; the third sees none.
    await Promise.all([write(streams[0]!, 'new'), write(streams[1]!, 'new')].map(async (w) => expectAppended(await w)));
    const left = await sql(`SELECT s.name, p.producer_id FROM producers p JOIN streams s ON s.id = p.stream_id WHERE s.name = ANY($1) ORDER BY 1, 2`, [streams]);
    expect(left.map((r) => `${(r as { name: string }).name} ${(r as { producer_id: string }).producer_id}`)).toEqual([
      `${streams[0]} new`,
      `${streams[0]} recent`,
      `${streams[1]} new`,
      `${streams[1]} recent`,
      `${streams[2]} old`,
    ]);
  });

  it('retention removes the trimmed appends from the chunks table, except what a fork still reads', async () => {
    const store = await node();
    const trim = async (name: string, forkAt: number | null) => {
      await store.run('createStream', createRequest(name));
      for (const part of ['aaaa', 'bbbb', 'cccc', 'dddd']) await store.run('append', { name, request: appendRequest(part) });
      const fork = forkAt === null ? null : { sourceName: name, offset: forkAt, subOffset: 0 };
      if (fork) expectCreated(await store.run('createStream', createRequest(`${name}-fork`, { contentType: null, fork })));
      const snapshot = { offset: 12, contentType: 'text/x-fold', digest: 'd', match: null, incarnation: null };
      expect((await store.run('publishSnapshot', { name, request: snapshot, body: Buffer.from('folded') })).kind).toBe('published');
      // In one batch with an append: the trim's question about forks is asked after the append is written.
      const [retained] = await Promise.all([
        store.run('setRetention', { name, request: { offset: 12, incarnation: null } }),
        store.run('append', { name, request: appendRequest('eeee') }),
      ]);
      expect(retained.kind).toBe('retained');
      const stream = await mustGet(store, name);
      expect(stream.earliestOffset).toBe(12);
      return (await sql<{ start: number }>('SELECT start FROM chunks WHERE stream_id = $1 ORDER BY start', [stream.id])).map((r) => Number(r.start));
    };
    expect(await trim(v1StreamKey('trimmed'), null)).toEqual([12, 16]);
    // A fork at 8 reads [0, 8) of its source, so nothing of it goes.
    expect(await trim(v1StreamKey('forked'), 8)).toEqual([0, 4, 8, 12, 16]);
    expect((await readAll(store, `${v1StreamKey('forked')}-fork`)).toString()).toBe('aaaabbbb');
  });
});

/** Windows of a stream read the two ways an engine gives them: as chunks, or handed on as they arrive. */
const windowReads = {
  readChunks: async (store: PostgresStore, stream: StreamState, from: number, maxBytes: number) => (await store.readChunks(stream, from, maxBytes)).map((c) => c.data),
  streamChunks: async (store: PostgresStore, stream: StreamState, from: number, maxBytes: number) => {
    // Kept as handed on (views of the socket's reads, which nothing may reuse).
    const pieces: Buffer[] = [];
    await store.streamChunks(stream, from, maxBytes, (bytes) => pieces.push(bytes));
    return pieces;
  },
};

/** A stream of `sizes` appended in order and a fork of it at 300,005 with 400,000 bytes of its own. */
async function streamAndFork(store: PostgresStore, seed: number, name: string, sizes: number[]) {
  const random = seededRandom(seed);
  const key = v1StreamKey(name);
  await store.run('createStream', createRequest(key));
  const parts = sizes.map((n) => randomBytes(random, n));
  for (const part of parts) expectAppended(await store.run('append', { name: key, request: appendRequest(part) }));
  const own = randomBytes(random, 400_000);
  expectCreated(await store.run('createStream', createRequest(`${key}-fork`, { contentType: null, fork: { sourceName: key, offset: 300_005, subOffset: 0 }, data: own })));
  const all = Buffer.concat(parts);
  const forkAll = Buffer.concat([all.subarray(0, 300_005), own]);
  return { stream: await mustGet(store, key), forked: await mustGet(store, `${key}-fork`), all, forkAll };
}

describe('large reads', () => {
  it('a window of 256 KiB or more is read as binary COPY, byte for byte what was appended, a fork\'s inherited bytes too', async () => {
    const store = await node();
    // Values larger than a CopyData message's share of a socket read, and values of one byte.
    const { stream, forked, all, forkAll } = await streamAndFork(store, 41, 'large', [300_000, 5, 700_000, 1]);
    for (const from of [0, 1, 299_999, 300_003, 450_000]) {
      expect((await store.readRange(stream, from, 4 * 1024 * 1024)).equals(all.subarray(from))).toBe(true);
      expect((await store.readRange(forked, from, 4 * 1024 * 1024)).equals(forkAll.subarray(from))).toBe(true);
      const chunks = await store.readChunks(stream, from, 600_000);
      expect(Buffer.concat(chunks.map((c) => c.data)).equals(all.subarray(from, from + 600_000))).toBe(true);
      expect(chunks[0]!.start).toBeLessThanOrEqual(from);
    }
    expect(store.stats.bulkReads).toBeGreaterThan(0);
  });

  it.each(Object.keys(windowReads) as Array<keyof typeof windowReads>)("a catch-up's next window is read while the last one goes out, and gives what reading it then would, appends meanwhile or not (%s)", async (how) => {
    const store = await node();
    const random = seededRandom(42);
    const name = v1StreamKey('ahead');
    await store.run('createStream', createRequest(name));
    const parts = Array.from({ length: 6 }, () => randomBytes(random, 300_000));
    for (const part of parts) expectAppended(await store.run('append', { name, request: appendRequest(part) }));
    const windowBytes = 512 * 1024;
    const catchUp = async (from: number, appendAt: number | null): Promise<Buffer> => {
      const read: Buffer[] = [];
      for (let position = from, n = 0; ; n++) {
        if (n === appendAt) {
          const more = randomBytes(random, 300_000);
          parts.push(more);
          expectAppended(await store.run('append', { name, request: appendRequest(more) }));
        }
        const stream = await mustGet(store, name);
        if (position >= stream.tail) return Buffer.concat(read);
        for (const bytes of await windowReads[how](store, stream, position, windowBytes)) {
          read.push(bytes);
          position += bytes.length;
        }
      }
    };
    expect((await catchUp(0, null)).equals(Buffer.concat(parts))).toBe(true);
    expect(store.stats.readAheads).toBeGreaterThan(0);
    expect(store.stats.readAheadsTaken).toBeGreaterThan(0);
    // The tail moves after the first window: the window read ahead is not the one asked for next.
    expect((await catchUp(0, 1)).equals(Buffer.concat(parts))).toBe(true);
    // Recreated under the same name, the stream's windows are its own (a new id), whatever was read ahead.
    await catchUp(0, null);
    expect(await store.run('deleteStream', { name, incarnation: null })).toEqual({ kind: 'dropped' });
    await store.run('createStream', createRequest(name));
    const fresh = randomBytes(random, 1_200_000);
    expectAppended(await store.run('append', { name, request: appendRequest(fresh) }));
    expect((await catchUp(0, null)).equals(fresh)).toBe(true);
  });

  it('a bulk read whose connection dies while it waits fails alone: the next one gets every byte', async () => {
    const store = await node();
    const name = v1StreamKey('cut');
    await store.run('createStream', createRequest(name));
    const data = randomBytes(seededRandom(43), 600_000);
    expectAppended(await store.run('append', { name, request: appendRequest(data) }));
    const stream = await mustGet(store, name);
    const waiting = "FROM pg_stat_activity WHERE query LIKE 'COPY%' AND wait_event_type = 'Lock'";
    const locker = new pg.Client(url);
    await locker.connect();
    try {
      // The COPY waits for the lock, so its connection is cut before any of its output.
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE chunks IN ACCESS EXCLUSIVE MODE');
      const failed = store.readChunks(stream, 0, 600_000).then(
        () => null,
        (error: unknown) => error,
      );
      await until(async () => (await sql(`SELECT pid ${waiting}`)).length === 1, 'a COPY waiting for the lock');
      await sql(`SELECT pg_terminate_backend(pid) ${waiting}`);
      expect(await failed).toBeInstanceOf(Error);
    } finally {
      await locker.query('ROLLBACK');
      await locker.end();
    }
    for (let read = 0; read < 3; read++) {
      const chunks = await store.readChunks(stream, 0, 600_000);
      expect(Buffer.concat(chunks.map((c) => c.data)).equals(data)).toBe(true);
    }
    expect(store.stats.bulkReads).toBe(3);
  });

  it('streamChunks hands on the bytes of readChunks in pieces as the COPY arrives, cut where the window is', async () => {
    const store = await node();
    const { stream, forked, all, forkAll } = await streamAndFork(store, 44, 'streamed', [300_000, 5, 700_000, 1, 450_000]);
    const streamed = (of: StreamState, from: number, maxBytes: number) => windowReads.streamChunks(store, of, from, maxBytes);
    // Windows starting and ending inside appends, at their edges, past the tail; one below the bulk size.
    for (const [from, maxBytes] of [[0, 600_000], [1, 1_000_000], [299_999, 300_007], [300_005, 4_000_000], [1_000_004, 100_000], [450_000, 300_000]] as const) {
      const bulkReads = store.stats.bulkReads;
      const pieces = await streamed(stream, from, maxBytes);
      expect(Buffer.concat(pieces).equals(all.subarray(from, from + maxBytes))).toBe(true);
      if (maxBytes >= 256 * 1024) {
        expect(store.stats.bulkReads).toBeGreaterThan(bulkReads);
        // A window of many socket reads goes out as it arrives, not as one buffer at its end.
        expect(pieces.length).toBeGreaterThan(Math.ceil(Math.min(maxBytes, all.length - from) / (1024 * 1024)));
      }
    }
    // A fork's inherited bytes are read through its chain, as readChunks reads them.
    for (const from of [0, 300_000, 300_005]) expect(Buffer.concat(await streamed(forked, from, 600_000)).equals(forkAll.subarray(from, from + 600_000))).toBe(true);
  });

  it('a read inside a large append takes only its window from PostgreSQL, small or in bulk, compressed or not; chunkAt still answers the whole append', async () => {
    const store = await node();
    // As in a database written before rill stored chunk bytes uncompressed (schema.ts),
    // whose compressed values it still reads: repeated text is compressed, random bytes
    // are stored out of line as they are.
    await sql('ALTER TABLE chunks ALTER COLUMN data SET STORAGE EXTENDED');
    const name = v1StreamKey('inside');
    await store.run('createStream', createRequest(name));
    const random = randomBytes(seededRandom(45), 2 * 1024 * 1024);
    const text = Buffer.from('a line that PostgreSQL compresses well\n'.repeat(60_000));
    for (const data of [random, text, Buffer.from('tail')]) expectAppended(await store.run('append', { name, request: appendRequest(data) }));
    const stream = await mustGet(store, name);
    expect(await sql('SELECT pg_column_compression(data) AS method FROM chunks WHERE stream_id = $1 ORDER BY start', [stream.id])).toEqual([{ method: null }, { method: 'pglz' }, { method: null }]);
    const all = Buffer.concat([random, text, Buffer.from('tail')]);
    const textAt = random.length;
    // Inside each, below the bulk size and above it; one window across both, one past the last.
    const windows = [[1_000_000, 65_536], [1_000_001, 300_000], [textAt + 777, 65_536], [textAt + 1_000_000, 400_000], [textAt - 5, 100], [all.length - 10, 65_536]] as const;
    for (const [from, maxBytes] of windows) {
      const received = store.stats.windowBytes;
      expect((await store.readRange(stream, from, maxBytes)).equals(all.subarray(from, from + maxBytes))).toBe(true);
      expect(store.stats.windowBytes - received).toBe(Math.min(maxBytes, all.length - from));
      const chunks = await store.readChunks(stream, from, maxBytes);
      expect(chunks[0]!.start).toBe(from);
      expect(Buffer.concat(chunks.map((c) => c.data)).equals(all.subarray(from, from + maxBytes))).toBe(true);
    }
    for (const [position, start, data] of [[1_000_000, 0, random], [textAt + 1_000_000, textAt, text]] as const) {
      const append = await store.chunkAt(stream, position);
      expect(append?.start).toBe(start);
      expect(append?.data.equals(data)).toBe(true);
    }
  });

  it('a small window is one prepared query, not a COPY', async () => {
    const store = await node();
    const name = v1StreamKey('small');
    await store.run('createStream', createRequest(name));
    for (const part of ['a', 'bb', 'ccc']) expectAppended(await store.run('append', { name, request: appendRequest(part) }));
    expect((await readAll(store, name)).toString()).toBe('abbccc');
    expect(store.stats.bulkReads).toBe(0);
  });
});

afterAll(async () => {
  for (const store of stores.splice(0)) await store.close();
});
