/** Server settings with their defaults. Every limit a client can reach is here. */
import { MAX_SNAPSHOT_BYTES } from '../core/snapshot.js';
import { NO_QUOTAS, type QuotaSettings } from '../auth/quota.js';
import type { VerifierOptions } from '../auth/verifier.js';
import { NO_BUCKET_LIMITS, type BucketLimits } from '../core/bucket.js';
import { DEFAULT_USAGE_MAX_KEYS } from '../core/usage.js';
import { DEFAULT_PRODUCER_SETTINGS, type ProducerSettings } from '../core/types.js';
import { DEFAULT_REMOTE_CHECK_MS } from '../live/remote.js';
import { POSTGRES_DEFAULTS } from '../storage/postgres/settings.js';
import { DEFAULT_STREAM_CACHE_BYTES, DEFAULT_STREAM_CACHE_ENTRIES } from '../storage/sqlite/defaults.js';
import { DEFAULT_CONSOLE_DIR } from './console.js';
import { DEFAULT_SUBSCRIPTION_LIMITS } from '../core/subscription-types.js';
import type { SubscriptionSettings } from '../subscriptions/service.js';

export type { SubscriptionSettings };

import { DEFAULT_COLD_SETTINGS, type ColdSettings } from '../storage/cold/settings.js';

export interface ServerSettings {
  host: string;
  port: number;
  dataDir: string;
  store: 'sqlite' | 'memory' | 'postgres';
  /** The PostgreSQL store's database; null unless `store` is 'postgres'. */
  postgresUrl: string | null;
  /** Connections a node opens to PostgreSQL for batches and reads. */
  postgresPoolSize: number;
  /** Longest a PostgreSQL statement may run before it is cancelled (the request answers 503). */
  postgresStatementTimeoutMs: number;
  /** Longest a request waits for a PostgreSQL connection before it is refused with 503. */
  postgresConnectTimeoutMs: number;
  /**
   * With a store shared by several nodes, how often the streams live readers wait on are
   * checked for commits whose notification this node missed.
   */
  remoteCheckMs: number;
  /** The cold tier's object store (`s3://bucket/prefix`); null: no cold tier (storage/cold/, docs/decisions.md). */
  coldStore: string | null;
  /** How the cold tier moves and reads history; read only with `coldStore`. */
  cold: ColdSettings;
  /**
   * Most stream states the SQLite engine keeps in memory; a write to a stream outside them
   * first reads its row.
   */
  streamCacheEntries: number;
  /** The memory those states may take, estimated (storage/sqlite/cache.ts `entryBytes`). */
  streamCacheBytes: number;
  /**
   * SQLite on a thread of its own (storage/thread/) instead of the event loop's: no read
   * or write holds requests, at the price of crossing threads for every call (docs/decisions.md).
   */
  sqliteThread: boolean;
  /** How long a long-poll waits for data before answering 204. */
  longPollTimeoutMs: number;
  /** Upper bound on the `timeout_ms` a client may ask for. */
  maxLongPollTimeoutMs: number;
  /** An SSE connection is closed after this long, so that clients reconnect through caches. */
  sseLifetimeMs: number;
  /**
   * Comment lines are sent on a quiet SSE connection this often, so proxies keep it
   * open; a reader that takes none of its pending output for this long is disconnected.
   */
  sseHeartbeatMs: number;
  /**
   * Most output waiting unsent for one SSE reader (a single larger message excepted):
   * past it the server stops reading the stream for that reader until it catches up.
   */
  sseMaxBufferedBytes: number;
  /**
   * Below this much free space on the data directory's filesystem, writes that add data
   * are refused with 507 INSUFFICIENT_STORAGE; deletes and retention still run (SQLite; 0 turns it off).
   */
  minFreeDiskBytes: number;
  /** Largest append or create body. */
  maxBodyBytes: number;
  /** Most messages one append (or create, or append-batch frame) may carry: a JSON array's elements. */
  maxAppendMessages: number;
  /**
   * Rows of the usage record (core/usage.ts) kept per node, one per bucket and token
   * subject: past it the least recently active is folded into `(other)`.
   */
  usageMaxKeys: number;
  /** Most streams and subscriptions one bucket holds (0: unlimited), every bucket alike. */
  bucketLimits: BucketLimits;
  /** Largest snapshot body. */
  maxSnapshotBytes: number;
  /** Default size of one read response. */
  readChunkBytes: number;
  /** Largest read response a client may ask for with `max_bytes`. */
  maxReadBytes: number;
  /** Long-poll and SSE connections held at once. */
  maxLiveConnections: number;
  /** Connections open at once, live readers included; past it a new one is answered 503 and closed. */
  maxConnections: number;
  maxHeaderBytes: number;
  maxUrlBytes: number;
  /** Time allowed to receive a request's headers (slow-header attacks). */
  headersTimeoutMs: number;
  /** Time allowed to receive a whole request. */
  requestTimeoutMs: number;
  /**
   * On shutdown, how long in-flight requests may take to finish before the connections
   * still open are cut (a client that stops reading must not hold the process).
   */
  drainTimeoutMs: number;
  /**
   * On shutdown, how long the server keeps serving everything while /readyz answers 503
   * "draining", before the drain begins: time for a load balancer to stop sending it work.
   */
  shutdownDelayMs: number;
  /** How often expired streams are collected. */
  sweepIntervalMs: number;
  producers: ProducerSettings;
  /** Access control; off (open to anyone who reaches the port) when it names no key file. */
  auth: AuthSettings;
  /** HTTPS: both files, or neither for plain HTTP. */
  tlsCertFile: string | null;
  tlsKeyFile: string | null;
  /** Oldest TLS version served. */
  tlsMinVersion: 'TLSv1.2' | 'TLSv1.3';
  /**
   * Origins whose pages may call rill from a browser (CORS); `*` allows any. Null: the
   * default, loopback pages only with auth off, any origin with auth on.
   */
  corsOrigins: string[] | null;
  /** Host names accepted besides loopback ones when listening on a loopback address. */
  allowedHosts: string[];
  /** The built web console served at /console/; null: not served (`--no-console`). */
  consoleDir: string | null;
  /** Whether metrics are kept and served (`/metrics`). */
  metrics: boolean;
  /** Serve `/metrics` on this address instead of the main one (so that it need not be public); null: on the main one. */
  metricsPort: number | null;
  metricsHost: string;
  /** Share of requests given an access-log line: 1 every one, 0 none; a 5xx is always logged. */
  accessLogRate: number;
  subscriptions: SubscriptionSettings;
  /**
   * The URL clients reach this server at (behind a proxy or load balancer), for the URLs
   * the server hands out: webhook callback and JWK Set URLs. Null: the address it listens on.
   */
  publicUrl: string | null;
}

