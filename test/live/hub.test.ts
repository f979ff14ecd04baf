/**
 * The hub's hand-over to followers (src/live/hub.ts, Follower), against a store whose
 * stream loads take real time, so that commits arrive while a hand-over is under way.
 * The SSE tests (test/http/sse-tail.test.ts) cover the same path through the real
 * server, where loads almost never leave the microtask queue.
 */
import { describe, expect, test } from 'vitest';
import type { StreamState } from '../../src/core/types.js';
import { Latch } from '../../src/live/latch.js';
import { LiveHub, type Follower, type WaitResult } from '../../src/live/hub.js';
import type { CommitEvent, Store } from '../../src/storage/store.js';

/** Only what the hub uses of a store: commit listeners and stream loads. */
class SlowStore {
  private listener: (events: CommitEvent[]) => void = () => {};
  tail = 0;
  loads = 0;
  /** How long each load takes, in order; the last one repeats. */
  constructor(private readonly loadDelaysMs: number[]) {}

  onCommit(listener: (events: CommitEvent[]) => void): () => void {
    this.listener = listener;
    return () => {};
  }

  getStream(): Promise<StreamState> {
    const delayMs = this.loadDelaysMs[Math.min(this.loads++, this.loadDelaysMs.length - 1)]!;
    // The state as it was when the load began, answered later.
    const state = { tail: this.tail } as StreamState;
    return new Promise((resolve) => setTimeout(() => resolve(state), delayMs));
  }

  commit(tail: number): void {
    this.tail = tail;
    this.listener([{ name: 's', streamId: 1, stream: { tail } as StreamState }]);
  }
}

/** A follower that records every tail it is handed and stands at the last. */
function follower(handed: number[], prepares: { count: number }, opts: { refuse?: boolean } = {}) {
  let position = 0;
  const f: Follower<number> = {
    key: () => String(position),
    prepare: async (stream) => {
      prepares.count++;
      return stream?.tail ?? position;
    },
    take: (tail) => {
      if (opts.refuse) return false;
      handed.push((position = tail));
      return true;
    },
  };
  return f;
}

const hubOn = (store: SlowStore) => new LiveHub(store as unknown as Store, 100);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('LiveHub followers', () => {
  test('followers at one position share one load and one prepared change, and keep waiting', async () => {
    const store = new SlowStore([5]);
    const hub = hubOn(store);
    const prepares = { count: 0 };
    const takes: number[][] = Array.from({ length: 50 }, () => []);
    const results: WaitResult[] = [];
    for (const taken of takes) void hub.wait('s', 10_000, undefined, follower(taken, prepares)).then((r) => results.push(r));
    store.commit(10);
    await sleep(50);
    expect(store.loads).toBe(1);
    expect(prepares.count).toBe(1);
    for (const taken of takes) expect(taken).toEqual([10]);
    expect(results).toEqual([]);
    hub.close();
    await sleep(0);
    expect(results).toEqual(Array(50).fill('aborted'));
  });

  test('a commit made during a hand-over is handed over after it, so every follower takes changes in order', async () => {
    // The first load is slow and the next ones fast: hand-overs run at the same time would end in reverse.
    const store = new SlowStore([40, 1]);
    const hub = hubOn(store);
    const prepares = { count: 0 };
    const takes: number[][] = Array.from({ length: 20 }, () => []);
    for (const taken of takes) void hub.wait('s', 10_000, undefined, follower(taken, prepares));
    store.commit(10);
    await sleep(5);
    store.commit(20);
    store.commit(30);
    await sleep(100);
    // The later commits share one more hand-over, which loads the stream as they left it.
    for (const handed of takes) expect(handed).toEqual([10, 30]);
    expect(store.loads).toBe(2);
    hub.close();
  });

  test('a follower that does not take a change is woken; one whose wait ended during the hand-over gets nothing', async () => {
    const store = new SlowStore([30]);
    const hub = hubOn(store);
    const prepares = { count: 0 };
    const refusing = hub.wait('s', 10_000, undefined, follower([], prepares, { refuse: true }));
    const lateTaken: number[] = [];
    const timingOut = hub.wait('s', 10, undefined, follower(lateTaken, prepares));
    const plain = hub.wait('s', 10_000);
    store.commit(10);
    expect(await plain).toBe('changed');
    expect(await timingOut).toBe('timeout');
    expect(await refusing).toBe('changed');
    expect(lateTaken).toEqual([]);
    hub.close();
  });
});

describe('LiveHub waits and hang-ups', () => {
  test('a hang-up ends the waits of its reader only, at once when it came first, and a commit after it ends the rest', async () => {
    const store = new SlowStore([0]);
    const hub = hubOn(store);
    const gone = new Latch();
    const staying = new Latch();
    const results: Record<string, WaitResult> = {};
    const waits = [
      hub.wait('s', 10_000, gone).then((r) => (results.first = r)),
      hub.wait('s', 10_000, gone).then((r) => (results.second = r)),
      hub.wait('s', 10_000, staying).then((r) => (results.staying = r)),
    ];
    gone.fire();
    await sleep(0);
    expect(results).toEqual({ first: 'aborted', second: 'aborted' });
    expect(await hub.wait('s', 10_000, gone)).toBe('aborted');
    store.commit(10);
    await Promise.all(waits);
    expect(results.staying).toBe('changed');
    hub.close();
  });
});
