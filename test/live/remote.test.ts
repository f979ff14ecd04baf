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
/** Longer than any test here: a hub that checks this seldom is woken by hints alone. */
const NEVER_CHECKED_MS = 3_600_000;
/** A wait's timeout that only a bug reaches; its answer tells a wake ('changed') from none ('timeout'). */
const WAIT_MS = 10_000;
let a: PostgresStore;
let b: PostgresStore;
let hub: LiveHub;
let hintsOnly: LiveHub;

beforeAll(async () => {
  const url = await sharedDatabase();
  [a, b] = await Promise.all([PostgresStore.open({ url, producers: DEFAULT_PRODUCER_SETTINGS }), PostgresStore.open({ url, producers: DEFAULT_PRODUCER_SETTINGS })]);
  hub = new LiveHub(b, 100, CHECK_MS);
  hintsOnly = new LiveHub(b, 100, NEVER_CHECKED_MS);
});

afterAll(async () => {
  hub?.close();
  hintsOnly?.close();
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
  // The reader read tail 0 and only now waits: the hint that would have woken it is gone,
  // so 'changed' rather than 'timeout' is the check's doing.
  expect(await hub.wait(name, WAIT_MS)).toBe('changed');
  expect((await b.getStream(name))?.tail).toBe(4);
});

it('a commit on another node wakes a waiting reader through its hint', async () => {
  const name = v1StreamKey('hinted-wake');
  await a.run('createStream', createRequest(name));
  // This hub's first check is an hour away: only the hint can answer the wait before its timeout.
  const waiting = hintsOnly.wait(name, WAIT_MS);
  await a.run('append', { name, request: appendRequest('x') });
  expect(await waiting).toBe('changed');
});
