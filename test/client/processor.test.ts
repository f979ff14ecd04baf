/**
 * The processor in-process against a real server: windows by count, bytes and time,
 * resuming from the target's Stream-Seq, skipping windows a 409 says are published,
 * stopping, and a partitioned target. The crash tests cover it killed mid-step.
 */
import { describe, expect, it } from 'vitest';
import { IdempotentProducer, NotFoundError, runProcessor, type StreamHandle, type Window } from '../../src/client/index.js';
import { useClientServer } from '../helpers/client-server.js';
import { expectWindows, readAll, until, type Aggregate } from '../helpers/processing.js';

const env = useClientServer('proc');
let counter = 0;

async function streams(contentTypes: string[]): Promise<StreamHandle[]> {
  counter += 1;
  const out = [];
  for (const [i, contentType] of contentTypes.entries()) {
    const stream = env.client.stream(`proc/t${counter}-${i}`);
    await stream.create({ contentType });
    out.push(stream);
  }
  return out;
}

async function fill(source: StreamHandle, from: number, to: number): Promise<void> {
  const producer = new IdempotentProducer(source, { id: `fill-${from}` });
  await producer.appendMessages(Array.from({ length: to - from + 1 }, (_, i) => ({ n: from + i })));
  await producer.close();
}

function sum(window: Window<{ n: number }>): Aggregate {
  const ns = window.values.map((v) => v.n);
  return { first: ns[0]!, last: ns[ns.length - 1]!, count: ns.length, sum: ns.reduce((a, b) => a + b, 0) };
}

/** A fresh handle, as a restarted process would have. */
const again = (stream: StreamHandle) => env.client.stream(stream.url);

