/**
 * SSE and long-poll readers of one stream on a PostgreSQL node, woken by hints that bring them nothing
 * new: another node's commit they have read already, a hint seen twice, the periodic check
 * finding a stream for the first time. The node reads the stream once for all of them and
 * they keep waiting; each reader reading it again on its own made a thousand readers a
 * thousand queries per wake, and the node fell seconds behind the writes (issue 41). Real
 * server over HTTP, real PostgreSQL; the hints are sent as another node sends them.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { v1StreamKey } from '../../src/protocol/ids.js';
import { DEFAULT_SUBSCRIPTION_SETTINGS } from '../../src/http/settings.js';
import type { PostgresStore } from '../../src/storage/postgres/engine.js';
import { HINT_CHANNEL } from '../../src/storage/postgres/notify.js';
import { post, put } from '../helpers/http.js';
import { sharedDatabase } from '../helpers/postgres.js';
import { startServer, type RunningServer } from '../helpers/server.js';
import { sseBlocks } from '../helpers/sse.js';
import { until, untilLiveReaders } from '../helpers/waits.js';

const READERS = 20;
const HINTS = 5;
/**
 * Longer than the test: only the hints the test sends wake the readers, and no timer of the
 * server reads the database meanwhile (the subscription sweep's query counted as a read, one
 * run in three of the whole suite).
 */
const NEVER_CHECKED_MS = 3_600_000;
let url: string;
let server: RunningServer;

beforeAll(async () => {
  url = await sharedDatabase();
  server = await startServer({
    postgresUrl: url,
    settings: { remoteCheckMs: NEVER_CHECKED_MS, sweepIntervalMs: NEVER_CHECKED_MS, subscriptions: { ...DEFAULT_SUBSCRIPTION_SETTINGS, sweepIntervalMs: NEVER_CHECKED_MS } },
  });
});

afterAll(async () => {
  await server?.stop();
});

/** An SSE reader from the tail: resolves once it waits there, and collects the data events after. */
async function reader(streamUrl: string): Promise<{ data: string[]; next: () => Promise<void>; close: () => void }> {
  const controller = new AbortController();
  const res = await fetch(`${streamUrl}?offset=now&live=sse`, { signal: controller.signal });
  expect(res.status).toBe(200);
  const blocks = sseBlocks(res);
  const data: string[] = [];
  const next = async () => {
    for (;;) {
      const { value, done } = await blocks.next();
      if (done) throw new Error('the SSE response ended');
      if (value.startsWith('event: data')) data.push(value.slice(value.indexOf('data:', 6) + 5));
      if (value.startsWith('event: control')) return;
    }
  };
  await next();
  return { data, next, close: () => controller.abort() };
}

/** Sends the hints another node sends for a commit on `name`; resolves once the node has seen them all. */
async function hintFromAnotherNode(store: PostgresStore, name: string): Promise<void> {
  let hinted = 0;
  const stop = store.remote.onHint((names) => (hinted += names?.includes(v1StreamKey(name)) ? 1 : 0));
  const other = new pg.Client(url);
  await other.connect();
  try {
    for (let i = 0; i < HINTS; i++) await other.query('SELECT pg_notify($1, $2)', [HINT_CHANNEL, `another-node\n${v1StreamKey(name)}`]);
  } finally {
    await other.end();
  }
  await until(() => hinted === HINTS, 'the hints reaching the node');
  stop();
}

it("readers woken with nothing new keep waiting: the node reads the stream once per wake, not once per reader, and they take the next commit once", async () => {
  const name = 'woken-for-nothing';
  const streamUrl = `${server.url}/v1/stream/${name}`;
  expect((await put(streamUrl, '', { 'content-type': 'text/plain' })).status).toBe(201);
  // A reader's first control event is written in the same turn as it begins to wait.
  const readers = await Promise.all(Array.from({ length: READERS }, () => reader(streamUrl)));
  const store = server.store as PostgresStore;
  const readsBefore = store.stats.reads;
  await hintFromAnotherNode(store, name);
  // The commit is handed over after the hints' hand-overs (one at a time per stream), and a
  // reader woken by one of them would take it only after its own read.
  expect((await post(streamUrl, 'after', { 'content-type': 'text/plain' })).status).toBe(204);
  await Promise.all(readers.map((r) => r.next()));
  for (const r of readers) expect(r.data).toEqual(['after']);
  // Per hint, one load of the stream at most; the commit's hand-over, a load and a read.
  expect(store.stats.reads - readsBefore).toBeLessThanOrEqual(HINTS + 2);
  for (const r of readers) r.close();
});

it('long-polls woken with nothing new keep waiting, and those at one position share the read of the commit that answers them', async () => {
  const name = 'long-polls-woken-for-nothing';
  const streamUrl = `${server.url}/v1/stream/${name}`;
  expect((await put(streamUrl, 'first', { 'content-type': 'text/plain' })).status).toBe(201);
  const tail = (await fetch(streamUrl, { method: 'HEAD' })).headers.get('stream-next-offset')!;
  const polls = Array.from({ length: READERS }, () => fetch(`${streamUrl}?offset=${tail}&live=long-poll`));
  await untilLiveReaders(server.url, 'long_poll', READERS);
  const store = server.store as PostgresStore;
  const readsBefore = store.stats.reads;
  await hintFromAnotherNode(store, name);
  expect((await post(streamUrl, 'after', { 'content-type': 'text/plain' })).status).toBe(204);
  const answers = await Promise.all(polls);
  for (const answer of answers) {
    expect(answer.status).toBe(200);
    expect(await answer.text()).toBe('after');
  }
  // Per hint, one load of the stream at most; the commit's hand-over, a load and one read of
  // the window for all twenty (each reading the stream on every wake made 5 x 20 loads).
  expect(store.stats.reads - readsBefore).toBeLessThanOrEqual(HINTS + 2);
});
