/**
 * The storage contract for subscriptions, run for every engine: the Txn methods inside a
 * real batch (txn-harness.ts), after real commands, and the SubscriptionReads outside
 * one. Tails come from real appends; expected values from what the test wrote.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_SUBSCRIPTION_LIMITS, type SubscriptionLink, type SubscriptionState, type WakeState } from '../../src/core/subscription-types.js';
import { v1StreamKey } from '../../src/protocol/ids.js';
import type { Store } from '../../src/storage/store.js';
import { appendRequest, createRequest, everyEngine, mustGet, subscriptionState, TestClock, type EngineUnderTest } from './fixtures.js';
import { inBatch, inTxn } from './txn-harness.js';

const T0 = 1_700_000_000_000;

function subscription(id: string, overrides: Partial<SubscriptionState> = {}, scope = 'v1'): SubscriptionState {
  return subscriptionState(id, T0, overrides, scope);
}

function link(sub: SubscriptionState, path: string, ackedOffset = 0, flags: Partial<SubscriptionLink> = {}): SubscriptionLink {
  return { subKey: sub.key, stream: `${sub.scope}/${path}`, path, explicit: true, glob: false, ackedOffset, ...flags };
}

function wake(overrides: Partial<WakeState> = {}): WakeState {
  return { id: 'w1', snapshot: [{ path: 'a', explicit: true, acked: 0, tail: 3 }], holder: null, leaseExpiresAtMs: null, delivery: null, ...overrides };
}

/** Creates a stream in the scope `v1` holding `bytes` bytes. */
async function stream(store: Store, path: string, bytes = 0): Promise<string> {
  const name = v1StreamKey(path);
  await store.run('createStream', createRequest(name, { data: Buffer.alloc(bytes, 120) }));
  return name;
}

function append(store: Store, path: string, data: string): () => Promise<unknown> {
  return () => store.run('append', { name: v1StreamKey(path), request: appendRequest(data) });
}

/** The paths and tails of link views, the way the tests compare them. */
const shown = (views: Array<{ link: SubscriptionLink; tail: number | null }>) => views.map((v) => [v.link.path, v.tail]);

