/**
 * rill's Prometheus metrics, one registry per server (tests run several in a process).
 *
 * The hot paths add plain numbers: an append request adds to a map entry and observes one
 * histogram, a committed batch adds its totals once (not once per message). Counters with
 * labels are folded into prom-client only when `/metrics` is scraped, since prom-client's
 * labelled `inc` hashes its labels on every call. No label holds a stream name, and a
 * bucket name only in the usage counters, bounded by the usage record's cap: routes are
 * templates (`/{bucket}/{stream}`), so the series stay few whatever the load.
 */
import { registerColdMetrics } from './cold-metrics.js';
import { buildInfo } from './build-info.js';
import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import { mirrorCounter } from './mirror-counter.js';
import { NO_CACHE, type StorageObserver, type Store, type StreamCacheCounters } from '../storage/store.js';
import type { LiveReaders } from './live-readers.js';

/** Seconds; append and commit latencies of a healthy server sit in the low milliseconds. */
const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
/** Commands per committed batch (at most 1024, see batched.ts). */
const BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

/** What a scrape asks of the running server beyond its counters. */
/** The usage record's per-bucket totals (core/usage.ts's UsageTable), as a scrape reads them. */
interface UsageCounts {
  appends: number;
  bytesIn: number;
  bytesOut: number;
}

export interface UsageTotals {
  bucketTotals(): Map<string, UsageCounts>;
}

export interface MetricsSources {
  store: Store;
  live: LiveReaders;
  usage: UsageTotals;
}

/**
 * A counter per bucket read straight from the usage record at each scrape (its per-bucket
 * totals, core/usage.ts): the record already counts, so the request path adds nothing for
 * metrics. Its `bucket` values are the record's buckets, at most `--usage-max-keys`, and
 * `(other)` for buckets folded: bounded, whatever the load. Subjects are never labels.
 */
class UsageCounter {
  readonly type = 'counter';
  readonly aggregator = 'sum';

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly usage: UsageTotals,
    private readonly field: keyof UsageCounts,
    registry: Registry,
  ) {
    registry.registerMetric(this as never);
  }

  get() {
    const values = [];
    for (const [bucket, totals] of this.usage.bucketTotals()) values.push({ labels: { bucket }, value: totals[this.field] });
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}

/**
 * A histogram whose `observe` is a short loop over plain numbers, exposed through
 * prom-client's registry in the format of its own Histogram. prom-client's `observe`
 * hashes the (empty) label set and looks the series up on every call; this is on the
 * path of every append.
 */
class PlainHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly counts: number[];
  private sum = 0;
  private count = 0;

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly bounds: readonly number[],
    registry: Registry,
  ) {
    this.counts = bounds.map(() => 0);
    registry.registerMetric(this as never);
  }

  observe(value: number): void {
    const bounds = this.bounds;
    for (let i = 0; i < bounds.length; i++) if (value <= bounds[i]!) this.counts[i]!++;
    this.sum += value;
    this.count++;
  }

  get() {
    const values = this.bounds.map((le, i) => ({ labels: { le }, value: this.counts[i]!, metricName: `${this.name}_bucket` }));
    values.push({ labels: { le: '+Inf' as unknown as number }, value: this.count, metricName: `${this.name}_bucket` });
    return {
      name: this.name,
      help: this.help,
      type: this.type,
      aggregator: this.aggregator,
      values: [...values, { labels: {}, value: this.sum, metricName: `${this.name}_sum` }, { labels: {}, value: this.count, metricName: `${this.name}_count` }],
    };
  }
}

/** `POST 204`, made once per method and status: the same string object every time, so its hash is cached. */
const STATUS_KEYS = new Map<string, string[]>();
function statusKey(method: string, status: number): string {
  let keys = STATUS_KEYS.get(method);
  if (!keys) STATUS_KEYS.set(method, (keys = []));
  return (keys[status] ??= `${method} ${status}`);
}

export class RillMetrics implements StorageObserver {
  readonly registry = new Registry();
  /**
   * Requests since the last scrape, by route template, then method and status. Nested
   * maps of constant strings: a key built per request cost a string and its hash.
   */
  private readonly requestCounts = new Map<string, Map<string, number>>();
  private readonly appendSeconds: PlainHistogram;
  private readonly commitSeconds: PlainHistogram;
  private readonly fsyncWaitSeconds: PlainHistogram;
  private readonly batchCommands: PlainHistogram;
  private readonly appended = { bytes: 0, messages: 0 };
  private batchesRefused = 0;
  private readonly read = { bytes: 0, messages: 0 };
  private storageRefusals = 0;
  private subscriptionWakes = 0;
  private readonly webhookResults = { done: 0, accepted: 0, failed: 0 };

