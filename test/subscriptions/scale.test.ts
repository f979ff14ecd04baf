/**
 * Scale: one pull-wake subscription over 10,000 streams matched by its pattern, with a
 * trickle of appends spread over them and a worker claiming and acknowledging them: the
 * worker is handed every one. What this costs the server (memory, CPU idle and under the
 * trickle, the time to link the streams) is measured by `npm run bench` (the
 * `subscriptions` workload, docs/performance.md), not here.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { pullWorker } from '../../bench/workloads/subscriptions.js';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';

const STREAMS = 10_000;
const APPENDS = 100;
const JSON_TYPE = { 'content-type': 'application/json' };

let server: RunningServer | null = null;

afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

async function inParallel(count: number, width: number, work: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < count) await work(next++);
    }),
  );
}

describe('subscriptions at scale', () => {
  it('a pull-wake subscription over 10,000 matched streams hands a trickle of appends spread over them to its worker, every one', async () => {
    server = await startServer({ args: ['--subscription-sweep', '500ms'] });
    const base = `${server.url}/v1/stream`;
    expect((await fetch(`${base}/scale-wake`, { method: 'PUT', headers: JSON_TYPE, body: '[]' })).status).toBe(201);
    await inParallel(STREAMS, 64, async (i) => {
      const res = await fetch(`${base}/scale/${i}`, { method: 'PUT', headers: JSON_TYPE, body: '[]' });
      expect(res.status).toBe(201);
    });
    const created = await fetch(`${base}/__ds/subscriptions/big`, {
      method: 'PUT',
      headers: JSON_TYPE,
      body: JSON.stringify({ type: 'pull-wake', pattern: 'scale/*', wake_stream: 'scale-wake', lease_ttl_ms: 5000 }),
    });
    expect(created.status).toBe(201);

    const appended = new Set<number>();
    const processed = new Set<number>();
    let appending = true;
    const worker = pullWorker(base, () => appending || processed.size < appended.size, (body) => {
      for (const m of JSON.parse(body) as Array<{ i: number }>) processed.add(m.i);
    });
    // One append at a time, each to a stream 7919 further on: most of them to streams no other append touches.
    for (let i = 0; i < APPENDS; i++) {
      const res = await fetch(`${base}/scale/${(i * 7919) % STREAMS}`, { method: 'POST', headers: JSON_TYPE, body: JSON.stringify({ i }) });
      expect(res.status).toBe(204);
      appended.add(i);
    }
    appending = false;
    await worker;
    expect([...processed].sort((a, b) => a - b)).toEqual([...appended]);
  }, 120_000);
});
