/**
 * Optimistic batches on PostgreSQL (src/storage/postgres/optimistic.ts, issue 41): a batch
 * of plain appends to streams the node knows goes out in one round trip with a guard that
 * fails the transaction when a row is no longer as known; the batch then runs again the
 * usual way. Real PostgreSQL: the guard's failures are made by a session of the test's own
 * that changes rows as another node would, without the hint a node sends (hints are best
 * effort: a node that loses its listener's connection loses them).
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { AppendOutcome } from '../../src/core/types.js';
import { v1StreamKey } from '../../src/protocol/ids.js';
import { KNOWN_ROW_MAX_AGE_MS, KnownRows } from '../../src/storage/postgres/known-rows.js';
import { appendRequest, createRequest, expectAppended, expectCreated, mustGet, readAll, refusal, seededRandom, TestClock, usePostgresNodes } from './fixtures.js';
import { inTxn } from './txn-harness.js';

const clock = new TestClock();
const nodes = usePostgresNodes(clock);
const node = nodes.node;

/** Runs `sql` in a session of its own, as another node would write, but sends no hint. */
async function elsewhere(sql: string, values: unknown[]): Promise<void> {
  const client = new pg.Client(nodes.url());
  await client.connect();
  try {
    await client.query(sql, values);
  } finally {
    await client.end();
  }
}

const text = (data: string, overrides = {}) => appendRequest(data, { contentType: 'text/plain', ...overrides });