function subscriptionContract(engine: EngineUnderTest): void {
  describe(`subscriptions: ${engine.name}`, () => {
    const clock = new TestClock(T0);
    let store: Store;
    // One store per engine for the file; each test uses names of its own.
    beforeAll(async () => {
      store = await engine.open(clock);
    });
    afterAll(async () => {
      await store.close();
      engine.cleanup();
    });
    beforeEach(() => {
      clock.nowMs = T0;
    });

    it('stores, reads, counts, lists and drops subscriptions; dropping one drops its links', async () => {
      const a = subscription('crud-a', { config: { ...subscription('x').config, pattern: 'crud/*', type: 'webhook', webhookUrl: 'https://h/x' } });
      const b = subscription('crud-b', { wake: wake({ holder: 'w', leaseExpiresAtMs: T0 + 5 }) });
      const other = subscription('crud-c', { config: { ...subscription('x').config, pattern: '**' } }, 'b/bucket1');
      const before = await inTxn(store, (txn) => txn.subscriptions.countSubscriptions());
      await inTxn(store, (txn) => {
        for (const s of [a, b, other]) txn.subscriptions.putSubscription(s);
        txn.subscriptions.putLink(link(a, 'crud/1'));
        txn.subscriptions.putLink(link(a, 'crud/2'));
      });
      const [got, count, patterns, links] = await inBatch(store, [
        (txn) => txn.subscriptions.getSubscription(a.key),
        (txn) => txn.subscriptions.countSubscriptions(),
        (txn) => txn.subscriptions.patternSubscriptions('v1').filter((s) => s.id.startsWith('crud')),
        (txn) => txn.subscriptions.countLinks(a.key),
      ]);
      expect(got).toEqual(a);
      expect(count).toBe(before + 3);
      expect(patterns).toEqual([a]);
      expect(links).toBe(2);
      expect(await store.getSubscription(b.key)).toEqual(b);
      expect(await store.getSubscription('v1/none')).toBeUndefined();
      expect((await store.listSubscriptions('b/bucket1', null, 10)).map((s) => s.key)).toEqual([other.key]);

      const changed = { ...b, generation: 4, wake: null };
      await inTxn(store, (txn) => {
        txn.subscriptions.putSubscription(changed);
        txn.subscriptions.dropSubscription(a.key);
      });
      expect(await store.getSubscription(b.key)).toEqual(changed);
      const [gone, goneLink, countAfter] = await inBatch(store, [
        (txn) => txn.subscriptions.getSubscription(a.key),
        (txn) => txn.subscriptions.getLink(a.key, 'v1/crud/1'),
        (txn) => txn.subscriptions.countLinks(a.key),
      ]);
      expect([gone, goneLink, countAfter]).toEqual([undefined, undefined, 0]);
      expect(await store.subscriptionLinks(a.key, null, 10)).toEqual([]);
      // Recreated at the same key: a new subscription, without the old links.
      await inTxn(store, (txn) => txn.subscriptions.putSubscription({ ...a, incarnation: 'again' }));
      expect((await store.getSubscription(a.key))?.incarnation).toBe('again');
      expect(await inTxn(store, (txn) => txn.subscriptions.countLinks(a.key))).toBe(0);

      // Dropped and recreated within one step, its stored links gone: the step sees only its new link.
      await stream(store, 'crud/new', 2);
      await inTxn(store, (txn) => ['crud/1', 'crud/new'].forEach((path) => txn.subscriptions.putLink(link(a, path))));
      const [seen] = await inBatch(store, [
        (txn) => {
          txn.subscriptions.dropSubscription(a.key);
          txn.subscriptions.putSubscription(a);
          txn.subscriptions.putLink(link(a, 'crud/new'));
          return [txn.subscriptions.countLinks(a.key), shown(txn.subscriptions.links(a.key, null, 10)), shown(txn.subscriptions.pendingLinks(a.key, 10)), txn.subscriptions.getLink(a.key, 'v1/crud/1')];
        },
      ]);
      expect(seen).toEqual([1, [['crud/new', 2]], [['crud/new', 2]], undefined]);
      expect(shown(await store.subscriptionLinks(a.key, null, 10))).toEqual([['crud/new', 2]]);
    });

    it('creates a subscription only in a bucket that exists when its batch runs, even beside the bucket\'s deletion', async () => {
      const create = (id: string) => store.run('createSubscription', { candidate: subscription(id, {}, 'b/racing'), limits: DEFAULT_SUBSCRIPTION_LIMITS });
      expect(await create('early')).toMatchObject({ kind: 'rejected', error: { code: 'BUCKET_NOT_FOUND' } });
      await store.run('createBucket', { id: 'racing' });
      // The deletion and the creation are submitted together, so one batch runs both in order.
      const [deleted, created] = await Promise.all([store.run('deleteBucket', { id: 'racing' }), create('late')]);
      expect(deleted).toEqual({ kind: 'deleted' });
      expect(created).toMatchObject({ kind: 'rejected', error: { code: 'BUCKET_NOT_FOUND' } });
      expect(await store.listSubscriptions('b/racing', null, 10)).toEqual([]);
      await store.run('createBucket', { id: 'racing' });
      expect(await create('after')).toMatchObject({ kind: 'created' });
      // The v1 scope has no bucket to need.
      expect(await store.run('createSubscription', { candidate: subscription('no-bucket-needed'), limits: DEFAULT_SUBSCRIPTION_LIMITS })).toMatchObject({ kind: 'created' });
    });

    it("answers the keys of a scope's subscriptions, the step's own changes included", async () => {
      const stored = subscription('kept', {}, 'b/scopekeys');
      const dropped = subscription('dropped', {}, 'b/scopekeys');
      await inTxn(store, (txn) => [stored, dropped, subscription('elsewhere', {}, 'b/scopeother')].forEach((s) => txn.subscriptions.putSubscription(s)));
      const [keys] = await inBatch(store, [
        (txn) => {
          txn.subscriptions.dropSubscription(dropped.key);
          txn.subscriptions.putSubscription(subscription('added', {}, 'b/scopekeys'));
          return txn.subscriptions.scopeSubscriptionKeys('b/scopekeys').sort();
        },
      ]);
      expect(keys).toEqual(['b/scopekeys/added', 'b/scopekeys/kept']);
    });

    it('lists a scope in key order (bytes), page by page', async () => {
      const ids = ['list-b', 'list-B', 'list-a', 'list-é', 'list-z'];
      await inTxn(store, (txn) => ids.forEach((id) => txn.subscriptions.putSubscription(subscription(id, {}, 'b/lister'))));
      const expected = ['list-B', 'list-a', 'list-b', 'list-z', 'list-é'].map((id) => `b/lister/${id}`);
      const first = await store.listSubscriptions('b/lister', null, 2);
      const second = await store.listSubscriptions('b/lister', first[1]!.key, 2);
      const third = await store.listSubscriptions('b/lister', second[1]!.key, 2);
      expect([...first, ...second, ...third].map((s) => s.key)).toEqual(expected);
      // A scope is matched whole: `b/list` is not `b/lister`.
      expect(await store.listSubscriptions('b/list', null, 10)).toEqual([]);
    });

    it('answers links in path order with their streams’ tails, null for a missing or deleted stream', async () => {
      const sub = subscription('paths');
      await stream(store, 'paths/b', 3);
      await stream(store, 'paths/B', 1);
      await stream(store, 'paths/é', 2);
      const source = await stream(store, 'paths/src', 4);
      await store.run('createStream', createRequest(v1StreamKey('paths/fork'), { fork: { sourceName: source, offset: null, subOffset: 0 } }));
      expect((await store.run('deleteStream', { name: source, incarnation: null })).kind).toBe('soft-deleted');
      await inTxn(store, (txn) => {
        txn.subscriptions.putSubscription(sub);
        for (const path of ['paths/é', 'paths/b', 'paths/missing', 'paths/B', 'paths/src']) txn.subscriptions.putLink(link(sub, path, 1));
      });
      const expected = [['paths/B', 1], ['paths/b', 3], ['paths/missing', null], ['paths/src', null], ['paths/é', 2]];
      const [all, page2] = await inBatch(store, [(txn) => txn.subscriptions.links(sub.key, null, 10), (txn) => txn.subscriptions.links(sub.key, 'paths/b', 2)]);
      expect(shown(all as never)).toEqual(expected);
      expect(shown(page2 as never)).toEqual(expected.slice(2, 4));
      expect(shown(await store.subscriptionLinks(sub.key, null, 10))).toEqual(expected);
      expect(shown(await store.subscriptionLinks(sub.key, 'paths/missing', 10))).toEqual(expected.slice(3));
      expect((await store.subscriptionLinks(sub.key, null, 1))[0]!.link).toEqual(link(sub, 'paths/B', 1));
      expect(await inTxn(store, (txn) => txn.subscriptions.getLink(sub.key, 'v1/paths/b'))).toEqual(link(sub, 'paths/b', 1));
    });

    it('pending links: only undeleted streams beyond the cursor, in path order, at most `limit`, seeing the batch’s own appends and changes', async () => {
      const sub = subscription('pend');
      for (const [path, bytes] of [['pend/a', 5], ['pend/b', 2], ['pend/c', 0], ['pend/d', 9]] as const) await stream(store, path, bytes);
      await store.run('deleteStream', { name: v1StreamKey('pend/d'), incarnation: null });
      await inTxn(store, (txn) => {
        txn.subscriptions.putSubscription(sub);
        txn.subscriptions.putLink(link(sub, 'pend/a', 2));
        txn.subscriptions.putLink(link(sub, 'pend/b', 2));
        txn.subscriptions.putLink(link(sub, 'pend/c', 0));
        txn.subscriptions.putLink(link(sub, 'pend/d', 0));
      });
      expect(shown(await inTxn(store, (txn) => txn.subscriptions.pendingLinks(sub.key, 10)))).toEqual([['pend/a', 5]]);
      expect(await inTxn(store, (txn) => txn.subscriptions.pendingLinks(sub.key, 0))).toEqual([]);

      // Appends earlier in the same batch count (SQLite's rows lag their appends; PostgreSQL's batch holds them).
      const [pending, first] = await inBatch(store, [(txn) => txn.subscriptions.pendingLinks(sub.key, 10), (txn) => txn.subscriptions.pendingLinks(sub.key, 1)], [
        append(store, 'pend/c', 'xyz'),
        append(store, 'pend/b', 'q'),
      ]);
      expect(shown(pending as never)).toEqual([['pend/a', 5], ['pend/b', 3], ['pend/c', 3]]);
      expect(shown(first as never)).toEqual([['pend/a', 5]]);

      // The step's own changes count: an ack moves a cursor, a dropped link leaves.
      const [afterAck] = await inBatch(store, [
        (txn) => {
          txn.subscriptions.putLink(link(sub, 'pend/a', 5));
          txn.subscriptions.dropLink(sub.key, 'v1/pend/c');
          return txn.subscriptions.pendingLinks(sub.key, 10);
        },
      ]);
      expect(shown(afterAck as never)).toEqual([['pend/b', 3]]);
      expect(shown(await inTxn(store, (txn) => txn.subscriptions.pendingLinks(sub.key, 10)))).toEqual([['pend/b', 3]]);
      // And a new link of the step, and an earlier step's, in one batch.
      await stream(store, 'pend/e', 4);
      const [, both] = await inBatch(store, [
        (txn) => txn.subscriptions.putLink(link(sub, 'pend/e', 1)),
        (txn) => {
          txn.subscriptions.putLink(link(sub, 'pend/0', 0));
          return [txn.subscriptions.pendingLinks(sub.key, 10), txn.subscriptions.countLinks(sub.key)];
        },
      ]);
      expect(shown((both as never)[0])).toEqual([['pend/b', 3], ['pend/e', 4]]);
      expect((both as never)[1]).toBe(5);
    });

    it('drops every link of a deleted stream, and indexes links by stream', async () => {
      const [s1, s2] = [subscription('idx-1'), subscription('idx-2')];
      await inTxn(store, (txn) => {
        txn.subscriptions.putSubscription(s1);
        txn.subscriptions.putSubscription(s2);
        for (const path of ['idx/x', 'idx/y']) for (const s of [s1, s2]) txn.subscriptions.putLink(link(s, path));
        txn.subscriptions.putLink(link(s2, 'idx/z'));
      });
      const index = async () => (await allLinkIndex(store)).filter((e) => e.subKey.startsWith('v1/idx-'));
      expect(await index()).toEqual([
        { stream: 'v1/idx/x', subKey: s1.key },
        { stream: 'v1/idx/x', subKey: s2.key },
        { stream: 'v1/idx/y', subKey: s1.key },
        { stream: 'v1/idx/y', subKey: s2.key },
        { stream: 'v1/idx/z', subKey: s2.key },
      ]);
      const [counts] = await inBatch(store, [
        (txn) => {
          txn.subscriptions.dropStreamLinks('v1/idx/x');
          return [txn.subscriptions.countLinks(s1.key), txn.subscriptions.countLinks(s2.key), txn.subscriptions.getLink(s2.key, 'v1/idx/x')];
        },
      ]);
      expect(counts).toEqual([1, 2, undefined]);
      expect(await index()).toEqual([
        { stream: 'v1/idx/y', subKey: s1.key },
        { stream: 'v1/idx/y', subKey: s2.key },
        { stream: 'v1/idx/z', subKey: s2.key },
      ]);
      // Linked again after the drop, in the same step: the new link stays.
      await inTxn(store, (txn) => {
        txn.subscriptions.dropStreamLinks('v1/idx/y');
        txn.subscriptions.putLink(link(s1, 'idx/y', 7));
      });
      expect(await inTxn(store, (txn) => [txn.subscriptions.getLink(s1.key, 'v1/idx/y'), txn.subscriptions.getLink(s2.key, 'v1/idx/y')])).toEqual([link(s1, 'idx/y', 7), undefined]);
    });

    it('finds undeleted streams by key prefix, in key order, at most `limit`', async () => {
      for (const path of ['pre/b', 'pre/a/1', 'pre/a/2', 'prefix', 'pre/c']) await stream(store, path, path.length);
      const gone = await stream(store, 'pre/gone');
      await store.run('createStream', createRequest(v1StreamKey('other/fork'), { fork: { sourceName: gone, offset: null, subOffset: 0 } }));
      await store.run('deleteStream', { name: gone, incarnation: null });
      await store.run('deleteStream', { name: v1StreamKey('pre/c'), incarnation: null });
      const [all, two, nested] = await inBatch(store, [
        (txn) => txn.subscriptions.streamsByPrefix('v1/pre/', 100),
        (txn) => txn.subscriptions.streamsByPrefix('v1/pre/', 2),
        (txn) => txn.subscriptions.streamsByPrefix('v1/pre/a/', 100),
      ]);
      const expected = [
        { name: 'v1/pre/a/1', tail: 7 },
        { name: 'v1/pre/a/2', tail: 7 },
        { name: 'v1/pre/b', tail: 5 },
      ];
      expect(all).toEqual(expected);
      expect(two).toEqual(expected.slice(0, 2));
      expect(nested).toEqual(expected.slice(0, 2));
      // A stream created and appended to earlier in the same batch is found at its tail.
      const [found] = await inBatch(store, [(txn) => txn.subscriptions.streamsByPrefix('v1/pre/', 100)], [
        () => store.run('createStream', createRequest(v1StreamKey('pre/new'), { data: Buffer.from('ab') })),
        append(store, 'pre/b', '!!'),
      ]);
      expect(found).toEqual([...expected.slice(0, 2), { name: 'v1/pre/b', tail: 7 }, { name: 'v1/pre/new', tail: 2 }]);
    });

    it('answers due subscriptions: delivery or lease due, or idle with a pending link', async () => {
      await stream(store, 'due/s', 4);
      const idlePending = subscription('due-idle-pending');
      const idleCaughtUp = subscription('due-idle-done');
      const awaitingClaim = subscription('due-awake-unclaimed', { wake: wake() });
      const leaseOver = subscription('due-lease', { wake: wake({ holder: 'w', leaseExpiresAtMs: T0 + 1_000 }) });
      const retryLater = subscription('due-retry', {
        wake: wake({ holder: 'w', leaseExpiresAtMs: T0, delivery: { attempts: 2, nextAttemptAtMs: T0 + 2_000, lastError: '503' } }),
      });
      await inTxn(store, (txn) => {
        for (const s of [idlePending, idleCaughtUp, awaitingClaim, leaseOver, retryLater]) {
          txn.subscriptions.putSubscription(s);
          txn.subscriptions.putLink(link(s, 'due/s', s === idleCaughtUp ? 4 : 0));
        }
      });
      const due = async (nowMs: number) => (await store.dueSubscriptions(nowMs, 100)).filter((k) => k.startsWith('v1/due-'));
      expect(await due(T0)).toEqual([idlePending.key]);
      expect(await due(T0 + 1_000)).toEqual([idlePending.key, leaseOver.key]);
      expect(await due(T0 + 2_000)).toEqual([idlePending.key, leaseOver.key, retryLater.key]);
      // Idle and caught up becomes due once its stream grows.
      await store.run('append', { name: v1StreamKey('due/s'), request: appendRequest('z') });
      expect(await due(T0)).toEqual([idleCaughtUp.key, idlePending.key]);
      expect((await store.dueSubscriptions(T0 + 2_000, 2)).length).toBe(2);
    });

    it('compares and sets meta values, refusing a wrong expectation', async () => {
      expect(await store.getMeta('test.key')).toBeUndefined();
      expect(await store.compareAndSetMeta('test.key', 'nope', 'a')).toBe(false);
      expect(await store.compareAndSetMeta('test.key', undefined, 'a')).toBe(true);
      expect(await store.compareAndSetMeta('test.key', undefined, 'b')).toBe(false);
      expect(await store.compareAndSetMeta('test.key', 'b', 'c')).toBe(false);
      expect(await store.getMeta('test.key')).toBe('a');
      expect(await store.compareAndSetMeta('test.key', 'a', 'b')).toBe(true);
      expect(await store.getMeta('test.key')).toBe('b');
      // Of two setting an absent key at once, one wins.
      const raced = await Promise.all([store.compareAndSetMeta('test.race', undefined, '1'), store.compareAndSetMeta('test.race', undefined, '2')]);
      expect(raced.filter(Boolean)).toHaveLength(1);
      expect(await store.getMeta('test.race')).toBe(raced[0] ? '1' : '2');
    });

    it('keeps subscriptions, links and meta across a reopen', async () => {
      const sub = subscription('kept', { generation: 3, wake: wake({ delivery: { attempts: 1, nextAttemptAtMs: T0 + 9, lastError: null } }) });
      await stream(store, 'kept/s', 6);
      await inTxn(store, (txn) => {
        txn.subscriptions.putSubscription(sub);
        txn.subscriptions.putLink(link(sub, 'kept/s', 2, { glob: true }));
      });
      await store.compareAndSetMeta('test.kept', undefined, 'secret');
      store = await engine.reopen(store, clock);
      expect(await store.getSubscription(sub.key)).toEqual(sub);
      expect(shown(await store.subscriptionLinks(sub.key, null, 10))).toEqual([['kept/s', 6]]);
      expect((await store.subscriptionLinks(sub.key, null, 10))[0]!.link).toEqual(link(sub, 'kept/s', 2, { glob: true }));
      expect(await store.dueSubscriptions(T0 + 9, 1000)).toContain(sub.key);
      expect(await store.getMeta('test.kept')).toBe('secret');
      expect((await mustGet(store, v1StreamKey('kept/s'))).tail).toBe(6);
    });
  });
}

async function allLinkIndex(store: Store): Promise<Array<{ stream: string; subKey: string }>> {
  const out: Array<{ stream: string; subKey: string }> = [];
  // Pages of 2, so that paging by (stream, subscription) is exercised.
  for (let page = await store.linkIndex(null, 2); page.length > 0; page = await store.linkIndex(page[page.length - 1]!, 2)) out.push(...page);
  return out;
}

for (const engine of everyEngine()) subscriptionContract(engine);
