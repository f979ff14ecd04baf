/**
 * Scale: one pull-wake subscription over 10,000 streams matched by its pattern, with a
 * trickle of appends spread over them and a worker claiming and acknowledging them: the
 * worker is handed every one. What this costs the server (memory, CPU idle and under the
 * trickle, the time to link the streams) is measured by `npm run bench` (the
 * `subscriptions` workload, docs/performance.md), not here.
 */
import { afterAll, describe, expect, it } from 'vitest';
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

interface Wake {
  wake_id: string;
  generation: number;
  token: string;
  streams: Array<{ path: string; acked_offset: string; tail_offset: string }>;
}

/**
 * As a pull-wake worker does: claims while there is work, reads each stream it is handed
 * from its acknowledged offset and acknowledges to its tail, else waits on the wake stream
 * (a long-poll, which its next wake ends). Stops once told to and nothing is left.
 */
async function work(base: string, processed: Set<number>, goOn: () => boolean): Promise<void> {
  let wakeOffset = (await fetch(`${base}/scale-wake`, { method: 'HEAD' })).headers.get('stream-next-offset')!;
  while (goOn()) {
    const claim = await fetch(`${base}/__ds/subscriptions/big/claim`, { method: 'POST', headers: JSON_TYPE, body: '{"worker":"scale"}' });
    if (claim.status !== 200) {
      await claim.arrayBuffer();
      const waited = await fetch(`${base}/scale-wake?offset=${wakeOffset}&live=long-poll&timeout_ms=500`);
      wakeOffset = waited.headers.get('stream-next-offset') ?? wakeOffset;
      await waited.arrayBuffer();
      continue;
    }
    const wake = (await claim.json()) as Wake;
    for (const s of wake.streams) {
      const read = await fetch(`${base}/${s.path}?offset=${s.acked_offset}`);
      for (const m of (await read.json()) as Array<{ i: number }>) processed.add(m.i);
    }
    const acks = wake.streams.map((s) => ({ stream: s.path, offset: s.tail_offset }));
    const ack = await fetch(`${base}/__ds/subscriptions/big/ack`, {
      method: 'POST',
      headers: { ...JSON_TYPE, authorization: `Bearer ${wake.token}` },
      body: JSON.stringify({ wake_id: wake.wake_id, generation: wake.generation, acks, done: true }),
    });
    expect(ack.status).toBe(200);
  }
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
    const worker = work(base, processed, () => appending || processed.size < appended.size);
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
