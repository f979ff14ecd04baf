/**
 * The idempotent producer against a real rill server. Faults are injected at the fetch
 * boundary (a lost answer after the server applied the write, a request that never
 * left, a request overtaken by later ones) and by SIGKILLing the server under load; the
 * stream must hold every acknowledged write exactly once, in order.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  FencedError,
  IdempotentProducer,
  RillClient,
  RillError,
  StreamSeqConflictError,
  type FetchLike,
  type StreamHandle,
} from '../../src/client/index.js';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { TestClock } from '../helpers/clock.js';
import { readAll, retrying, sleep, until } from '../helpers/processing.js';

let server: RunningServer;
let counter = 0;

beforeAll(async () => {
  server = await startServer();
  await new RillClient({ url: server.url }).bucket('prod').create();
});

afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

function header(init: RequestInit | undefined, name: string): string | undefined {
  return (init?.headers as Record<string, string> | undefined)?.[name];
}

interface Faults {
  /**
   * Called for every producer append; its answer decides the fault. `{ heldUntilAnswered }`
   * holds the request back until the server has answered that later seq: it is overtaken.
   */
  decide(seq: number, epoch: number): 'pass' | 'lose-answer' | 'drop' | { heldUntilAnswered: number };
  seen: Array<{ seq: number; status: number | 'lost' | 'dropped' }>;
}

/** A fetch that injects faults into producer appends and records what happened. */
function faultyFetch(faults: Faults): FetchLike {
  const answered = (seq: number) => until(() => faults.seen.some((s) => s.seq === seq && typeof s.status === 'number'), `seq ${seq} answered`);
  return async (input, init) => {
    const seqRaw = header(init, 'producer-seq');
    if (init?.method !== 'POST' || seqRaw === undefined) return fetch(input, init);
    const seq = Number(seqRaw);
    const fault = faults.decide(seq, Number(header(init, 'producer-epoch')));
    if (fault === 'drop') {
      faults.seen.push({ seq, status: 'dropped' });
      throw new TypeError('simulated: connection refused before sending');
    }
    if (typeof fault === 'object') await answered(fault.heldUntilAnswered);
    const response = await fetch(input, init);
    if (fault === 'lose-answer') {
      await response.arrayBuffer();
      faults.seen.push({ seq, status: 'lost' });
      throw new TypeError('simulated: connection reset after the server answered');
    }
    faults.seen.push({ seq, status: response.status });
    return response;
  };
}

async function freshStream(clientOrUrl: RillClient | string = server.url, contentType = 'application/json'): Promise<StreamHandle> {
  const client = typeof clientOrUrl === 'string' ? new RillClient({ url: clientOrUrl }) : clientOrUrl;
  counter += 1;
  const stream = client.stream(`prod/s-${counter}`);
  await stream.create({ contentType });
  return stream;
}

