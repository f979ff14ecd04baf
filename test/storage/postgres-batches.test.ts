/**
 * Appends to one node on a real PostgreSQL whose writers send ahead, so that a writer's
 * writes span batches: every producer's appends land once each and in seq order,
 * Stream-Seq writers are never refused for a reorder, each stream's appends are
 * contiguous, and a batch retried after a deadlock still applies before a later one on
 * its stream. A node that ran batches side by side (tried for issue 41, see
 * docs/performance.md) must keep all of this: with row locks alone ordering two batches
 * on one stream, the first case failed at once (a producer's seq 1 applied before seq 0).
 * And what one batch writes: its appends' bytes, sent as one parameter (writes.ts), read
 * back intact, and its stream rows locked in the name order every batch uses.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { AppendOutcome } from '../../src/core/types.js';
import { v1StreamKey } from '../../src/protocol/ids.js';
import { appendRequest, createRequest, expectAppended, randomBytes, readAll, seededRandom, TestClock, usePostgresNodes } from './fixtures.js';

const clock = new TestClock();
const nodes = usePostgresNodes(clock);
const node = nodes.node;

/** The next turn of the event loop: commands issued before it form one batch (batched.ts). */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A session of its own holding `names`' stream rows locked until `release`. */
async function holdRows(names: string[]): Promise<{ client: pg.Client; release: () => Promise<void> }> {
  const client = new pg.Client(nodes.url());
  await client.connect();
  client.on('error', () => {});
  await client.query('BEGIN');
  await client.query('SELECT id FROM streams WHERE name = ANY($1::text[]) ORDER BY name FOR UPDATE', [names]);
  return {
    client,
    release: async () => {
      await client.query('ROLLBACK').catch(() => {});
      await client.end();
    },
  };
}

