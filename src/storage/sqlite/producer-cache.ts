/**
 * Committed producer records of recently written streams, so that a producer's next
 * append finds its record in memory instead of querying SQLite for it (about a twentieth
 * of the busy time of producer appends). Every change the engine makes to a producer
 * record passes here (held-producers.ts holds those not yet in the table); a transaction that rolls back clears the whole cache, which is rare
 * and costs one query per producer to refill. Absent producers are not remembered: a new
 * producer is looked up once.
 */
import type { ProducerRecord } from '../../core/types.js';

export class ProducerCache {
  private readonly byStream = new Map<number, Map<string, ProducerRecord>>();
  private records = 0;

  constructor(private readonly maxRecords: number) {}

  get(streamId: number, producerId: string): ProducerRecord | undefined {
    return this.byStream.get(streamId)?.get(producerId);
  }

  /** A record read from the database or just written to it. */
  remember(streamId: number, record: ProducerRecord): void {
    let producers = this.byStream.get(streamId);
    if (!producers) {
      producers = new Map();
      this.byStream.set(streamId, producers);
    }
    if (!producers.has(record.id)) this.records++;
    producers.set(record.id, record);
    if (this.records > this.maxRecords) this.evictOldestStreams();
  }

  forget(streamId: number, producerIds: readonly string[]): void {
    const producers = this.byStream.get(streamId);
    if (!producers) return;
    for (const id of producerIds) if (producers.delete(id)) this.records--;
  }

  forgetSeenAtOrBefore(streamId: number, atOrBeforeMs: number): void {
    const producers = this.byStream.get(streamId);
    if (!producers) return;
    for (const [id, record] of producers) {
      if (record.lastSeenMs > atOrBeforeMs) continue;
      producers.delete(id);
      this.records--;
    }
  }

  forgetStream(streamId: number): void {
    this.records -= this.byStream.get(streamId)?.size ?? 0;
    this.byStream.delete(streamId);
  }

  clear(): void {
    this.byStream.clear();
    this.records = 0;
  }

  get size(): number {
    return this.records;
  }

  /** Drops the streams cached first until a tenth of the room is free again. */
  private evictOldestStreams(): void {
    const target = Math.floor(this.maxRecords * 0.9);
    for (const streamId of this.byStream.keys()) {
      if (this.records <= target) break;
      this.forgetStream(streamId);
    }
  }
}