describe('processor', () => {
  it('names a missing target, or creates it when asked', async () => {
    const [source] = (await streams(['application/json'])) as [StreamHandle];
    await fill(source, 1, 4);
    await source.close();
    const target = env.client.stream(`proc/t${counter}-missing`);
    const options = { source, target, producerId: 'sum', window: { count: 2 }, step: sum };
    const refused = await runProcessor(options).done.catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(NotFoundError);
    expect((refused as NotFoundError).message).toContain(`/proc/t${counter}-missing does not exist`);
    const created = await runProcessor({ ...options, source: again(source), createTarget: { contentType: 'application/json' } }).done;
    expect(created.published).toBe(2);
    expect(await readAll(target)).toEqual([
      { first: 1, last: 2, count: 2, sum: 3 },
      { first: 3, last: 4, count: 2, sum: 7 },
    ]);
  });

  it('publishes one result per window and resumes from the target after a restart', async () => {
    const [source, target] = (await streams(['application/json', 'application/json'])) as [StreamHandle, StreamHandle];
    await fill(source, 1, 50);
    const first = runProcessor({ source, target, producerId: 'sum', window: { count: 10 }, step: sum });
    await untilLastSeq([target], await readLastSeqAfter(source, 50));
    await first.stop();
    await fill(source, 51, 100);
    await source.close();
    const steps: number[] = [];
    const second = runProcessor({
      source: again(source),
      target: again(target),
      producerId: 'sum',
      window: { count: 10 },
      step: (w: Window<{ n: number }>) => {
        steps.push(w.values[0]!.n);
        return sum(w);
      },
    });
    const summary = await second.done;
    // The second run started where the target's Stream-Seq said, not at the beginning.
    expect(steps[0]).toBe(51);
    expect(summary.resumedFrom).toBe((await readLastSeqAfter(source, 50)));
    expectWindows(await readAll<Aggregate>(target), 100, 10);
    expect((await target.head()).lastSeq).toBe((await source.head()).nextOffset);
  });

  it('closes byte windows where the bytes reach the bound, also in the middle of a read', async () => {
    const [source, target] = (await streams(['application/json', 'application/json'])) as [StreamHandle, StreamHandle];
    await fill(source, 1, 200);
    await source.close();
    const windows: Window[] = [];
    const run = runProcessor({ source, target, producerId: 'bytes', window: { bytes: 100 }, step: (w) => (windows.push(w), sum(w as Window<{ n: number }>)) });
    await run.done;
    const results = await readAll<Aggregate>(target);
    expect(results.length).toBe(windows.length);
    windows.slice(0, -1).forEach((w) => expect(w.bytes).toBeGreaterThanOrEqual(100));
    windows.slice(0, -1).forEach((w) => expect(w.bytes - w.messages.at(-1)!.size).toBeLessThan(100));
    expect(results.map((r) => r.count).reduce((a, b) => a + b, 0)).toBe(200);
    expect(results.map((r) => r.sum).reduce((a, b) => a + b, 0)).toBe(20100);
  });

  it('cuts a byte stream into windows of exactly the bound', async () => {
    const [source, target] = (await streams(['application/octet-stream', 'application/json'])) as [StreamHandle, StreamHandle];
    const bytes = Uint8Array.from({ length: 1000 }, (_, i) => (i * 13) % 256);
    for (let at = 0; at < bytes.length; at += 137) await source.append(bytes.subarray(at, Math.min(at + 137, bytes.length)));
    await source.close();
    const run = runProcessor({
      source,
      target,
      producerId: 'chunks',
      window: { bytes: 64 },
      step: (w: Window<Uint8Array>) => ({ start: w.startOffset, hex: Buffer.concat(w.values).toString('hex') }),
    });
    await run.done;
    const results = await readAll<{ start: string; hex: string }>(target);
    expect(results.length).toBe(Math.ceil(1000 / 64));
    results.forEach((r, i) => expect(Number(r.start)).toBe(i * 64));
    expect(Buffer.from(results.map((r) => r.hex).join(''), 'hex')).toEqual(Buffer.from(bytes));
  });

  it('closes time windows while the source is quiet', async () => {
    const [source, target] = (await streams(['application/json', 'application/json'])) as [StreamHandle, StreamHandle];
    let lastPublished = 0;
    const run = runProcessor({ source, target, producerId: 'timer', window: { timeMs: 150 }, step: sum, onResult: (event) => void (lastPublished = event.result.last) });
    for (let group = 1; group <= 3; group++) {
      for (let n = group * 4 - 3; n <= group * 4; n++) await source.appendJson({ n });
      // The source is quiet now: only the window's timer can close it and publish up to here.
      await until(() => lastPublished === group * 4, `the window holding ${group * 4} closed by its timer`);
    }
    await source.close();
    await run.done;
    const results = await readAll<Aggregate>(target);
    expect(results.length).toBeGreaterThanOrEqual(3);
    expect(results.map((r) => [r.first, r.last])).toEqual(results.map((r) => [r.first, r.first + r.count - 1]));
    results.slice(1).forEach((r, i) => expect(r.first).toBe(results[i]!.last + 1));
    expect(results.reduce((a, r) => a + r.sum, 0)).toBe(78);
  });

  it('skips windows a 409 with Stream-Last-Seq says are published and reads on after them', async () => {
    const [source, target] = (await streams(['application/json', 'application/json'])) as [StreamHandle, StreamHandle];
    await fill(source, 1, 100);
    await source.close();
    const ends: string[] = [];
    for await (const m of source.messages()) ends.push(m.nextOffset!);
    const outcomes: string[] = [];
    const run = runProcessor({
      source,
      target,
      producerId: 'skipper',
      window: { count: 10 },
      maxInFlight: 1,
      step: async (w: Window<{ n: number }>) => {
        // Another writer publishes windows 2-4 as one result while this one computes window 2.
        if (w.values[0]!.n === 11) await target.appendJson({ first: 11, last: 40, count: 30, sum: 765 }, { streamSeq: ends[39] });
        return sum(w);
      },
      onResult: (event) => outcomes.push(event.outcome),
    });
    const summary = await run.done;
    expect(summary.alreadyPublished).toBe(1);
    expect(outcomes.filter((o) => o === 'already-published').length).toBe(1);
    const results = await readAll<Aggregate>(target);
    expect(results.map((r) => r.first)).toEqual([1, 11, 41, 51, 61, 71, 81, 91]);
    expect(results.reduce((a, r) => a + r.sum, 0)).toBe(5050);
  });

  it('publishes to a partitioned target one result at a time and resumes from the highest partition', async () => {
    const [source, ...parts] = await streams(['application/json', 'application/json', 'application/json', 'application/json']);
    await fill(source!, 1, 60);
    const partition = (r: Aggregate) => ((r.first - 1) / 10) % 3;
    const first = runProcessor({ source: source!, target: parts, partition, producerId: 'split', window: { count: 10 }, step: sum });
    await untilLastSeq(parts, await readLastSeqAfter(source!, 60));
    await first.stop();
    await fill(source!, 61, 120);
    await source!.close();
    const second = runProcessor({ source: again(source!), target: parts.map(again), partition, producerId: 'split', window: { count: 10 }, step: sum });
    const summary = await second.done;
    const heads = await Promise.all(parts.map((p) => p.head()));
    expect(summary.resumedFrom).not.toBe('-1');
    expect(heads.map((h) => h.lastSeq!).sort().at(-1)).toBe((await source!.head()).nextOffset);
    const results = (await Promise.all(parts.map((p) => readAll<Aggregate>(p)))).flat().sort((a, b) => a.first - b.first);
    expectWindows(results, 120, 10);
  });
});

/** Waits until the highest Stream-Seq over `targets` is `expected`. */
async function untilLastSeq(targets: StreamHandle[], expected: string): Promise<void> {
  const reached = async () => (await Promise.all(targets.map((t) => t.head()))).some((h) => h.lastSeq === expected);
  await until(reached, `a target at Stream-Seq ${expected}`);
}

/** The source offset after message `n` (1-based). */
async function readLastSeqAfter(source: StreamHandle, n: number): Promise<string> {
  let i = 0;
  for await (const m of source.messages()) if (++i === n) return m.nextOffset!;
  throw new Error('not enough messages');
}