  constructor(private readonly sources: MetricsSources) {
    collectDefaultMetrics({ register: this.registry, prefix: 'rill_' });
    const histogram = (name: string, help: string, buckets: number[]) => new PlainHistogram(name, help, buckets, this.registry);
    this.appendSeconds = histogram('rill_append_duration_seconds', 'Time from an append request arriving to its answer being written (appends and append-batch)', LATENCY_BUCKETS);
    this.commitSeconds = histogram('rill_storage_commit_duration_seconds', 'Time a batch took to run and COMMIT', LATENCY_BUCKETS);
    this.fsyncWaitSeconds = histogram(
      'rill_storage_fsync_duration_seconds',
      'Time from a batch COMMIT to its being durable (the WAL fsync that covers it; 0 where COMMIT is durable, PostgreSQL)',
      LATENCY_BUCKETS,
    );
    this.batchCommands = histogram('rill_storage_batch_commands', 'Commands per committed batch', BATCH_BUCKETS);
    this.registerCounters();
    this.registerGauges();
    if (sources.store.coldStats) registerColdMetrics(this.registry, sources.store);
    const usage = (name: string, help: string, field: keyof UsageCounts) => new UsageCounter(name, help, sources.usage, field, this.registry);
    usage('rill_usage_appends_total', 'Messages appended on this node since it started, by bucket (the usage record; (other): buckets folded past --usage-max-keys)', 'appends');
    usage('rill_usage_bytes_in_total', 'Bytes stored by writes on this node since it started, by bucket (the usage record)', 'bytesIn');
    usage('rill_usage_bytes_out_total', 'Stream bytes served by reads (catch-up, long-poll, SSE, record reads) on this node since it started, by bucket (the usage record)', 'bytesOut');
  }

  /** A request ended (its answer written, or its connection closed). */
  request(route: string, method: string, status: number, seconds: number, isAppend: boolean): void {
    let byMethod = this.requestCounts.get(route);
    if (!byMethod) this.requestCounts.set(route, (byMethod = new Map()));
    const key = statusKey(method, status);
    byMethod.set(key, (byMethod.get(key) ?? 0) + 1);
    if (isAppend) this.appendSeconds.observe(seconds);
  }

  /** Bytes and messages a read answered (messages counted on JSON streams, which have boundaries). */
  readServed(bytes: number, messages: number): void {
    this.read.bytes += bytes;
    this.read.messages += messages;
  }

  /** A request was refused with 503 because the storage failed. */
  storageRefused(): void {
    this.storageRefusals++;
  }

  /** A subscription woke (a new generation: a webhook to deliver or a wake event appended). */
  subscriptionWoke(): void {
    this.subscriptionWakes++;
  }

  /** A webhook delivery attempt ended: the endpoint acked the wake (done), took it (accepted), or failed. */
  webhookDelivered(result: 'done' | 'accepted' | 'failed'): void {
    this.webhookResults[result]++;
  }

  // StorageObserver: called by BatchedStore once per batch.
  batchCommitted(commands: number, commitSeconds: number): void {
    this.batchCommands.observe(commands);
    this.commitSeconds.observe(commitSeconds);
  }

  batchDurable(waitSeconds: number, appendedBytes: number, appendedMessages: number): void {
    this.fsyncWaitSeconds.observe(waitSeconds);
    this.appended.bytes += appendedBytes;
    this.appended.messages += appendedMessages;
  }

  batchRefused(): void {
    this.batchesRefused++;
  }

