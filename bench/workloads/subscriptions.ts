/**
 * The subscriptions workload: one pull-wake subscription over many streams matched by its
 * pattern (10,000), a trickle of appends (20/s) spread over them and a worker claiming and
 * acknowledging them: what it costs rill (SQLite), the figures
 * test/subscriptions/scale.test.ts once bounded. The time to create the subscription (which
 * links every matched stream), the server's CPU share idle and under the trickle, and the
 * resident memory it gained from before the subscription to after the trickle.
 */
import { pooled, sleep } from '../http.js';
import type { Running } from '../targets.js';

export interface SubscriptionSpec {
  streams: number;
  idleS: number;
  trickleS: number;
  tricklePerS: number;
}

export interface SubscriptionFigures {
  linkMs: number;
  idleCpuShare: number;
  trickleCpuShare: number;
  rssGrowthBytes: number;
}

const JSON_HEADERS = { 'content-type': 'application/json' };

async function put(url: string, body: string): Promise<void> {
  const res = await fetch(url, { method: 'PUT', headers: JSON_HEADERS, body });
  await res.arrayBuffer();
  if (res.status !== 201) throw new Error(`PUT ${url}: HTTP ${res.status}`);
}

interface Wake {
  wake_id: string;
  generation: number;
  token: string;
  streams: Array<{ path: string; acked_offset: string; tail_offset: string }>;
}

/**
 * A pull-wake worker, as an application runs one: claims while there is work, reads each
 * stream it is handed from its acknowledged offset (the body to `onRead`) and acknowledges
 * to its tail, else waits on the wake stream (a long-poll, which its next wake ends); until
 * `goOn` says stop. test/subscriptions/scale.test.ts runs it too.
 */
export async function pullWorker(base: string, goOn: () => boolean, onRead: (body: string) => void = () => undefined): Promise<void> {
  let wakeOffset = (await fetch(`${base}/scale-wake`, { method: 'HEAD' })).headers.get('stream-next-offset')!;
  while (goOn()) {
    const claim = await fetch(`${base}/__ds/subscriptions/big/claim`, { method: 'POST', headers: JSON_HEADERS, body: '{"worker":"bench"}' });
    if (claim.status !== 200) {
      await claim.arrayBuffer();
      const waited = await fetch(`${base}/scale-wake?offset=${wakeOffset}&live=long-poll&timeout_ms=500`);
      wakeOffset = waited.headers.get('stream-next-offset') ?? wakeOffset;
      await waited.arrayBuffer();
      continue;
    }
    const wake = (await claim.json()) as Wake;
    for (const s of wake.streams) onRead(await (await fetch(`${base}/${s.path}?offset=${s.acked_offset}`)).text());
    const acks = wake.streams.map((s) => ({ stream: s.path, offset: s.tail_offset }));
    const body = JSON.stringify({ wake_id: wake.wake_id, generation: wake.generation, acks, done: true });
    const ack = await fetch(`${base}/__ds/subscriptions/big/ack`, { method: 'POST', headers: { ...JSON_HEADERS, authorization: `Bearer ${wake.token}` }, body });
    await ack.arrayBuffer();
    if (ack.status !== 200) throw new Error(`ack: HTTP ${ack.status}`);
  }
}

/** Appends `perS` a second for `seconds`, each to a stream 7919 further on. */
async function trickle(base: string, spec: SubscriptionSpec): Promise<void> {
  const count = Math.round(spec.tricklePerS * spec.trickleS);
  for (let i = 0; i < count; i++) {
    const res = await fetch(`${base}/scale/${(i * 7919) % spec.streams}`, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({ i }) });
    await res.arrayBuffer();
    if (res.status !== 204) throw new Error(`trickle append: HTTP ${res.status}`);
    await sleep(1000 / spec.tricklePerS);
  }
}

/** On `t`, a rill started with --subscription-sweep 500ms and no streams yet. */
export async function runSubscriptions(t: Running, spec: SubscriptionSpec): Promise<SubscriptionFigures> {
  const base = `${t.url}/v1/stream`;
  await put(`${base}/scale-wake`, '[]');
  await pooled(spec.streams, 64, (i) => put(`${base}/scale/${i}`, '[]'));
  const rssBefore = t.rssBytes();
  const linkStarted = performance.now();
  await put(`${base}/__ds/subscriptions/big`, JSON.stringify({ type: 'pull-wake', pattern: 'scale/*', wake_stream: 'scale-wake', lease_ttl_ms: 5000 }));
  const linkMs = performance.now() - linkStarted;
  const idleCpu = t.cpuSeconds();
  await sleep(spec.idleS * 1000);
  const idleCpuShare = (t.cpuSeconds() - idleCpu) / spec.idleS;
  const trickleCpu = t.cpuSeconds();
  const trickleStarted = performance.now();
  let trickling = true;
  const working = pullWorker(base, () => trickling);
  await trickle(base, spec);
  trickling = false;
  await working;
  const trickleCpuShare = (t.cpuSeconds() - trickleCpu) / ((performance.now() - trickleStarted) / 1000);
  return { linkMs, idleCpuShare, trickleCpuShare, rssGrowthBytes: t.rssBytes() - rssBefore };
}