export const DEFAULT_SUBSCRIPTION_SETTINGS: SubscriptionSettings = {
  limits: DEFAULT_SUBSCRIPTION_LIMITS,
  allowLocalhost: false,
  deliveryTimeoutMs: 10_000,
  maxConcurrentDeliveries: 64,
  sweepIntervalMs: 500,
  tokenTtlMs: 3_600_000,
};

export interface AuthSettings extends VerifierOptions {
  /** How often the revocations are re-read from the store, so that another node's apply here. */
  revocationsCheckMs: number;
  quotas: QuotaSettings;
}

export const AUTH_OFF: AuthSettings = {
  secretFile: null,
  jwksFile: null,
  jwksUrl: null,
  oidcIssuer: null,
  jwksCooldownMs: 30_000,
  jwksMaxAgeMs: 600_000,
  profile: 'default',
  issuer: null,
  audience: null,
  keysCheckMs: 1_000,
  maxTtlMs: 86_400_000,
  revocationsCheckMs: 1_000,
  quotas: NO_QUOTAS,
};

export function isAuthOn(auth: AuthSettings): boolean {
  return auth.secretFile !== null || auth.jwksFile !== null || auth.jwksUrl !== null || auth.oidcIssuer !== null;
}

export const DEFAULT_SETTINGS: ServerSettings = {
  host: '127.0.0.1',
  port: 4437,
  dataDir: './data',
  store: 'sqlite',
  postgresUrl: null,
  postgresPoolSize: POSTGRES_DEFAULTS.poolSize,
  postgresStatementTimeoutMs: POSTGRES_DEFAULTS.statementTimeoutMs,
  postgresConnectTimeoutMs: POSTGRES_DEFAULTS.connectTimeoutMs,
  remoteCheckMs: DEFAULT_REMOTE_CHECK_MS,
  coldStore: null,
  cold: DEFAULT_COLD_SETTINGS,
  streamCacheEntries: DEFAULT_STREAM_CACHE_ENTRIES,
  streamCacheBytes: DEFAULT_STREAM_CACHE_BYTES,
  sqliteThread: false,
  longPollTimeoutMs: 20_000,
  maxLongPollTimeoutMs: 60_000,
  sseLifetimeMs: 60_000,
  sseHeartbeatMs: 15_000,
  sseMaxBufferedBytes: 4 * 1024 * 1024,
  minFreeDiskBytes: 64 * 1024 * 1024,
  maxBodyBytes: 32 * 1024 * 1024,
  maxAppendMessages: 100_000,
  usageMaxKeys: DEFAULT_USAGE_MAX_KEYS,
  bucketLimits: NO_BUCKET_LIMITS,
  maxSnapshotBytes: MAX_SNAPSHOT_BYTES,
  readChunkBytes: 4 * 1024 * 1024,
  maxReadBytes: 8 * 1024 * 1024,
  maxLiveConnections: 10_000,
  maxConnections: 20_000,
  maxHeaderBytes: 16 * 1024,
  maxUrlBytes: 8 * 1024,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 120_000,
  drainTimeoutMs: 10_000,
  shutdownDelayMs: 0,
  sweepIntervalMs: 1_000,
  producers: DEFAULT_PRODUCER_SETTINGS,
  auth: AUTH_OFF,
  tlsCertFile: null,
  tlsKeyFile: null,
  tlsMinVersion: 'TLSv1.2',
  corsOrigins: null,
  allowedHosts: [],
  consoleDir: DEFAULT_CONSOLE_DIR,
  metrics: true,
  metricsPort: null,
  metricsHost: '127.0.0.1',
  accessLogRate: 1,
  subscriptions: DEFAULT_SUBSCRIPTION_SETTINGS,
  publicUrl: null,
};