  /** The Prometheus text exposition. */
  render(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  private registerCounters(): void {
    const registers = [this.registry];
    const counts = this.requestCounts;
    new Counter({
      name: 'rill_http_requests_total',
      help: 'HTTP requests answered, by route template, method and status',
      labelNames: ['route', 'method', 'status'],
      registers,
      collect() {
        for (const [route, byMethod] of counts) {
          for (const [key, n] of byMethod) {
            const [method, status] = key.split(' ') as [string, string];
            this.inc({ route, method, status }, n);
          }
          byMethod.clear();
        }
      },
    });
    const mirror = (name: string, help: string, value: () => number) => mirrorCounter(registers, name, help, value);
    mirror('rill_appended_bytes_total', 'Bytes appended and durable', () => this.appended.bytes);
    mirror('rill_appended_messages_total', 'Messages appended and durable (a JSON array counts its elements)', () => this.appended.messages);
    mirror('rill_read_bytes_total', 'Stream bytes answered to catch-up and long-poll reads (SSE not counted)', () => this.read.bytes);
    mirror('rill_read_messages_total', 'JSON messages answered to catch-up and long-poll reads (a byte stream has no message boundaries in a read)', () => this.read.messages);
    mirror('rill_storage_errors_total', 'Batches the storage failed to commit (every command of one answered 503)', () => this.batchesRefused);
    mirror('rill_storage_unavailable_responses_total', 'Requests answered 503 because the storage failed', () => this.storageRefusals);
    mirror('rill_stream_cache_hits_total', 'Stream states found in the stream cache (SQLite engine)', () => this.streamCache().hits);
    mirror('rill_stream_cache_misses_total', 'Stream states read from the database because the cache lacked them (SQLite engine)', () => this.streamCache().misses);
    mirror('rill_large_append_cache_hits_total', 'Reads of an append of 1 MiB or more answered from memory, not loaded from the database again (SQLite engine)', () => this.streamCache().largeAppendHits);
    mirror('rill_subscription_wakes_total', 'Subscription wakes this node started for new data (each a new generation; a webhook to deliver or a wake event appended)', () => this.subscriptionWakes);
    // The same for a record of plain numbers, one label value per field.
    const mirrorEach = <K extends string>(name: string, help: string, label: string, values: Record<K, number>) => {
      const reported = Object.fromEntries(Object.keys(values).map((k) => [k, 0])) as Record<K, number>;
      new Counter({
        name,
        help,
        labelNames: [label],
        registers,
        collect() {
          for (const key of Object.keys(values) as K[]) {
            this.inc({ [label]: key }, values[key] - reported[key]);
            reported[key] = values[key];
          }
        },
      });
    };
    mirrorEach(
      'rill_webhook_deliveries_total',
      'Webhook delivery attempts by result: done (acked by the answer), accepted (the endpoint will call back), failed (retried with backoff)',
      'result',
      this.webhookResults,
    );
    mirrorEach(
      'rill_live_readers_dropped_total',
      'Live readers whose connection closed before the server ended their answer (the client left, or the server cut a slow reader)',
      'kind',
      this.sources.live.dropped,
    );
  }

  /** The store's stream-cache counters; zeros for an engine without a cache. */
  private streamCache(): StreamCacheCounters {
    return this.sources.store.cacheCounters?.() ?? NO_CACHE;
  }

  private registerGauges(): void {
    const registers = [this.registry];
    const sources = this.sources;
    // What runs, the Prometheus way: a gauge of 1 whose labels are the facts.
    const { version, commit } = buildInfo();
    new Gauge({ name: 'rill_build_info', help: 'The version of rill running and the commit it was built from (always 1)', labelNames: ['version', 'commit'], registers }).set({ version, commit }, 1);
    new Gauge({
      name: 'rill_live_readers',
      help: 'Live readers held now (SSE connections, long-polls waiting)',
      labelNames: ['kind'],
      registers,
      collect() {
        const now = sources.live.held;
        this.set({ kind: 'sse' }, now.sse);
        this.set({ kind: 'long_poll' }, now.long_poll);
      },
    });
    const cache = () => this.streamCache();
    new Gauge({
      name: 'rill_stream_cache_entries',
      help: 'Stream states the stream cache holds now (SQLite engine)',
      registers,
      collect() {
        this.set(cache().entries);
      },
    });
    new Gauge({
      name: 'rill_stream_cache_bytes',
      help: 'Memory the stream cache holds now, estimated from each state (SQLite engine; bounded by --stream-cache-bytes)',
      registers,
      collect() {
        this.set(cache().bytes);
      },
    });
    new Gauge({
      name: 'rill_large_append_cache_bytes',
      help: 'Memory held by appends of 1 MiB or more kept for the reads that go on through them (SQLite engine; at most 64 MiB)',
      registers,
      collect() {
        this.set(cache().largeAppendBytes);
      },
    });
    // One query per scrape answers the three gauges below.
    let totals: ReturnType<Store['totals']> | null = null;
    const fresh = (pick: (t: Awaited<ReturnType<Store['totals']>>) => number) =>
      async function (this: Gauge) {
        totals ??= sources.store.totals().finally(() => setImmediate(() => (totals = null)));
        try {
          this.set(pick(await totals));
        } catch {
          // The storage is failing: the gauge keeps its last value and the scrape still answers.
        }
      };
    new Gauge({ name: 'rill_streams', help: 'Streams held (not deleted)', registers, collect: fresh((t) => t.streams) });
    new Gauge({ name: 'rill_buckets', help: 'Buckets held', registers, collect: fresh((t) => t.buckets) });
    new Gauge({ name: 'rill_producer_records', help: 'Producer records held', registers, collect: fresh((t) => t.producers) });
  }
}
