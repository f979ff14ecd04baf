/**
 * A second batch in flight on PostgreSQL (src/storage/postgres/overlap.ts, issue 41): while
 * a batch's COMMIT is on its way, the next runs on the rows it leaves and goes out beside
 * it, its guard expecting the first batch's transaction as each written row's version.
 * Real PostgreSQL. A first batch is held at its COMMIT by a deferred trigger of the test's
 * own on `streams`, which waits for an advisory lock the test holds (and, when told to,
 * fails the transaction), so that the second batch deterministically begins beside it; the
 * test waits for what PostgreSQL shows in pg_locks, never for time.
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import type { AppendOutcome } from '../../src/core/types.js';
import { v1StreamKey } from '../../src/protocol/ids.js';
import type { PostgresStore } from '../../src/storage/postgres/engine.js';
import { appendRequest, createRequest, expectAppended, readAll, seededRandom, TestClock, usePostgresNodes } from './fixtures.js';

const clock = new TestClock();
const nodes = usePostgresNodes(clock);
const node = nodes.node;
const text = (data: string, overrides = {}) => appendRequest(data, { contentType: 'text/plain', ...overrides });

/** The advisory lock the commit trigger waits for. */
const HOLD_KEY = 4141;

/**
 * Installs the trigger: every transaction that updates a stream row waits at its COMMIT
 * for HOLD_KEY, and the first `failures` rows' triggers (a sequence, which no rollback
 * undoes) fail their transaction instead of committing.
 */
async function holdCommits(db: pg.Client, failures: number): Promise<void> {
  await db.query(`CREATE SEQUENCE IF NOT EXISTS overlap_test_fired`);
  await db.query(`CREATE OR REPLACE FUNCTION overlap_test_hold() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_advisory_xact_lock_shared(${HOLD_KEY});
      IF nextval('overlap_test_fired') <= ${failures} THEN RAISE EXCEPTION 'overlap test: this commit fails'; END IF;
      RETURN NULL;
    END $$`);
  await db.query(`CREATE CONSTRAINT TRIGGER overlap_test_hold AFTER UPDATE ON streams DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION overlap_test_hold()`);
}

let admin: pg.Client | null = null;

async function adminSession(): Promise<pg.Client> {
  admin = new pg.Client(nodes.url());
  await admin.connect();
  return admin;
}

afterEach(async () => {
  if (admin === null) return;
  await admin.query('SELECT pg_advisory_unlock_all()');
  await admin.query('DROP TRIGGER IF EXISTS overlap_test_hold ON streams');
  await admin.query('DROP FUNCTION IF EXISTS overlap_test_hold()');
  await admin.query('DROP SEQUENCE IF EXISTS overlap_test_fired');
  await admin.end();
  admin = null;
});

