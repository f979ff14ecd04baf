/**
 * Live reads across nodes when a hint is missed: a reader on node B that read the stream,
 * then began to wait just after node A's commit hint had passed (the race every reader
 * can lose), must still be woken, by B's periodic check of the streams its readers wait
 * on. Two real PostgreSQL stores on one database; the hub is B's real LiveHub.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DEFAULT_PRODUCER_SETTINGS } from '../../src/core/types.js';
import { LiveHub } from '../../src/live/hub.js';
import { v1StreamKey } from '../../src/protocol/ids.js';
import { PostgresStore } from '../../src/storage/postgres/engine.js';
import { sharedDatabase } from '../helpers/postgres.js';
import { appendRequest, createRequest } from '../storage/fixtures.js';

const CHECK_MS = 200;
let a: PostgresStore;
let b: PostgresStore;
let hub: LiveHub;

beforeAll(async () => {
  const url = await sharedDatabase();
  [a, b] = await Promise.all([PostgresStore.open({ url, producers: DEFAULT_PRODUCER_SETTINGS }), PostgresStore.open({ url, producers: DEFAULT_PRODUCER_SETTINGS })]);
  hub = new LiveHub(b, 100, CHECK_MS);
});

afterAll(async () => {
  hub?.close();
  await Promise.all([a?.close(), b?.close()]);
});

it('a reader that starts waiting after the hint passed is woken by the check, not left to its timeout', async () => {
  const name = v1StreamKey('missed-hint');
  await a.run('createStream', createRequest(name));
  const seen = await b.getStream(name);
  expect(seen?.tail).toBe(0);
  let hinted = false;
  const stop = b.remote.onHint((names) => (hinted ||= names?.includes(name) ?? false));
  await a.run('append', { name, request: appendRequest('late') });
  await expect.poll(() => hinted, { timeout: 5_000 }).toBe(true);
  stop();
  // The reader read tail 0 and only now waits: the hint that would have woken it is gone.
  const started = Date.now();
  const result = await hub.wait(name, 10_000);
  const waitedMs = Date.now() - started;
  expect(result).toBe('changed');
  expect(waitedMs).toBeLessThan(CHECK_MS * 5);
  expect((await b.getStream(name))?.tail).toBe(4);
});

it('a commit on another node wakes a waiting reader through its hint, well before a check', async () => {
  const name = v1StreamKey('hinted-wake');
  await a.run('createStream', createRequest(name));
  // Let a check see the stream first, so that only the hint can wake the next wait.
  const first = hub.wait(name, 10_000);
  expect(await first).toBe('changed');
  const waiting = hub.wait(name, 10_000);
  const started = Date.now();
  await a.run('append', { name, request: appendRequest('x') });
  expect(await waiting).toBe('changed');
  expect(Date.now() - started).toBeLessThan(CHECK_MS);
});