describe('optimistic batches', () => {
  it('plain appends to streams the node committed go out in one round trip each batch', async () => {
    const store = await node();
    const names = ['a', 'b', 'c'].map((n) => v1StreamKey(`one-${n}`));
    for (const name of names) await store.run('createStream', createRequest(name, { contentType: 'text/plain' }));
    // A creation's batch locks no row, so it learns no version for the rows it writes: the
    // first appends load them (and lock them) the usual way.
    await Promise.all(names.map((name) => store.run('append', { name, request: text('-') })));
    const before = { ...store.stats };
    for (let round = 1; round <= 10; round++) {
      const outcomes = await Promise.all(names.map((name) => store.run('append', { name, request: text(`${round % 10}`) })));
      outcomes.forEach((outcome) => expect(expectAppended(outcome).start).toBe(round));
    }
    const batches = store.stats.batches - before.batches;
    expect(batches).toBeGreaterThanOrEqual(10);
    expect(store.stats.optimistic - before.optimistic).toBe(batches);
    expect(store.stats.roundTrips - before.roundTrips).toBe(batches);
    expect(store.stats.stale).toBe(0);
    for (const name of names) expect((await readAll(store, name)).toString()).toBe('-1234567890');
  });

  it('a stream closed elsewhere fails the guard: the append runs again on the stored row and is refused', async () => {
    const store = await node();
    const name = v1StreamKey('closed-elsewhere');
    await store.run('createStream', createRequest(name, { contentType: 'text/plain' }));
    expectAppended(await store.run('append', { name, request: text('x') }));
    expect(store.knownStream(name)?.closed).toBe(false);
    await elsewhere('UPDATE streams SET closed = 1 WHERE name = $1', [name]);
    const outcome = await store.run('append', { name, request: text('y') });
    expect(refusal(outcome as AppendOutcome & { error?: { code: string } })).toBe('STREAM_CLOSED');
    expect(store.stats.stale).toBe(1);
    expect((await readAll(store, name)).toString()).toBe('x');
    expect(store.knownStream(name)?.closed).toBe(true);
  });

  it('an append made elsewhere fails the guard: the next one lands after it', async () => {
    const store = await node();
    const name = v1StreamKey('appended-elsewhere');
    await store.run('createStream', createRequest(name, { contentType: 'text/plain' }));
    expectAppended(await store.run('append', { name, request: text('ab') }));
    // Another node's append of 'cde': its chunk, and the stream's tail and record count.
    await elsewhere(
      `WITH s AS (SELECT id, tail FROM streams WHERE name = $1), c AS (INSERT INTO chunks (stream_id, start, data) SELECT id, tail, $2 FROM s)
       UPDATE streams SET tail = tail + 3, record_next = record_next + 1 WHERE name = $1`,
      [name, Buffer.from('cde')],
    );
    const receipt = expectAppended(await store.run('append', { name, request: text('f') }));
    expect(receipt.start).toBe(5);
    expect(store.stats.stale).toBe(1);
    expect((await readAll(store, name)).toString()).toBe('abcdef');
    // Known again, as stored: the append after it is optimistic.
    const optimistic = store.stats.optimistic;
    expect(expectAppended(await store.run('append', { name, request: text('g') })).start).toBe(6);
    expect(store.stats.optimistic).toBe(optimistic + 1);
  });

  it('a stream deleted and created again under its name by another node: the next append goes to the new one', async () => {
    const [store, other] = [await node(), await node()];
    const name = v1StreamKey('recreated');
    await store.run('createStream', createRequest(name, { contentType: 'text/plain' }));
    expectAppended(await store.run('append', { name, request: text('old') }));
    const known = store.knownStream(name)!;
    // Whether the other node's hints arrive first (the row is forgotten) or not (the guard fails), the same.
    await other.run('deleteStream', { name, incarnation: null });
    const created = expectCreated(await other.run('createStream', createRequest(name, { contentType: 'text/plain' })));
    expect(created.id).not.toBe(known.id);
    expect(expectAppended(await store.run('append', { name, request: text('new') })).start).toBe(0);
    expect((await readAll(store, name)).toString()).toBe('new');
    expect(store.knownStream(name)?.id).toBe(created.id);
  });

  it('what a node knows of a stream is what a load of it gives', async () => {
    const store = await node();
    const names = ['p', 'q', 'r'].map((n) => v1StreamKey(`as-loaded-${n}`));
    await store.run('createStream', createRequest(names[0]!, { contentType: 'text/plain', ttlSeconds: 60 }));
    await store.run('createStream', createRequest(names[1]!, { contentType: 'application/json', data: Buffer.from('[1,2]') }));
    await store.run('createStream', createRequest(names[2]!, { contentType: 'text/plain', expiresAtMs: clock.read() + 3_600_000 }));
    clock.advance(1_000);
    await Promise.all([
      store.run('append', { name: names[0]!, request: text('a', { producer: { id: 'w', epoch: 0, seq: 0 } }) }),
      store.run('append', { name: names[1]!, request: appendRequest('[3]', { contentType: 'application/json' }) }),
      store.run('append', { name: names[2]!, request: text('z', { close: true, streamSeq: '0001' }) }),
    ]);
    for (const name of names) expect(store.knownStream(name), name).toEqual(await store.getStream(name));
  });

  it('two nodes appending to the same streams: every append once, each writer in order, each stream contiguous', async () => {
    const nodes = [await node(), await node()];
    const random = seededRandom(4141);
    const streams = Array.from({ length: 6 }, (_, i) => v1StreamKey(`shared-${i}`));
    for (const name of streams) await nodes[0]!.run('createStream', createRequest(name, { contentType: 'text/plain' }));
    // Per stream and node: a plain writer and a producer, each waiting for its last answer
    // now and then, so that batches of both nodes overlap on streams and follow each other.
    const writers = streams.flatMap((stream, s) => nodes.map((_, n) => ({ stream, node: n, id: `w${s}n${n}`, producer: random(2) === 0, next: 0 })));
    const sent: Array<{ stream: string; outcome: Promise<AppendOutcome> }> = [];
    for (let turn = 0; turn < 80; turn++) {
      for (const writer of writers) {
        if (random(3) !== 0) continue;
        const n = writer.next++;
        const producer = writer.producer ? { producer: { id: writer.id, epoch: 0, seq: n } } : {};
        sent.push({ stream: writer.stream, outcome: nodes[writer.node]!.run('append', { name: writer.stream, request: text(`<${writer.id}:${n}>`, producer) }) });
      }
      if (random(2) === 0) await new Promise<void>((resolve) => setImmediate(resolve));
      else await sent[random(sent.length)]!.outcome;
    }
    const outcomes = await Promise.all(sent.map((s) => s.outcome));
    for (const name of streams) {
      const spans = outcomes
        .filter((_, i) => sent[i]!.stream === name)
        .map((o) => expectAppended(o))
        .sort((x, y) => x.start - y.start);
      let tail = 0;
      for (const span of spans) {
        expect(span.start, `${name}: appends contiguous`).toBe(tail);
        tail = span.next;
      }
      const stored = (await readAll(nodes[0]!, name)).toString();
      expect(stored.length).toBe(tail);
      for (const writer of writers.filter((w) => w.stream === name)) {
        const mine = [...stored.matchAll(new RegExp(`<${writer.id}:(\\d+)>`, 'g'))].map((m) => Number(m[1]));
        expect(mine, `${writer.id}'s writes as stored`).toEqual(Array.from({ length: writer.next }, (_, i) => i));
      }
    }
  });
});

