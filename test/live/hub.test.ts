/**
 * The hub's hand-over to followers (src/live/hub.ts, Follower), against a store whose
 * stream loads end when the test says, so that commits arrive while a hand-over is under
 * way. The SSE tests (test/http/sse-tail.test.ts) cover the same path through the real
 * server, where loads almost never leave the microtask queue.
 */
import { describe, expect, test } from 'vitest';
import type { StreamState } from '../../src/core/types.js';
import { Latch } from '../../src/live/latch.js';
import { LiveHub, type Follower, type WaitResult } from '../../src/live/hub.js';
import type { CommitEvent, Store } from '../../src/storage/store.js';

/** Only what the hub uses of a store: commit listeners and stream loads, which end when the test says. */
class SlowStore {
  private listener: (events: CommitEvent[]) => void = () => {};
  tail = 0;
  loads = 0;
  /** Loads under way, in the order they began. */
  private readonly unanswered: Array<() => void> = [];

  onCommit(listener: (events: CommitEvent[]) => void): () => void {
    this.listener = listener;
    return () => {};
  }

  getStream(): Promise<StreamState> {
    this.loads++;
    // The state as it was when the load began, answered later.
    const state = { tail: this.tail } as StreamState;
    return new Promise((resolve) => this.unanswered.push(() => resolve(state)));
  }

  /**
   * Ends the loads under way, the latest first (hand-overs running at the same time would
   * then end in reverse order), and waits until the hub has done all it does with them.
   */
  async answerLoads(): Promise<void> {
    for (const answer of this.unanswered.splice(0).reverse()) answer();
    await settled();
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

/** Resolves once every callback already queued has run: a hand-over whose load ended runs to its end in microtasks. */
const settled = () => new Promise((resolve) => setImmediate(resolve));

describe('LiveHub followers', () => {
  test('followers at one position share one load and one prepared change, and keep waiting', async () => {
    const store = new SlowStore();
    const hub = hubOn(store);
    const prepares = { count: 0 };
    const takes: number[][] = Array.from({ length: 50 }, () => []);
    const results: WaitResult[] = [];
    for (const taken of takes) void hub.wait('s', 10_000, undefined, follower(taken, prepares)).then((r) => results.push(r));
    store.commit(10);
    await store.answerLoads();
    expect(store.loads).toBe(1);
    expect(prepares.count).toBe(1);
    for (const taken of takes) expect(taken).toEqual([10]);
    expect(results).toEqual([]);
    hub.close();
    await settled();
    expect(results).toEqual(Array(50).fill('aborted'));
  });

  test('a commit made during a hand-over is handed over after it, so every follower takes changes in order', async () => {
    const store = new SlowStore();
    const hub = hubOn(store);
    const prepares = { count: 0 };
    const takes: number[][] = Array.from({ length: 20 }, () => []);
    for (const taken of takes) void hub.wait('s', 10_000, undefined, follower(taken, prepares));
    store.commit(10);
    // The first load is still under way when the next commits arrive; loads end latest first,
    // so hand-overs run at the same time would end in reverse.
    expect(store.loads).toBe(1);
    store.commit(20);
    store.commit(30);
    await store.answerLoads();
    await store.answerLoads();
    // The later commits share one more hand-over, which loads the stream as they left it.
    for (const handed of takes) expect(handed).toEqual([10, 30]);
    expect(store.loads).toBe(2);
    hub.close();
  });

  test('a follower that does not take a change is woken; one whose wait ended during the hand-over gets nothing', async () => {
    const store = new SlowStore();
    const hub = hubOn(store);
    const prepares = { count: 0 };
    const refusing = hub.wait('s', 10_000, undefined, follower([], prepares, { refuse: true }));
    const lateTaken: number[] = [];
    const timingOut = hub.wait('s', 10, undefined, follower(lateTaken, prepares));
    const plain = hub.wait('s', 10_000);
    store.commit(10);
    expect(await plain).toBe('changed');
    // The 10 ms wait ends while the hand-over's load is still under way.
    expect(await timingOut).toBe('timeout');
    await store.answerLoads();
    expect(await refusing).toBe('changed');
    expect(lateTaken).toEqual([]);
    hub.close();
  });
});

describe('LiveHub waits and hang-ups', () => {
  test('a hang-up ends the waits of its reader only, at once when it came first, and a commit after it ends the rest', async () => {
    const store = new SlowStore();
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
    await settled();
    expect(results).toEqual({ first: 'aborted', second: 'aborted' });
    expect(await hub.wait('s', 10_000, gone)).toBe('aborted');
    store.commit(10);
    await Promise.all(waits);
    expect(results.staying).toBe('changed');
    hub.close();
  });
});
