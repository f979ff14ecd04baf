/**
 * What a new producer's write needs to know of the stream's other producers (ProducerView's
 * `others`), computed over records in memory: the memory engine's whole table, or the
 * PostgreSQL batch's copy of a stream's producers when it loaded all of them.
 */
import { compareEvictionOrder } from '../core/producer.js';
import type { ProducerRecord, ProducerView } from '../core/types.js';

export function summarizeProducers(records: Iterable<ProducerRecord>, cutoffMs: number, excludeId: string): NonNullable<ProducerView['others']> {
  let liveCount = 0;
  let expiredMaxEpoch: number | null = null;
  let leastRecentLive: { id: string; epoch: number; lastSeenMs: number } | null = null;
  for (const p of records) {
    if (p.lastSeenMs <= cutoffMs) {
      expiredMaxEpoch = Math.max(expiredMaxEpoch ?? p.epoch, p.epoch);
    } else if (p.id !== excludeId) {
      liveCount++;
      if (!leastRecentLive || compareEvictionOrder(p, leastRecentLive) < 0) {
        leastRecentLive = { id: p.id, epoch: p.epoch, lastSeenMs: p.lastSeenMs };
      }
    }
  }
  return { liveCount, expiredMaxEpoch, leastRecentLive };
}
