/**
 * Producer record changes held with their batch rows (storage/sqlite/held-producers.ts):
 * the stored form reads back exactly and refuses what it never writes; a transaction
 * that rolls back leaves the held changes as they were; and on the real engine the
 * `producers` table holds what the producers' last writes say, after seals and after a
 * restart from a crash image, with forgotten and evicted producers gone for good. (That
 * every answer stays the seed's through crashes is the producer model test's job.)
 */
import { copyFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { ProducerRecord, ProducerSettings } from '../../src/core/types.js';
import { v1StreamKey } from '../../src/protocol/ids.js';
import { SqliteStore, type RecentIndexing } from '../../src/storage/sqlite/engine.js';
import { producerValues } from '../../src/storage/producer-columns.js';
import { HeldProducers, packProducerChanges, unpackProducerChanges, type HeldChange } from '../../src/storage/sqlite/held-producers.js';
import { removeDir, tempDataDir } from '../helpers/server.js';
import { appendRequest, createRequest, expectAppended, TestClock } from './fixtures.js';

const record = (id: string, lastSeq: number, lastSeenMs = 1_000): ProducerRecord => ({
  id,
  epoch: 2,
  lastSeq,
  receipt: { start: lastSeq * 10, next: lastSeq * 10 + 10, closed: false, records: null },
  digest: null,
  claim: { closedEpoch: null, closedSeq: null, digest: null },
  lastSeenMs,
});

describe('stored form', () => {
  it('reads back every change exactly, in order; refuses a form it never writes', () => {
    const changes: HeldChange[] = [
      { streamId: 7, producerId: 'writer', change: record('writer', 3) },
      { streamId: 2 ** 40, producerId: '😀-ｚ', change: null },
      {
        streamId: 7,
        producerId: 'claimed',
        change: {
          id: 'claimed',
          epoch: 2 ** 53 - 1,
          lastSeq: 0,
          receipt: { start: 2 ** 52, next: 2 ** 52 + 1, closed: true, records: { start: 2 ** 51, next: 2 ** 51 + 1 } },
          digest: 'ab'.repeat(32),
          claim: { closedEpoch: 4, closedSeq: 9, digest: 'cd'.repeat(32) },
          lastSeenMs: 1_700_000_000_123,
        },
      },
      { streamId: 7, producerId: 'writer', change: record('writer', 4) },
    ];
    expect(unpackProducerChanges(packProducerChanges(changes))).toEqual(changes);
    // The form stays the one rows were always written in: producerRow is the record's values after its stream's id.
    const stringified = JSON.stringify(changes.map(({ streamId, producerId, change }) => (change === null ? [streamId, producerId] : [streamId, ...producerValues(change)])));
    expect(packProducerChanges(changes)).toBe(stringified);
    expect(packProducerChanges([])).toBe('[]');
    const quoted = [{ streamId: 1, producerId: 'a"b\\c\n\u2028', change: { ...record('a"b\\c\n\u2028', 1), digest: '"' } }];
    expect(packProducerChanges(quoted)).toBe(JSON.stringify(quoted.map(({ streamId, change }) => [streamId, ...producerValues(change)])));
    expect(unpackProducerChanges('[]')).toEqual([]);
    for (const bad of ['{}', '[[1]]', '[["1","p"]]', '[[1,"p",2,3]]', '[1]']) expect(() => unpackProducerChanges(bad), bad).toThrow(/invariant/);
  });
});

describe('held changes', () => {
  it('answers the newest change, held before sealed, and a rollback restores what was held', () => {
    const held = new HeldProducers();
    held.begin();
    held.put(1, record('a', 0));
    held.put(1, record('b', 0));
    held.commit();
    held.seal();
    expect(held.size).toBe(2);
    held.begin();
    held.put(1, record('a', 1));
    held.delete(1, 'b');
    expect(held.get(1, 'a')?.lastSeq).toBe(1);
    expect(held.get(1, 'b')).toBeNull();
    expect(held.get(1, 'c')).toBeUndefined();
    expect(JSON.parse(held.txnChangesPacked()!)).toHaveLength(2);
    expect(held.takeStream(1).map((c) => [c.producerId, c.change?.lastSeq ?? null])).toEqual([
      ['a', 0],
      ['b', 0],
      ['a', 1],
      ['b', null],
    ]);
    held.put(1, record('c', 0));
    held.dropStream(1);
    expect(held.size).toBe(0);
    held.rollback();

    expect(held.get(1, 'a')?.lastSeq).toBe(0);
    expect(held.get(1, 'b')?.lastSeq).toBe(0);
    expect(held.get(1, 'c')).toBeUndefined();
    expect(held.sealDone).toBe(false);
    expect(held.txnChangesPacked()).toBeNull();
  });

  it('writes a seal in slices: sealed changes are taken whole per stream, later ones stay held', () => {
    const held = new HeldProducers();
    held.begin();
    for (const stream of [1, 2, 3]) held.put(stream, record('p', stream));
    held.commit();
    held.seal();
    held.begin();
    held.put(2, record('p', 20));
    held.commit();
    held.begin();
    const first = held.takeSealed(2);
    held.commit();
    expect(first.map((c) => c.streamId)).toEqual([1, 2]);
    expect(held.sealDone).toBe(false);
    expect(held.takeSealed(2).map((c) => c.streamId)).toEqual([3]);
    expect(held.sealDone).toBe(true);
    // The change made after the seal began is still held, for the next one.
    expect(held.get(2, 'p')?.lastSeq).toBe(20);
    expect(held.takeAll().map((c) => [c.streamId, c.change?.lastSeq])).toEqual([[2, 20]]);
    expect(() => {
      held.put(9, record('q', 0));
      held.seal();
      held.seal();
    }).toThrow(/invariant/);
  });
});

const SETTINGS: ProducerSettings = { maxProducers: 2, idleEvictMs: 1_000, forgetAfterMs: 5_000 };
/** Never sealed within a test: changes stay held until a close or a restart. */
const NO_SEALS: RecentIndexing = { sealRows: 1e9, sealBytes: 1e12, stepRows: 1 };
/** Sealed every few appends, one change written per step. */
const TINY_SEALS: RecentIndexing = { sealRows: 3, sealBytes: 1e12, stepRows: 1 };

describe('on the SQLite engine', () => {
  const dirs: string[] = [];
  afterEach(() => dirs.splice(0).forEach(removeDir));
  const newDir = (): string => {
    const dir = tempDataDir();
    dirs.push(dir);
    return dir;
  };
  const open = (dataDir: string, clock: TestClock, recentIndexing: RecentIndexing) =>
    new SqliteStore({ dataDir, producers: SETTINGS, nowMs: clock.read, recentIndexing });

  /** The database and WAL as they are now: what a power cut leaves once every write is answered. */
  function crashImage(dataDir: string): string {
    const image = newDir();
    for (const file of ['rill.db', 'rill.db-wal']) if (existsSync(join(dataDir, file))) copyFileSync(join(dataDir, file), join(image, file));
    return image;
  }

  function storedProducers(dataDir: string): Array<{ stream_id: number; producer_id: string; last_seq: number }> {
    const db = new Database(join(dataDir, 'rill.db'), { readonly: true });
    try {
      return db.prepare<[], { stream_id: number; producer_id: string; last_seq: number }>('SELECT stream_id, producer_id, last_seq FROM producers ORDER BY stream_id, producer_id').all();
    } finally {
      db.close();
    }
  }

  const write = (store: SqliteStore, name: string, id: string, seq: number) =>
    store.run('append', { name, request: appendRequest(`${id}${seq}|`, { producer: { id, epoch: 0, seq } }) }).then(expectAppended);

  it('a restart from a crash image keeps the last write of each producer, and not a forgotten or evicted one', async () => {
    const clock = new TestClock();
    const dataDir = newDir();
    const name = v1StreamKey('held');
    const store = open(dataDir, clock, NO_SEALS);
    try {
      await store.run('createStream', createRequest(name));
      await write(store, name, 'old', 0);
      await write(store, name, 'idle', 0);
      // `idle` writes once more before the forget timing; past it, `old` is forgotten when a
      // new producer arrives.
      clock.advance(SETTINGS.forgetAfterMs - 500);
      await write(store, name, 'idle', 1);
      clock.advance(501);
      await write(store, name, 'new', 0);
      // Past the idle-evict timing: a third producer over the limit of 2 replaces `idle`.
      clock.advance(SETTINGS.idleEvictMs);
      await write(store, name, 'new', 1);
      await write(store, name, 'third', 0);
      await write(store, name, 'third', 1);
      const image = crashImage(dataDir);
      const reopened = open(image, clock, NO_SEALS);
      await reopened.close();
      expect(storedProducers(image).map((p) => [p.producer_id, p.last_seq])).toEqual([
        ['new', 1],
        ['third', 1],
      ]);
    } finally {
      await store.close();
    }
  });

  it("seals write each producer's last record to the table; a clean close writes the rest", async () => {
    const clock = new TestClock();
    const dataDir = newDir();
    const names = [0, 1, 2].map((i) => v1StreamKey(`sealed-${i}`));
    const store = open(dataDir, clock, TINY_SEALS);
    try {
      for (const name of names) await store.run('createStream', createRequest(name));
      for (let seq = 0; seq < 12; seq++) for (const name of names) await write(store, name, 'w', seq);
      // Seals ran: the table holds records of this run already, each at or before its last seq.
      const during = storedProducers(dataDir);
      expect(during.length).toBeGreaterThan(0);
      for (const p of during) expect(p.last_seq).toBeLessThanOrEqual(11);
      expect(during.some((p) => p.last_seq >= 8)).toBe(true);
    } finally {
      await store.close();
    }
    expect(storedProducers(dataDir).map((p) => p.last_seq)).toEqual([11, 11, 11]);
  });
});