describe('writes sent ahead on one node', () => {
  it('producers and Stream-Seq writers sending ahead over many turns: every append once, in order, each stream contiguous', async () => {
    const store = await node();
    const random = seededRandom(41);
    const streams = Array.from({ length: 12 }, (_, i) => v1StreamKey(`s${i}`));
    for (const name of streams) await store.run('createStream', createRequest(name, { contentType: 'text/plain' }));
    // Per stream: two producers and one Stream-Seq writer, each sending its next write
    // without waiting for the last (so that its writes span batches); some producer writes
    // are sent twice (a retry), and must be answered duplicate the second time.
    interface Writer {
      stream: string;
      kind: 'producer' | 'seq';
      id: string;
      next: number;
    }
    const writers: Writer[] = streams.flatMap((stream, s) => [
      { stream, kind: 'producer' as const, id: `p${s}a`, next: 0 },
      { stream, kind: 'producer' as const, id: `p${s}b`, next: 0 },
      { stream, kind: 'seq' as const, id: `q${s}`, next: 0 },
    ]);
    const sent: Array<{ writer: Writer; n: number; retry: boolean; outcome: Promise<AppendOutcome> }> = [];
    const send = (writer: Writer, n: number, retry: boolean) => {
      const body = `<${writer.id}:${n}>`;
      const request =
        writer.kind === 'producer'
          ? appendRequest(body, { contentType: 'text/plain', producer: { id: writer.id, epoch: 0, seq: n } })
          : appendRequest(body, { contentType: 'text/plain', streamSeq: String(n).padStart(6, '0') });
      sent.push({ writer, n, retry, outcome: store.run('append', { name: writer.stream, request }) });
    };
    const turns = 120;
    for (let turn = 0; turn < turns; turn++) {
      // A few streams' writers each turn, chosen at random: consecutive turns name the same
      // streams or others, so that batches overlap by stream, or not, both ways.
      const chosen = new Set(Array.from({ length: 1 + random(4) }, () => streams[random(streams.length)]!));
      for (const writer of writers) {
        if (!chosen.has(writer.stream) || random(3) === 0) continue;
        send(writer, writer.next++, false);
        if (writer.kind === 'producer' && writer.next > 1 && random(6) === 0) send(writer, writer.next - 2 + random(2), true);
      }
      if (random(3) === 0) await nextTurn();
      // Or until a write sent earlier is answered: what is sent next goes to a later batch.
      else if (sent.length > 0) await sent[random(sent.length)]!.outcome;
    }
    const outcomes = await Promise.all(sent.map((s) => s.outcome));

    // Every first send was appended, every resend a duplicate of it.
    const appended = new Map<string, { start: number; next: number }[]>();
    sent.forEach(({ writer, n, retry }, i) => {
      const outcome = outcomes[i]!;
      const what = `${writer.id} #${n}${retry ? ' (resent)' : ''}: ${JSON.stringify(outcome)}`;
      if (retry) {
        expect(outcome.kind, what).toBe('duplicate');
        return;
      }
      const receipt = expectAppended(outcome);
      const spans = appended.get(writer.stream) ?? [];
      spans.push({ start: receipt.start, next: receipt.next });
      appended.set(writer.stream, spans);
    });

    for (const name of streams) {
      const spans = (appended.get(name) ?? []).sort((x, y) => x.start - y.start);
      let tail = 0;
      for (const span of spans) {
        expect(span.start, `${name}: appends contiguous`).toBe(tail);
        tail = span.next;
      }
      const stored = (await readAll(store, name)).toString();
      expect(stored.length).toBe(tail);
      // Each writer's writes once each, in the order it sent them.
      for (const writer of writers.filter((w) => w.stream === name)) {
        const mine = [...stored.matchAll(new RegExp(`<${writer.id}:(\\d+)>`, 'g'))].map((m) => Number(m[1]));
        expect(mine, `${writer.id}'s writes as stored`).toEqual(Array.from({ length: writer.next }, (_, i) => i));
      }
    }
  });

  it('a batch retried after a deadlock still applies before a later one on its stream', async () => {
    const store = await node();
    const [x, y] = [v1StreamKey('dl-x'), v1StreamKey('dl-y')];
    for (const name of [x, y]) await store.run('createStream', createRequest(name, { contentType: 'text/plain' }));
    // Another session holds y; the node's batch locks x, then waits for y; the session then
    // asks for x: PostgreSQL ends one of the two with a deadlock (the node's batch runs
    // again) while a later append to x, seq 1, is queued behind the batch holding seq 0.
    const holder = await holdRows([y]);
    // The session never looks for the deadlock itself: the node's batch, waiting since
    // before it, finds it after deadlock_timeout (1 s) and is the one ended and run again.
    await holder.client.query(`SET deadlock_timeout = '1h'`);
    let holderOutcome: Promise<unknown> = Promise.resolve();
    let holderGotX = false;
    try {
      const first = store.run('appendTransaction', {
        operations: [
          { name: x, request: appendRequest('a', { contentType: 'text/plain', producer: { id: 'p', epoch: 0, seq: 0 } }) },
          { name: y, request: appendRequest('b', { contentType: 'text/plain' }) },
        ],
      });
      // The batch's locks are taken in name order: x ('dl-x') before y.
      await expect.poll(async () => (await waitingOnLocks()) > 0, { timeout: 10_000 }).toBe(true);
      const later = store.run('append', { name: x, request: appendRequest('c', { contentType: 'text/plain', producer: { id: 'p', epoch: 0, seq: 1 } }) });
      await nextTurn();
      holderOutcome = holder.client.query('SELECT id FROM streams WHERE name = $1 FOR UPDATE', [x]).then(
        () => ((holderGotX = true), holder.release()),
        () => holder.release(),
      );
      expect((await first).kind).toBe('committed');
      expect(expectAppended(await later).start).toBe(1);
    } finally {
      await holderOutcome;
      await holder.release().catch(() => {});
    }
    expect(holderGotX, "the node's batch was not the one the deadlock ended").toBe(true);
    expect((await readAll(store, x)).toString()).toBe('ac');
    expect((await readAll(store, y)).toString()).toBe('b');
  });
});

