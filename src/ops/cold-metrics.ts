/**
 * The cold tier's metrics (storage/cold/), registered only for a store that has one: its
 * figures are plain numbers the tier keeps, read at each scrape.
 */
import { Gauge, type Registry } from 'prom-client';
import { mirrorCounter } from './mirror-counter.js';
import type { ColdTierStats, Store } from '../storage/store.js';

export function registerColdMetrics(registry: Registry, store: Store): void {
  const stats = (): ColdTierStats => store.coldStats!();
  const registers = [registry];
  const gauge = (name: string, help: string, value: (s: ColdTierStats) => number) =>
    new Gauge({
      name,
      help,
      registers,
      collect() {
        this.set(value(stats()));
      },
    });
  const counter = (name: string, help: string, value: (s: ColdTierStats) => number) => mirrorCounter(registers, name, help, () => value(stats()));
  gauge('rill_cold_bytes', 'Stream bytes held in object storage (the cold tier)', (s) => s.coldBytes);
  gauge('rill_hot_bytes', "Stream bytes held in the hot store, as the cold tier's last upload pass counted them", (s) => s.hotBytes);
  gauge('rill_cold_upload_lag_bytes', 'Sealed bytes still in the hot store, awaiting upload (past --cold-max-backlog writes are refused with 507)', (s) => s.uploadLagBytes);
  counter('rill_cold_uploads_total', 'Segments uploaded to object storage and trimmed from the hot store', (s) => s.uploads);
  counter('rill_cold_uploaded_bytes_total', 'Stream bytes moved to object storage', (s) => s.uploadedBytes);
  counter('rill_cold_upload_failures_total', 'Upload passes that failed (retried with backoff)', (s) => s.uploadFailures);
  counter('rill_cold_swept_objects_total', 'Objects of deleted or trimmed history removed from object storage', (s) => s.sweptObjects);
  counter('rill_cold_fetches_total', 'Objects fetched from object storage for reads', (s) => s.coldFetches);
  counter('rill_cold_fetch_seconds_total', 'Seconds the fetches of rill_cold_fetches_total took in all (their ratio is the mean cold-read latency)', (s) => s.coldFetchSeconds);
  counter('rill_cold_cache_hits_total', 'Cold segments a read found in the cache', (s) => s.cacheHits);
  counter('rill_cold_cache_misses_total', 'Cold segments a read had to fetch (or wait for a fetch under way)', (s) => s.cacheMisses);
}
