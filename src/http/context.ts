import type { Logger } from 'pino';
import type { LiveHub } from '../live/hub.js';
import type { RecordMarks } from '../live/records.js';
import type { AccessControl } from './access.js';
import type { BrowserPolicy } from './browsers.js';
import type { CreateGate } from './bucket-limits.js';
import type { BucketSettingsCache } from './bucket-settings.js';
import type { BucketBytes } from './bucket-bytes.js';
import type { LiveReaders } from '../ops/live-readers.js';
import type { UsageTable } from '../core/usage.js';
import type { RillMetrics } from '../ops/metrics.js';
import type { Store } from '../storage/store.js';
import type { SubscriptionService } from '../subscriptions/service.js';
import type { ReadinessSources } from './admin.js';
import type { ServerSettings } from './settings.js';

/** What every handler works with. */
export interface HandlerContext {
  store: Store;
  hub: LiveHub;
  settings: ServerSettings;
  log: Logger;
  /** Metrics, when kept (null with `--metrics off`). */
  metrics: RillMetrics | null;
  live: LiveReaders;
  /** The usage record of this node, per bucket and token subject (core/usage.ts). */
  usage: UsageTable;
  readiness: ReadinessSources;
  /** Wall clock; the only place the HTTP layer reads time. */
  now: () => number;
  access: AccessControl;
  browsers: BrowserPolicy;
  subscriptions: SubscriptionService;
  /** Places whose record ordinal reads have found (live/records.ts). */
  recordMarks: RecordMarks;
  /** Creates of one bucket, one at a time while a bucket limit is set (bucket-limits.ts). */
  creates: CreateGate;
  /** Each bucket's settings, briefly kept (bucket-settings.ts). */
  bucketSettings: BucketSettingsCache;
  /** Each limited bucket's retained bytes as this node counts them (bucket-bytes.ts). */
  bucketBytes: BucketBytes;
}
