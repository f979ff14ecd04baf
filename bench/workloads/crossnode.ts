/**
 * Cross-node long-poll delivery on rill on PostgreSQL, two nodes: a long-poll reader waits
 * on the second node, an append is acknowledged by the first, and the latency is from the
 * append's send to the reader's answer: the commit notification's way between nodes, the
 * figure test/multinode/cluster.test.ts and postgres-kill.test.ts once bounded (median
 * under 250 ms, well under the 1 s re-check that would otherwise find the append).
 */
import { createStream } from '../http.js';
import type { Running } from '../targets.js';
import { liveReaders, percentileOf, until } from './probes.js';

export interface CrossNodeLatencies {
  p50Ms: number;
  p99Ms: number;
}

/** One append on node A and the answer of the long-poll waiting for it on node B; returns the next offset and the latency. */
async function oneDelivery(a: string, b: string, path: string, offset: string, n: number): Promise<{ next: string; ms: number }> {
  const poll = fetch(`${b}${path}?offset=${offset}&live=long-poll&timeout_ms=10000`).then(async (res) => {
    const answeredAt = performance.now();
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`cross-node long-poll: HTTP ${res.status}`);
    return { answeredAt, next: res.headers.get('stream-next-offset')! };
  });
  await until(async () => (await liveReaders(b, 'long_poll')) >= 1, 'the reader waiting on node B');
  const sentAt = performance.now();
  const ack = await fetch(`${a}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ n }) });
  await ack.arrayBuffer();
  if (ack.status !== 204) throw new Error(`append on node A: HTTP ${ack.status}`);
  const { answeredAt, next } = await poll;
  return { next, ms: answeredAt - sentAt };
}

/** `rounds` deliveries from `t`'s first node to its second, one after another. */
export async function runCrossNode(t: Running, rounds: number, stream: string): Promise<CrossNodeLatencies> {
  const [a, b] = t.urls;
  if (!a || !b) throw new Error(`${t.name} has one node: cross-node delivery needs two`);
  await createStream(a, stream, 'application/json');
  const path = `/v1/stream/${stream}`;
  let offset = (await fetch(`${a}${path}`, { method: 'HEAD' })).headers.get('stream-next-offset')!;
  const latencies: number[] = [];
  for (let n = 0; n < rounds; n++) {
    const delivery = await oneDelivery(a, b, path, offset, n);
    latencies.push(delivery.ms);
    offset = delivery.next;
  }
  return { p50Ms: percentileOf(latencies, 50), p99Ms: percentileOf(latencies, 99) };
}
