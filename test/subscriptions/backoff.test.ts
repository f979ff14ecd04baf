/**
 * Webhook retries on a clock the test moves: exponential backoff from 1 s, doubling, capped
 * at 60 s, each delay within ±20 %; the schedule is stored, so a restarted server honours
 * it. The server runs in this process (real HTTP, real SQLite) so the test owns its clock,
 * and sees each sweep ask the store what is due at it.
 */
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRillServer, type RillServer } from '../../src/http/server.js';
import { DEFAULT_PRODUCER_SETTINGS } from '../../src/core/types.js';
import { DEFAULT_SUBSCRIPTION_SETTINGS } from '../../src/http/settings.js';
import { SqliteStore } from '../../src/storage/sqlite/engine.js';
import { get, put } from '../helpers/http.js';
import { removeDir, tempDataDir } from '../helpers/server.js';
import { until } from '../helpers/processing.js';
import { eventually, startReceiver, type Receiver } from '../helpers/webhooks.js';

const JSON_TYPE = { 'content-type': 'application/json' };
let clockMs = Date.parse('2026-12-02T12:00:00Z');
let dir: string;
let rill: RillServer;
let store: WatchedStore;
let receiver: Receiver;

/** The real SQLite store, which also notes the clock of every sweep that asked it what is due. */
class WatchedStore extends SqliteStore {
  readonly sweptAt: number[] = [];

  override async dueSubscriptions(nowMs: number, limit: number): Promise<string[]> {
    const due = await super.dueSubscriptions(nowMs, limit);
    this.sweptAt.push(nowMs);
    return due;
  }
}

async function start(): Promise<void> {
  const dataDir = join(dir, 'data');
  const now = () => clockMs;
  store = new WatchedStore({ producers: DEFAULT_PRODUCER_SETTINGS, nowMs: now, dataDir });
  rill = createRillServer({
    settings: {
      port: 0,
      dataDir,
      store: 'sqlite',
      drainTimeoutMs: 200,
      subscriptions: { ...DEFAULT_SUBSCRIPTION_SETTINGS, allowLocalhost: true, sweepIntervalMs: 20 },
    },
    store,
    logger: pino({ level: 'silent' }),
    now,
  });
  await rill.listen();
}

/** When the next attempt is due, once `attempts` failures are recorded. */
const nextAttemptMs = async (attempts: number): Promise<number> => {
  let delivery = { attempts: 0, next_attempt_at: '' };
  await eventually(async () => {
    const body = (await get(`${rill.url()}/v1/stream/__ds/subscriptions/retry`)).json as { wake: { delivery: typeof delivery } };
    delivery = body.wake.delivery;
    return delivery.attempts === attempts;
  }, 3_000, `failure ${attempts} to be recorded`);
  return Date.parse(delivery.next_attempt_at);
};

/**
 * Waits until two sweeps (every 20 ms of real time) have looked at the clock as it is now:
 * sweeps never overlap, so the first has done all it does by the time the second asks.
 */
const sweeps = () => {
  const at = clockMs;
  return until(() => store.sweptAt.filter((swept) => swept === at).length >= 2, `two sweeps at ${new Date(at).toISOString()}`);
};

beforeAll(async () => {
  dir = tempDataDir('rill-backoff-');
  receiver = await startReceiver();
  receiver.answer({ status: 500 });
  await start();
});

afterAll(async () => {
  await rill?.close();
  await receiver?.close();
  if (dir) removeDir(dir);
});

describe('webhook retries', () => {
  it('back off 1 s, 2 s, 4 s … up to 60 s with ±20 % jitter, and a restart keeps the schedule', async () => {
    await put(`${rill.url()}/v1/stream/__ds/subscriptions/retry`, JSON.stringify({ type: 'webhook', pattern: 'r/*', webhook: { url: receiver.url } }), JSON_TYPE);
    await put(`${rill.url()}/v1/stream/r/s`, '[1]', JSON_TYPE);
    await receiver.next(1);
    for (let attempt = 1; attempt <= 8; attempt++) {
      const failedAtMs = clockMs;
      const due = await nextAttemptMs(attempt);
      const base = Math.min(1000 * 2 ** (attempt - 1), 60_000);
      expect(due - failedAtMs, `delay after attempt ${attempt}`).toBeGreaterThanOrEqual(base * 0.8);
      expect(due - failedAtMs, `delay after attempt ${attempt}`).toBeLessThanOrEqual(base * 1.2);
      clockMs = due - 1;
      await sweeps();
      expect(receiver.deliveries.length, `no attempt before it is due (attempt ${attempt + 1})`).toBe(attempt);
      // Nor one under way: an attempt begun would have moved the schedule on.
      expect(await nextAttemptMs(attempt)).toBe(due);
      if (attempt === 4) {
        // Restart just before the next attempt is due: the stored schedule still holds.
        await rill.close();
        await start();
        await sweeps();
        expect(receiver.deliveries.length).toBe(attempt);
        expect(await nextAttemptMs(attempt)).toBe(due);
      }
      clockMs = due;
      await receiver.next(attempt + 1, 3_000);
    }
    expect(new Set(receiver.deliveries.map((d) => d.body.wake_id)).size).toBe(1);
    receiver.answer({ status: 200, body: { done: true } });
    clockMs = (await nextAttemptMs(9)) + 1;
    await receiver.next(10, 3_000);
    const state = async () => (await get(`${rill.url()}/v1/stream/__ds/subscriptions/retry`)).json as { status: string; wake: unknown; streams: Array<{ has_pending: boolean }> };
    await eventually(async () => (await state()).wake === null, 2_000, 'the wake to end');
    expect(await state()).toMatchObject({ status: 'active', wake: null, streams: [{ has_pending: false }] });
  });
});