describe('idempotent producer', () => {
  it('pipelines and batches JSON messages, in order, exactly once', async () => {
    const stream = await freshStream();
    const producer = new IdempotentProducer(stream, { id: 'batcher', maxInFlight: 4, maxBatchMessages: 100 });
    const receipts = await Promise.all(Array.from({ length: 2000 }, (_, i) => producer.appendJson({ i })));
    await producer.close();
    const writes = new Set(receipts.map((r) => r.seq));
    expect(writes.size).toBe(20);
    const values = await readAll<{ i: number }>(stream);
    expect(values).toEqual(Array.from({ length: 2000 }, (_, i) => ({ i })));
    // Each message's receipt gives its own offsets (and its place in its write), which
    // are where a read finds it.
    const read: string[] = [];
    for await (const m of stream.messages({ offset: '-1' })) read.push(`${m.offset}-${m.nextOffset}`);
    expect(receipts.map((r) => `${r.offset}-${r.nextOffset}`)).toEqual(read);
    expect(new Set(receipts.map((r) => r.index)).size).toBe(100);
  });

  it('resends unchanged when an answer is lost, and the server deduplicates', async () => {
    const faulted = new Set<number>();
    // The first attempt of every third write loses its answer; of every fifth, never leaves.
    const faults: Faults = {
      seen: [],
      decide: (seq) => {
        if (faulted.has(seq)) return 'pass';
        faulted.add(seq);
        return seq % 3 === 1 ? 'lose-answer' : seq % 5 === 2 ? 'drop' : 'pass';
      },
    };
    const client = new RillClient({ url: server.url, fetch: faultyFetch(faults) });
    const stream = await freshStream(client);
    const producer = new IdempotentProducer(stream, { id: 'lossy', maxInFlight: 3, retry: { baseDelayMs: 5 } });
    const receipts = [];
    for (let i = 0; i < 30; i++) receipts.push(producer.appendMessages([{ i }]));
    const done = await Promise.all(receipts);
    await producer.close();
    expect(faults.seen.some((s) => s.status === 'lost')).toBe(true);
    expect(faults.seen.some((s) => s.status === 'dropped')).toBe(true);
    // Resends of writes whose answers were lost are answered as duplicates (204).
    expect(done.filter((r) => r.duplicate).length).toBeGreaterThan(0);
    expect(faults.seen.filter((s) => s.status === 204).length).toBeGreaterThan(0);
    expect(await readAll(stream)).toEqual(Array.from({ length: 30 }, (_, i) => ({ i })));
  });

  it('waits out 409 gaps when a later write overtakes an earlier one', async () => {
    // The first sends of seqs 1 and 4 wait until seq 2 and seq 5 were answered: each is overtaken.
    const held = new Set<number>();
    const faults: Faults = {
      seen: [],
      decide: (seq) => ((seq === 1 || seq === 4) && !held.has(seq) ? (held.add(seq), { heldUntilAnswered: seq + 1 }) : 'pass'),
    };
    const client = new RillClient({ url: server.url, fetch: faultyFetch(faults) });
    const stream = await freshStream(client);
    const producer = new IdempotentProducer(stream, { id: 'racer', maxInFlight: 5 });
    await producer.appendMessages([{ i: 0 }]); // the claim travels alone
    const pending = Array.from({ length: 8 }, (_, k) => producer.appendMessages([{ i: k + 1 }]));
    await Promise.all(pending);
    await producer.close();
    expect(faults.seen.filter((s) => s.status === 409).length).toBeGreaterThan(0);
    expect(await readAll(stream)).toEqual(Array.from({ length: 9 }, (_, i) => ({ i })));
  });

  it('survives a SIGKILLed server: every acknowledged write is there exactly once', { timeout: 30_000 }, async () => {
    const local = await startServer({ process: true });
    let current = local;
    try {
      const client = new RillClient({ url: local.url, timeoutMs: 2000 });
      await client.bucket('prod').create();
      const stream = client.stream('prod/restart');
      await stream.create({ contentType: 'application/json' });
      const producer = new IdempotentProducer(stream, { id: 'survivor', maxInFlight: 4, retry: { maxAttempts: 100, maxDelayMs: 300 } });
      const acked: number[] = [];
      const writes: Array<Promise<void>> = [];
      // One loop makes the appends, in order. 400 timers of i * 5 ms set at once did not:
      // Node runs the timers due by the list of their duration, and the 500 ms list also
      // held this process's in-process server's 500 ms subscription sweep, so after an
      // event-loop stall the 500 ms timer ran right after the sweep, before the 490 and
      // 495 ms ones, and the stream rightly held 97, 100, 98, 99.
      const appending = (async () => {
        for (let i = 0; i < 400; i++) {
          writes.push(producer.appendJson({ i }).then(() => void acked.push(i)));
          await sleep(5); // the pause is the behaviour: writes keep coming for 2 s, before, during and after the restart
        }
      })();
      // Killed under load: once a quarter of the writes are acknowledged, most are yet to come.
      await until(() => acked.length >= 100, '100 writes acknowledged');
      await local.kill();
      current = await startServer({ process: true, port: local.port, dataDir: local.dataDir });
      await appending;
      await Promise.all(writes);
      await producer.close();
      expect(acked.length).toBe(400);
      const values = await retrying(() => readAll<{ i: number }>(stream));
      expect(values).toEqual(Array.from({ length: 400 }, (_, i) => ({ i })));
    } finally {
      await current.stop();
      removeDir(local.dataDir);
    }
  });

  it('refuses a reused key with another body when digests are on', async () => {
    const stream = await freshStream();
    const producer = new IdempotentProducer(stream, { id: 'digester', epoch: 1, digest: true });
    await producer.appendJson({ v: 'original' });
    await producer.close();
    const reuse = await stream
      .appendMessages([{ v: 'different' }], { producer: { id: 'digester', epoch: 1, seq: 0, digest: '0'.repeat(64) } })
      .catch((e: unknown) => e);
    // A digest that does not match the body is refused before anything else.
    expect((reuse as RillError).code).toBe('DIGEST_MISMATCH');
    const { blake3 } = await import('@noble/hashes/blake3.js');
    const { bytesToHex } = await import('@noble/hashes/utils.js');
    const body = JSON.stringify([{ v: 'different' }]);
    const conflict = await stream
      .append(body, { producer: { id: 'digester', epoch: 1, seq: 0, digest: bytesToHex(blake3(new TextEncoder().encode(body))) } })
      .catch((e: unknown) => e);
    expect(conflict).toBeInstanceOf(FencedError);
    expect((conflict as FencedError).code).toBe('PRODUCER_KEY_CONFLICT');
    expect((conflict as FencedError).outcome).toBe('key-conflict');
    expect(await readAll(stream)).toEqual([{ v: 'original' }]);
  });

  it('stops for good when a newer epoch takes over, rejecting what is pending', async () => {
    const stream = await freshStream();
    const old = new IdempotentProducer(stream, { id: 'worker', epoch: 3 });
    await old.appendJson({ from: 'old', k: 0 });
    await old.appendJson({ from: 'old', k: 1 });
    const newer = new IdempotentProducer(stream, { id: 'worker', epoch: 4 });
    await newer.appendJson({ from: 'new', k: 0 });
    expect(newer.claim).toMatchObject({ epoch: 4, seq: 0, closedEpoch: 3, closedSeq: 1 });
    const pending = [old.appendJson({ from: 'old', k: 2 }), old.appendJson({ from: 'old', k: 3 })];
    const results = await Promise.allSettled(pending);
    for (const result of results) {
      expect(result.status).toBe('rejected');
      const error = (result as PromiseRejectedResult).reason as FencedError;
      expect(error).toBeInstanceOf(FencedError);
      expect(error.currentEpoch).toBe(4);
      expect(error.outcome).toBe('epoch-closed;by=claim');
    }
    expect(old.stopped).toBeInstanceOf(FencedError);
    const later = await old.appendJson({ from: 'old', k: 4 }).catch((e: unknown) => e);
    expect(later).toBeInstanceOf(FencedError);
    expect((later as FencedError).currentEpoch).toBe(4);
    expect(await readAll(stream)).toEqual([
      { from: 'old', k: 0 },
      { from: 'old', k: 1 },
      { from: 'new', k: 0 },
    ]);
  });

  it('never takes a body it did not send for a duplicate when it reuses a closed epoch', async () => {
    const stream = await freshStream();
    const first = new IdempotentProducer(stream, { id: 'reuser', epoch: 1 });
    await first.appendJson({ run: 1, k: 0 });
    await first.appendJson({ run: 1, k: 1 });
    await new IdempotentProducer(stream, { id: 'reuser', epoch: 2 }).appendJson({ run: 2 });
    // A restart that reuses epoch 1: the 403 says seqs 0-1 of epoch 1 applied, but not its own.
    for (const digest of [false, true]) {
      const restarted = new IdempotentProducer(stream, { id: 'reuser', epoch: 1, digest });
      const error = await restarted.appendJson({ run: 3, digest }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(FencedError);
      expect((error as FencedError).outcome).toBe('epoch-closed;by=claim');
      expect(await restarted.appendJson({ run: 3, again: true }).catch((e: unknown) => e)).toBeInstanceOf(FencedError);
    }
    expect(await readAll(stream)).toEqual([{ run: 1, k: 0 }, { run: 1, k: 1 }, { run: 2 }]);
  });

  it('claims the next epoch itself after a restart', async () => {
    const stream = await freshStream();
    const before = new IdempotentProducer(stream, { id: 'restarter', epoch: 7 });
    await before.appendJson({ run: 1 });
    await before.appendJson({ run: 1 });
    // A restart that lost its epoch starts low: the claim answers 403 stale-epoch.
    const low = new IdempotentProducer(stream, { id: 'restarter', epoch: 0, autoClaim: true });
    await low.appendJson({ run: 2 });
    expect(low.epoch).toBe(8);
    expect(low.claim).toMatchObject({ closedEpoch: 7, closedSeq: 1 });
    // A restart that reuses its epoch finds its claim already written: it moves on too.
    const same = new IdempotentProducer(stream, { id: 'restarter', epoch: 8, autoClaim: true, digest: true });
    await same.appendJson({ run: 3 });
    expect(same.epoch).toBe(9);
    // Without autoClaim a stale epoch is fenced.
    const manual = new IdempotentProducer(stream, { id: 'restarter', epoch: 2 });
    const error = await manual.appendJson({ run: 4 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FencedError);
    expect((error as FencedError).outcome).toBe('stale-epoch');
    expect((error as FencedError).currentEpoch).toBe(9);
    expect(await readAll(stream)).toEqual([{ run: 1 }, { run: 1 }, { run: 2 }, { run: 3 }]);
  });

  it('claims above the floor when the stream forgot an idle producer', async () => {
    const clock = new TestClock();
    const local = await startServer({ args: ['--producer-ttl', '1s'], clock });
    try {
      const client = new RillClient({ url: local.url });
      await client.bucket('prod').create();
      const stream = client.stream('prod/forgetful');
      await stream.create({ contentType: 'application/json' });
      const before = new IdempotentProducer(stream, { id: 'sleeper', epoch: 5 });
      await before.appendJson({ run: 1 });
      clock.advance(1_300); // idle past the TTL
      // The handle sends Stream-Incarnation, so a forgotten epoch at or below the floor is refused.
      const manual = await new IdempotentProducer(stream, { id: 'sleeper', epoch: 3 }).appendJson({ run: 2 }).catch((e: unknown) => e);
      expect(manual).toBeInstanceOf(FencedError);
      expect((manual as FencedError).outcome).toBe('producer-expired');
      expect((manual as FencedError).currentEpoch).toBe(5);
      const after = new IdempotentProducer(stream, { id: 'sleeper', epoch: 3, autoClaim: true });
      await after.appendJson({ run: 3 });
      expect(after.epoch).toBe(6);
      expect(await readAll(stream)).toEqual([{ run: 1 }, { run: 3 }]);
    } finally {
      await local.stop();
      removeDir(local.dataDir);
    }
  });

  it('rejects only the writes a Stream-Seq 409 refuses and renumbers the rest', async () => {
    const stream = await freshStream();
    await stream.appendJson({ seed: true }, { streamSeq: '05' });
    const producer = new IdempotentProducer(stream, { id: 'cas', maxInFlight: 4 });
    await producer.appendJson({ s: '06' }, { streamSeq: '06' });
    const outcomes = await Promise.allSettled(
      ['03', '07', '04', '08', '08', '09'].map((seq) => producer.appendJson({ s: seq }, { streamSeq: seq })),
    );
    const refused = outcomes.map((o) => (o.status === 'rejected' ? (o.reason as StreamSeqConflictError).lastSeq : 'ok'));
    expect(refused).toEqual(['06', 'ok', '07', 'ok', '08', 'ok']);
    for (const o of outcomes) if (o.status === 'rejected') expect(o.reason).toBeInstanceOf(StreamSeqConflictError);
    // The producer keeps going after refusals: its seqs were reused without gaps.
    await producer.appendJson({ s: 'plain' });
    await producer.close();
    expect(producer.stopped).toBeUndefined();
    expect(await readAll(stream)).toEqual([{ seed: true }, { s: '06' }, { s: '07' }, { s: '08' }, { s: '09' }, { s: 'plain' }]);
  });

  it('stops on a refusal that is not retryable and rejects everything after it', async () => {
    const stream = await freshStream();
    const producer = new IdempotentProducer(stream, { id: 'closer' });
    await producer.appendJson({ a: 1 });
    await stream.close();
    const results = await Promise.allSettled([producer.appendJson({ a: 2 }), producer.appendJson({ a: 3 })]);
    expect(results.every((r) => r.status === 'rejected' && (r.reason as RillError).code === 'STREAM_CLOSED')).toBe(true);
    expect(producer.stopped?.code).toBe('STREAM_CLOSED');
  });

  it('writes raw bytes to a byte stream', async () => {
    const stream = await freshStream(server.url, 'application/octet-stream');
    const producer = new IdempotentProducer(stream, { id: 'raw', digest: true });
    await Promise.all([producer.append(new Uint8Array([1, 2])), producer.append(new Uint8Array([3])), producer.append('AB')]);
    await producer.close();
    const batches = [];
    for await (const b of stream.read()) batches.push(b.data);
    expect([...Buffer.concat(batches)]).toEqual([1, 2, 3, 65, 66]);
  });
});
