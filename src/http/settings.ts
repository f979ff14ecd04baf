/** Server settings with their defaults. Every limit a client can reach is here. */
import { MAX_SNAPSHOT_BYTES } from '../core/snapshot.js';
import { DEFAULT_PRODUCER_SETTINGS, type ProducerSettings } from '../core/types.js';
import { DEFAULT_REMOTE_CHECK_MS } from '../live/remote.js';
import { POSTGRES_DEFAULTS } from '../storage/postgres/engine.js';
import { DEFAULT_STREAM_CACHE_ENTRIES } from '../storage/sqlite/engine.js';

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
  /**
   * Stream states the SQLite engine keeps in memory (about 1.2 KB each); a write to a
   * stream outside them first reads its row.
   */
  streamCacheEntries: number;
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
  /** Largest append or create body. */
  maxBodyBytes: number;
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
  /** How often expired streams are collected. */
  sweepIntervalMs: number;
  producers: ProducerSettings;
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
  streamCacheEntries: DEFAULT_STREAM_CACHE_ENTRIES,
  longPollTimeoutMs: 20_000,
  maxLongPollTimeoutMs: 60_000,
  sseLifetimeMs: 60_000,
  sseHeartbeatMs: 15_000,
  sseMaxBufferedBytes: 4 * 1024 * 1024,
  maxBodyBytes: 32 * 1024 * 1024,
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
  sweepIntervalMs: 1_000,
  producers: DEFAULT_PRODUCER_SETTINGS,
};
