/**
 * Differential tests of the subscription query rules (src/core/subscription-queries.ts):
 * random states of streams (tails, deleted), subscriptions (idle, leased, delivering, due
 * or not) and links (acknowledged below, at or past the tail, to missing streams) are
 * stored in each engine through real commands and batches, and each engine's queries
 * must answer what the core functions say of the same states:
 *
 * - `dueSubscriptions(now)` is the subscriptions for which `isDue` holds;
 * - `pendingLinks(sub)` is the links for which `isPending` holds (of `linkedTail`), in path order.
 *
 * Every state comes from the file's seed (test/helpers/seed.ts).
 */
import { describe, expect, it } from 'vitest';
import { isDue, isPending, linkedTail } from '../../src/core/subscription-queries.js';
import type { LinkView, SubscriptionLink, SubscriptionState, WakeState } from '../../src/core/subscription-types.js';
import type { StreamState } from '../../src/core/types.js';
import { v1StreamKey } from '../../src/protocol/ids.js';
import type { Store } from '../../src/storage/store.js';
import { firstByPath } from '../../src/storage/subscription-columns.js';
import { byBytes } from '../helpers/order.js';
import { seededRandom, testSeed, type Rng } from '../helpers/seed.js';
import { createRequest, everyEngine, storeForBlock, subscriptionState, TestClock, type EngineUnderTest } from './fixtures.js';
import { inTxn } from './txn-harness.js';

const T0 = 1_700_000_000_000;
const STATES = 12;

interface DrawnState {
  /** Path -> bytes it holds; deleted ones are deleted after creation. */
  streams: Array<{ path: string; bytes: number; deleted: boolean }>;
  subscriptions: SubscriptionState[];
  links: SubscriptionLink[];
  nowMs: number;
}

function drawnWake(rng: Rng, id: string): WakeState | null {
  const offsetMs = () => rng.int(-3, 3) * 1_000;
  switch (rng.int(0, 2)) {
    case 0:
      return null;
    case 1:
      return { id, snapshot: [], holder: 'w', leaseExpiresAtMs: T0 + offsetMs(), delivery: null };
    default:
      return { id, snapshot: [], holder: null, leaseExpiresAtMs: null, delivery: { attempts: rng.int(0, 3), nextAttemptAtMs: T0 + offsetMs(), lastError: null } };
  }
}

/** State number `n`: its names are its own, so that every state shares one store. */
function drawState(rng: Rng, n: number): DrawnState {
  const streams = Array.from({ length: rng.int(1, 5) }, (_, i) => ({ path: `q${n}/s${i}`, bytes: rng.int(0, 4), deleted: rng.int(0, 4) === 0 }));
  const subscriptions: SubscriptionState[] = [];
  const links: SubscriptionLink[] = [];
  for (let j = 0; j < rng.int(1, 4); j++) {
    const id = `q${n}-${j}`;
    const key = `v1/${id}`;
    subscriptions.push(subscriptionState(id, T0, { wake: drawnWake(rng, `w${n}-${j}`) }));
    // Links to some of the streams, and now and then to one that was never created.
    const paths = [...streams.map((s) => s.path).filter(() => rng.int(0, 2) > 0), ...(rng.int(0, 5) === 0 ? [`q${n}/never`] : [])];
    for (const path of paths) links.push({ subKey: key, stream: v1StreamKey(path), path, explicit: true, glob: false, ackedOffset: rng.int(0, 4) });
  }
  return { streams, subscriptions, links, nowMs: T0 + rng.int(-4, 4) * 1_000 };
}

async function store(target: Store, state: DrawnState): Promise<void> {
  for (const s of state.streams) {
    await target.run('createStream', createRequest(v1StreamKey(s.path), { data: Buffer.alloc(s.bytes, 120) }));
    if (s.deleted) await target.run('deleteStream', { name: v1StreamKey(s.path), incarnation: null });
  }
  await inTxn(target, (txn) => {
    for (const sub of state.subscriptions) txn.subscriptions.putSubscription(sub);
    for (const link of state.links) txn.subscriptions.putLink(link);
  });
}

/** What the core functions say of the state: the link views of a subscription, as a query would see them. */
function viewsOf(state: DrawnState, streams: ReadonlyMap<string, StreamState | undefined>, subKey: string): LinkView[] {
  return state.links.filter((l) => l.subKey === subKey).map((link) => ({ link, tail: linkedTail(streams.get(link.stream)) }));
}

function differentialTests(engine: EngineUnderTest): void {
  describe(`subscription query rules: ${engine.name}`, () => {
    const clock = new TestClock(T0);
    const targetOf = storeForBlock(engine, clock);

    it('dueSubscriptions is isDue, and pendingLinks is isPending in path order, for random states', async () => {
      const target = targetOf();
      const rng = seededRandom(testSeed() + 35);
      for (let n = 0; n < STATES; n++) {
        const state = drawState(rng, n);
        await store(target, state);
        const streams = new Map(await Promise.all(state.links.map(async (l) => [l.stream, await target.getStream(l.stream)] as const)));
        const mine = new Set(state.subscriptions.map((s) => s.key));
        const expectedDue = state.subscriptions.filter((sub) => isDue(sub, state.nowMs, () => viewsOf(state, streams, sub.key).some(isPending))).map((s) => s.key);
        const due = (await target.dueSubscriptions(state.nowMs, 10_000)).filter((key) => mine.has(key));
        expect(due, `state ${n} at ${state.nowMs - T0} ms: ${JSON.stringify(state)}`).toEqual(expectedDue.sort(byBytes));
        for (const sub of state.subscriptions) {
          const expected = firstByPath(viewsOf(state, streams, sub.key).filter(isPending), 100).map((v) => [v.link.path, v.tail]);
          const pending = await inTxn(target, (txn) => txn.subscriptions.pendingLinks(sub.key, 100));
          expect(pending.map((v) => [v.link.path, v.tail]), `state ${n}, ${sub.key}`).toEqual(expected);
        }
      }
    });
  });
}

for (const engine of everyEngine()) differentialTests(engine);