describe('what one batch writes', () => {
  it('appends of many sizes, every byte value among them, read back byte for byte: one past 256 KiB, and more than 16 MiB in all', async () => {
    const store = await node();
    const random = seededRandom(77);
    const streams = Array.from({ length: 5 }, (_, i) => v1StreamKey(`bytes-${i}`));
    for (const name of streams) await store.run('createStream', createRequest(name));
    // Small appends travel in one parameter of at most 16 MiB (writes.ts): 70 of 250,000 bytes pass it.
    const sizes = [1, 2, 255, 256, 4096, 70_000, 300_000, ...Array.from({ length: 40 }, () => 1 + random(3000)), ...Array.from({ length: 70 }, () => 250_000)];
    const sent = sizes.map((size, i) => ({ name: streams[i % streams.length]!, data: randomBytes(random, size) }));
    const before = store.stats.batches;
    // Issued in one turn of the event loop: one batch (batched.ts) writes them all.
    const outcomes = await Promise.all(sent.map(({ name, data }) => store.run('append', { name, request: appendRequest(data) })));
    expect(store.stats.batches - before).toBe(1);
    outcomes.forEach((outcome) => expectAppended(outcome));
    for (const name of streams) {
      const expected = Buffer.concat(sent.filter((s) => s.name === name).map((s) => s.data));
      expect((await readAll(store, name)).equals(expected), name).toBe(true);
    }
  });

  // JavaScript's `<` puts U+1F600 (a surrogate pair) before U+FFFD; the "C" order of the name column, UTF-8 bytes, after it.
  const ORDERED = ['a', 'z', '\ufffd', '\u{1f600}'];

  it.each([
    { path: 'an optimistic batch (plain appends to rows the node knows)', producers: false, loads: false },
    { path: 'an optimistic batch (producer appends, records known with the rows)', producers: true, loads: false },
    { path: 'a batch that loads its rows (producer appends on a node that has not seen them)', producers: true, loads: true },
  ])('$path locks its rows in the order PostgreSQL sorts their names, past U+FFFF too', async ({ producers, loads }) => {
    const [first, second] = [await node(), await node()];
    const names = ORDERED.map((n) => v1StreamKey(`order-${n}`));
    const request = (data: string, seq: number) =>
      appendRequest(data, { contentType: 'text/plain', ...(producers ? { producer: { id: 'p', epoch: 0, seq } } : {}) });
    for (const name of names) await first.run('createStream', createRequest(name, { contentType: 'text/plain' }));
    // The first appends load the rows under lock; after them the first node knows every one (optimistic.ts).
    await Promise.all(names.map((name) => first.run('append', { name, request: request('-', 0) })));
    const store = loads ? second : first;
    const holder = await holdRows([names[3]!]);
    try {
      const optimistic = store.stats.optimistic;
      const appended = Promise.all([...names].reverse().map((name) => store.run('append', { name, request: request('+', 1) })));
      await expect.poll(async () => (await waitingOnLocks()) > 0, { timeout: 10_000 }).toBe(true);
      // Waiting for the last row in that order, the batch holds every row before it.
      for (const name of names.slice(0, 3)) expect(await lockedElsewhere(name), name).toBe(true);
      await holder.release();
      for (const outcome of await appended) expect(expectAppended(outcome).start).toBe(1);
      expect(store.stats.optimistic - optimistic).toBe(loads ? 0 : 1);
    } finally {
      await holder.release().catch(() => {});
    }
  });
});

/** Whether another session holds `name`'s stream row: a lock of it that will not wait fails. */
async function lockedElsewhere(name: string): Promise<boolean> {
  const client = new pg.Client(nodes.url());
  await client.connect();
  try {
    await client.query('SELECT id FROM streams WHERE name = $1 FOR UPDATE NOWAIT', [name]);
    return false;
  } catch (error) {
    if ((error as pg.DatabaseError).code === '55P03') return true;
    throw error;
  } finally {
    await client.end();
  }
}

/** Sessions of this database waiting for a lock. */
async function waitingOnLocks(): Promise<number> {
  const client = new pg.Client(nodes.url());
  await client.connect();
  try {
    const { rows } = await client.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
    );
    return rows[0]!.n;
  } finally {
    await client.end();
  }
}