describe('optimistic batches of producer appends', () => {
  const byProducer = (data: string, seq: number, id = 'p', epoch = 0) => text(data, { producer: { id, epoch, seq } });

  it("producers whose records the node knows with their streams' rows: one round trip each batch, a new producer too", async () => {
    const store = await node();
    const names = ['a', 'b', 'c'].map((n) => v1StreamKey(`producers-${n}`));
    for (const name of names) await store.run('createStream', createRequest(name, { contentType: 'text/plain' }));
    // New producers: the first appends load the rows and every record of their streams.
    await Promise.all(names.map((name) => store.run('append', { name, request: byProducer('-', 0) })));
    const before = { ...store.stats };
    for (let seq = 1; seq <= 10; seq++) {
      const outcomes = await Promise.all(names.map((name) => store.run('append', { name, request: byProducer(`${seq % 10}`, seq) })));
      outcomes.forEach((outcome) => expect(expectAppended(outcome).start).toBe(seq));
    }
    // A producer new to a stream whose every record the node knows: its summary needs no query.
    expect(expectAppended(await store.run('append', { name: names[0]!, request: byProducer('!', 0, 'q') })).start).toBe(11);
    const batches = store.stats.batches - before.batches;
    expect(batches).toBeGreaterThanOrEqual(11);
    expect(store.stats.optimistic - before.optimistic).toBe(batches);
    expect(store.stats.roundTrips - before.roundTrips).toBe(batches);
    expect(store.stats.stale).toBe(0);
    // A repeat is answered from the known record, as a duplicate, and writes nothing.
    const repeat = await store.run('append', { name: names[1]!, request: byProducer('0', 10) });
    expect(repeat.kind).toBe('duplicate');
    expect((repeat as { receipt: { start: number } }).receipt.start).toBe(10);
    expect((await readAll(store, names[0]!)).toString()).toBe('-1234567890!');
    expect((await readAll(store, names[1]!)).toString()).toBe('-1234567890');
  });

  it("a producer's append made elsewhere fails the guard: its repeat here is a duplicate, its next append lands after it", async () => {
    const store = await node();
    const name = v1StreamKey('producer-elsewhere');
    await store.run('createStream', createRequest(name, { contentType: 'text/plain' }));
    expectAppended(await store.run('append', { name, request: byProducer('ab', 0) }));
    expect(store.knownProducers(name)?.records.get('p')?.lastSeq).toBe(0);
    // Another node's append of 'cd' as the producer's seq 1: its chunk, its stream row and its record.
    await elsewhere(
      `WITH s AS (SELECT id, tail FROM streams WHERE name = $1),
            c AS (INSERT INTO chunks (stream_id, start, data) SELECT id, tail, $2 FROM s),
            p AS (UPDATE producers r SET last_seq = 1, receipt_start = s.tail, receipt_next = s.tail + 2 FROM s WHERE r.stream_id = s.id AND r.producer_id = 'p')
       UPDATE streams SET tail = tail + 2, record_next = record_next + 1 WHERE name = $1`,
      [name, Buffer.from('cd')],
    );
    const repeat = await store.run('append', { name, request: byProducer('cd', 1) });
    expect(repeat.kind).toBe('duplicate');
    expect((repeat as { receipt: { start: number; next: number } }).receipt).toMatchObject({ start: 2, next: 4 });
    expect(store.stats.stale).toBe(1);
    const optimistic = store.stats.optimistic;
    expect(expectAppended(await store.run('append', { name, request: byProducer('e', 2) })).start).toBe(4);
    expect(store.stats.optimistic).toBe(optimistic + 1);
    expect((await readAll(store, name)).toString()).toBe('abcde');
  });

  it("a record changed on another node by a step that writes no stream row still fails this node's guard", async () => {
    const [store, other] = [await node(), await node()];
    const name = v1StreamKey('fenced-elsewhere');
    await store.run('createStream', createRequest(name, { contentType: 'text/plain' }));
    expectAppended(await store.run('append', { name, request: byProducer('a', 0) }));
    const record = store.knownProducers(name)!.records.get('p')!;
    const { id } = await mustGet(other, name);
    // Epoch 1 claimed elsewhere; the step touches no stream, so that node hints nobody of it.
    await inTxn(other, (txn) => txn.putProducer(id, { ...record, epoch: 1, lastSeq: 0 }));
    const outcome = await store.run('append', { name, request: byProducer('b', 1) });
    expect(refusal(outcome as AppendOutcome & { error?: { code: string } })).toBe('PRODUCER_FENCED');
    expect(store.stats.stale).toBe(1);
    expect((await readAll(store, name)).toString()).toBe('a');
  });

  it('what a node knows of producer records is what a load of them gives', async () => {
    const store = await node();
    const names = ['json', 'text'].map((n) => v1StreamKey(`records-as-loaded-${n}`));
    await store.run('createStream', createRequest(names[0]!, { contentType: 'application/json', data: Buffer.from('[1]') }));
    await store.run('createStream', createRequest(names[1]!, { contentType: 'text/plain' }));
    clock.advance(1_000);
    await Promise.all([
      store.run('append', { name: names[0]!, request: appendRequest('[2,3]', { contentType: 'application/json', producer: { id: 'j', epoch: 2, seq: 0 } }) }),
      store.run('append', { name: names[1]!, request: byProducer('x', 0, 'k', 3) }),
      store.run('append', { name: names[1]!, request: byProducer('y', 0, 'l') }),
    ]);
    await store.run('append', { name: names[1]!, request: byProducer('z', 1, 'l') });
    for (const name of names) {
      const known = store.knownProducers(name);
      const { producers } = await store.listProducers(await mustGet(store, name), null, 100);
      expect(known?.all, name).toBe(true);
      expect([...known!.records.values()].filter((r) => r !== null).sort((a, b) => (a!.id < b!.id ? -1 : 1)), name).toEqual(producers);
    }
  });
});