/** Resolves once `count` sessions wait for a lock (the commit trigger's, or a row's). */
async function waiters(db: pg.Client, count: number): Promise<void> {
  for (;;) {
    const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted');
    if (rows[0]!.n >= count) return;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

/** Resolves once `condition` holds, looking again each turn of the event loop. */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** Streams created and appended to once, so that the node knows their rows (its batches are optimistic). */
async function knownStreams(store: PostgresStore, prefix: string, count: number): Promise<string[]> {
  const names = Array.from({ length: count }, (_, i) => v1StreamKey(`${prefix}-${i}`));
  for (const name of names) await store.run('createStream', createRequest(name, { contentType: 'text/plain' }));
  await Promise.all(names.map((name) => store.run('append', { name, request: text('-') })));
  for (const name of names) expect(store.knownStream(name)).toBeDefined();
  return names;
}

/** The order in which promises settle, by label. */
function settleOrder(): { order: string[]; track<T>(label: string, promise: Promise<T>): Promise<T> } {
  const order: string[] = [];
  return {
    order,
    track: (label, promise) => {
      promise.then(
        () => order.push(label),
        () => order.push(label),
      );
      return promise;
    },
  };
}

describe('a second batch in flight', () => {
  it('begins while the first commits, runs on the rows it leaves, and is answered after it', async () => {
    const store = await node();
    const [a, b] = await knownStreams(store, 'both', 2);
    const db = await adminSession();
    await holdCommits(db, 0);
    await db.query('SELECT pg_advisory_lock($1)', [HOLD_KEY]);
    const before = { ...store.stats };
    const { order, track } = settleOrder();
    const first = [track('first a', store.run('append', { name: a!, request: text('1') })), track('first b', store.run('append', { name: b!, request: text('2') }))];
    // The first batch reached its COMMIT (its trigger waits): the next begins beside it.
    await waiters(db, 1);
    const second = [track('second a', store.run('append', { name: a!, request: text('3') })), track('second b', store.run('append', { name: b!, request: text('4') }))];
    // Its guard waits for the first batch's row locks.
    await waiters(db, 2);
    await db.query('SELECT pg_advisory_unlock($1)', [HOLD_KEY]);
    const receipts = (await Promise.all([...first, ...second])).map((o) => expectAppended(o));
    expect(receipts.map((r) => r.start)).toEqual([1, 1, 2, 2]);
    expect(order.slice(0, 2).sort()).toEqual(['first a', 'first b']);
    expect(store.stats.overlapped - before.overlapped).toBe(1);
    expect(store.stats.optimistic - before.optimistic).toBe(2);
    expect(store.stats.stale - before.stale).toBe(0);
    expect((await readAll(store, a!)).toString()).toBe('-13');
    expect((await readAll(store, b!)).toString()).toBe('-24');
    // What the second left is known, at its version: the next batch is optimistic and passes its guard.
    expectAppended(await store.run('append', { name: a!, request: text('5') }));
    expect(store.stats.stale - before.stale).toBe(0);
    expect(store.stats.optimistic - before.optimistic).toBe(3);
  });

  it('when the first fails at its COMMIT, the second commits nothing and runs again after it, on the rows as stored', async () => {
    const store = await node();
    const [a, b, c] = await knownStreams(store, 'fails', 3);
    const db = await adminSession();
    // The first commit fails (its first row's trigger ends the transaction); none after.
    await holdCommits(db, 1);
    await db.query('SELECT pg_advisory_lock($1)', [HOLD_KEY]);
    const before = { ...store.stats };
    const { order, track } = settleOrder();
    const first = [track('first a', store.run('append', { name: a!, request: text('1') })), track('first b', store.run('append', { name: b!, request: text('2') }))];
    await waiters(db, 1);
    // The second shares a stream with the first (a) and has one of its own (c).
    const second = [track('second a', store.run('append', { name: a!, request: text('3') })), track('second c', store.run('append', { name: c!, request: text('4') }))];
    await waiters(db, 2);
    await db.query('SELECT pg_advisory_unlock($1)', [HOLD_KEY]);
    const firstOutcomes = await Promise.allSettled(first);
    for (const outcome of firstOutcomes) expect(outcome.status).toBe('rejected');
    const receipts = (await Promise.all(second)).map((o) => expectAppended(o));
    expect(receipts.map((r) => r.start)).toEqual([1, 1]);
    expect(order.slice(0, 2).sort()).toEqual(['first a', 'first b']);
    // Its guard found a's row as it was before the first: it committed nothing there.
    expect(store.stats.stale - before.stale).toBeGreaterThanOrEqual(1);
    expect(store.stats.deferred - before.deferred).toBe(1);
    expect(store.stats.overlapped - before.overlapped).toBe(0);
    expect((await readAll(store, a!)).toString()).toBe('-3');
    expect((await readAll(store, b!)).toString()).toBe('-');
    expect((await readAll(store, c!)).toString()).toBe('-4');
  });

  it('a second batch that needs what it cannot hold (a producer) waits for the first and runs the usual way', async () => {
    const store = await node();
    const [a] = await knownStreams(store, 'producer', 1);
    const db = await adminSession();
    await holdCommits(db, 0);
    await db.query('SELECT pg_advisory_lock($1)', [HOLD_KEY]);
    const before = { ...store.stats };
    const first = store.run('append', { name: a!, request: text('1') });
    await waiters(db, 1);
    const second = store.run('append', { name: a!, request: text('2', { producer: { id: 'p', epoch: 0, seq: 0 } }) });
    const third = store.run('append', { name: a!, request: text('3') });
    await until(() => store.stats.deferred > before.deferred);
    await db.query('SELECT pg_advisory_unlock($1)', [HOLD_KEY]);
    const receipts = [await first, await second, await third].map((o) => expectAppended(o as AppendOutcome));
    expect(receipts.map((r) => r.start)).toEqual([1, 2, 3]);
    expect(store.stats.deferred - before.deferred).toBe(1);
    expect((await readAll(store, a!)).toString()).toBe('-123');
  });

  it('writers sending ahead on two nodes, commits slowed: every append once, each writer in order, each stream contiguous', async () => {
    const both = [await node(), await node()];
    const random = seededRandom(4242);
    const streams = await knownStreams(both[0]!, 'ahead', 5);
    const db = await adminSession();
    // Commits wait a little, as a flush to a disk would, so that batches overlap.
    await db.query(`CREATE OR REPLACE FUNCTION overlap_test_hold() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.002); RETURN NULL; END $$`);
    await db.query(`CREATE CONSTRAINT TRIGGER overlap_test_hold AFTER UPDATE ON streams DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION overlap_test_hold()`);
    const before = both.map((n) => ({ ...n.stats }));
    // Stream-Seq is one sequence per stream: at most one writer of a stream sends it.
    const writers = streams.flatMap((stream, s) => both.map((_, n) => ({ stream, node: n, id: `w${s}n${n}`, seq: n === 0 && random(2) === 0, next: 0 })));
    const sent: Array<{ stream: string; outcome: Promise<AppendOutcome> }> = [];
    for (let turn = 0; turn < 60; turn++) {
      for (const writer of writers) {
        if (random(3) === 0) continue;
        const n = writer.next++;
        // Stream-Seq writers: a later write applied before an earlier one would be refused (409).
        const seq = writer.seq ? { streamSeq: `${writer.id}-${String(n).padStart(4, '0')}` } : {};
        sent.push({ stream: writer.stream, outcome: both[writer.node]!.run('append', { name: writer.stream, request: text(`<${writer.id}:${n}>`, seq) }) });
      }
      if (random(3) === 0) await sent[random(sent.length)]!.outcome;
      else await new Promise<void>((resolve) => setImmediate(resolve));
    }
    const outcomes = await Promise.all(sent.map((s) => s.outcome));
    for (const name of streams) {
      const spans = outcomes
        .filter((_, i) => sent[i]!.stream === name)
        .map((o) => expectAppended(o))
        .sort((x, y) => x.start - y.start);
      let tail = 1;
      for (const span of spans) {
        expect(span.start, `${name}: appends contiguous`).toBe(tail);
        tail = span.next;
      }
      const stored = (await readAll(both[0]!, name)).toString();
      expect(stored.length).toBe(tail);
      for (const writer of writers.filter((w) => w.stream === name)) {
        const mine = [...stored.matchAll(new RegExp(`<${writer.id}:(\\d+)>`, 'g'))].map((m) => Number(m[1]));
        expect(mine, `${writer.id}'s writes as stored`).toEqual(Array.from({ length: writer.next }, (_, i) => i));
      }
    }
    const overlapped = both.reduce((sum, n, i) => sum + n.stats.overlapped - before[i]!.overlapped, 0);
    expect(overlapped).toBeGreaterThan(0);
  });
});