describe('known rows', () => {
  const stream = (id: number, name: string) => ({ id, name }) as never;

  it('are not used past their age, nor past the most kept, and go when another node names them', () => {
    let nowMs = 0;
    const known = new KnownRows(2, () => nowMs);
    known.remember([{ stream: stream(1, 'a'), version: '10' }]);
    nowMs = 1;
    known.remember([
      { stream: stream(2, 'b'), version: '11' },
      { stream: stream(3, 'c'), version: '12' },
    ]);
    expect(known.byIdFresh(1)).toBeUndefined();
    expect(known.byNameFresh('b')?.version).toBe('11');
    known.forget(['b']);
    expect(known.byNameFresh('b')).toBeUndefined();
    expect(known.byIdFresh(2)).toBeUndefined();
    nowMs = 1 + KNOWN_ROW_MAX_AGE_MS + 1;
    expect(known.byNameFresh('c')).toBeUndefined();
    expect(known.size).toBe(0);
  });

  it('the oldest go while the producer records held with them are past the most kept', () => {
    const known = new KnownRows(10, () => 0, 3);
    const records = (...ids: string[]) => ({ records: new Map(ids.map((id) => [id, null])), all: false });
    known.remember([{ stream: stream(1, 'a'), version: '10', producers: records('p', 'q') }]);
    known.remember([{ stream: stream(2, 'b'), version: '11', producers: records('r') }]);
    expect(known.producerCount).toBe(3);
    known.remember([{ stream: stream(3, 'c'), version: '12', producers: records('s') }]);
    expect(known.byIdFresh(1)).toBeUndefined();
    expect(known.byNameFresh('b')?.producers?.records.has('r')).toBe(true);
    expect(known.producerCount).toBe(2);
    known.remember([{ stream: stream(2, 'b'), version: '13' }]);
    expect(known.producerCount).toBe(1);
    known.forget(null);
    expect(known.producerCount).toBe(0);
  });

  it('a name known under a new id leaves its old row, and a row gone leaves its name', () => {
    const known = new KnownRows(10, () => 0);
    known.remember([{ stream: stream(1, 'a'), version: '10' }]);
    known.remember([{ stream: stream(2, 'a'), version: '11' }]);
    expect(known.byIdFresh(1)).toBeUndefined();
    expect(known.byNameFresh('a')?.stream).toEqual(stream(2, 'a'));
    known.remember([], [2]);
    expect(known.byNameFresh('a')).toBeUndefined();
    known.remember([{ stream: stream(3, 'x'), version: '1' }]);
    known.forget(null);
    expect(known.size).toBe(0);
  });
});
