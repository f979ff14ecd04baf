/**
 * The one place that chooses and constructs a storage engine: the server and the CLI name
 * an engine in their settings and get a `Store`, without knowing the engines' classes.
 */
import type { ProducerSettings } from '../core/types.js';
import type { ColdSettings } from './cold/settings.js';
import { MemoryStore } from './memory/engine.js';
import { SqliteStore } from './sqlite/engine.js';
import type { Store } from './store.js';
import { ThreadStore } from './thread/host.js';

/** What opening an engine takes (the server's settings hold all of it). */
export interface StoreSettings {
  store: 'sqlite' | 'memory' | 'postgres';
  producers: ProducerSettings;
  /** SQLite */
  dataDir: string;
  streamCacheEntries: number;
  streamCacheBytes: number;
  minFreeDiskBytes: number;
  /** SQLite on a thread of its own (thread/host.ts) instead of the event loop's. */
  sqliteThread: boolean;
  /** PostgreSQL */
  postgresUrl: string | null;
  postgresPoolSize: number;
  postgresStatementTimeoutMs: number;
  postgresConnectTimeoutMs: number;
  /** The cold tier's object store (`s3://bucket/prefix`), or null for none. */
  coldStore: string | null;
  cold: ColdSettings;
}

export interface OpenHooks {
  /** The clock the store judges time by. */
  nowMs: () => number;
  /** SQLite: writes started being refused for want of disk space (full), or are accepted again. */
  onDiskSpace?: (full: boolean, freeBytes: number) => void;
  /** The cold tier's uploader failed a pass (it retries with backoff). */
  onColdError?: (error: unknown) => void;
  /** The variables the cold tier's object store reads (AWS_*); process.env when not given. */
  objectStoreEnv?: NodeJS.ProcessEnv;
}

/** Opens an engine whose opening takes no I/O wait (SQLite, memory); PostgreSQL needs openStore. */
export function openStoreNow(settings: StoreSettings, hooks: OpenHooks, checkpoints: 'inline' | 'thread' = 'inline'): Store {
  const options = { producers: settings.producers, nowMs: hooks.nowMs };
  if (settings.store === 'postgres') throw new Error('the postgres store opens asynchronously: use openStore');
  if (settings.coldStore !== null) throw new Error('a store with a cold tier opens asynchronously: use openStore');
  if (settings.store === 'memory') return new MemoryStore(options);
  return new SqliteStore({
    ...options,
    dataDir: settings.dataDir,
    streamCacheEntries: settings.streamCacheEntries,
    streamCacheBytes: settings.streamCacheBytes,
    minFreeDiskBytes: settings.minFreeDiskBytes,
    checkpoints,
    ...(hooks.onDiskSpace === undefined ? {} : { onDiskSpace: hooks.onDiskSpace }),
  });
}

/**
 * Opens any engine as a server runs it. SQLite runs on the event loop with its WAL
 * checkpoints on a thread (sqlite/checkpoints.ts), or wholly on a thread of its own
 * (thread/host.ts) when `sqliteThread` is set; PostgreSQL connects, migrates its schema and
 * listens for other nodes' commits.
 */
export async function openStore(settings: StoreSettings, hooks: OpenHooks): Promise<Store> {
  if (settings.coldStore !== null) return openTiered(settings, hooks);
  if (settings.store === 'sqlite' && !settings.sqliteThread) return openStoreNow(settings, hooks, 'thread');
  if (settings.store === 'sqlite') {
    return ThreadStore.open({
      producers: settings.producers,
      nowMs: hooks.nowMs,
      dataDir: settings.dataDir,
      streamCacheEntries: settings.streamCacheEntries,
      streamCacheBytes: settings.streamCacheBytes,
      minFreeDiskBytes: settings.minFreeDiskBytes,
      ...(hooks.onDiskSpace === undefined ? {} : { onDiskSpace: hooks.onDiskSpace }),
    });
  }
  if (settings.store !== 'postgres') return openStoreNow(settings, hooks);
  if (!settings.postgresUrl) throw new Error('the postgres store needs --postgres-url (or RILL_POSTGRES_URL)');
  // Loaded only here: a server on SQLite starts without pg and the PostgreSQL engine.
  const { PostgresStore } = await import('./postgres/engine.js');
  return PostgresStore.open({
    producers: settings.producers,
    nowMs: hooks.nowMs,
    url: settings.postgresUrl,
    poolSize: settings.postgresPoolSize,
    statementTimeoutMs: settings.postgresStatementTimeoutMs,
    connectTimeoutMs: settings.postgresConnectTimeoutMs,
  });
}

/**
 * SQLite (on the event loop) or PostgreSQL with a cold tier (storage/cold/). Loaded only
 * here, with the object store's SDK, so that a server without --cold-store loads neither.
 */
async function openTiered(settings: StoreSettings, hooks: OpenHooks): Promise<Store> {
  if (settings.store === 'memory' || (settings.store === 'sqlite' && settings.sqliteThread)) {
    throw new Error('--cold-store works with --store postgres, and with --store sqlite with --sqlite-thread off');
  }
  const [{ openS3ObjectStore }, { ColdTier, withColdTier }, { UPLOAD_BACKOFF_BASE_MS }] = await Promise.all([
    import('./cold/object-store.js'),
    import('./cold/tiered-store.js'),
    import('./cold/settings.js'),
  ]);
  const objects = await openS3ObjectStore(settings.coldStore!, hooks.objectStoreEnv);
  const c = settings.cold;
  const tierSettings = {
    window: { bytes: c.hotBytes, ageMs: c.hotAgeMs },
    segmentBytes: c.segmentBytes,
    intervalMs: c.uploadIntervalMs,
    backoffBaseMs: Math.min(UPLOAD_BACKOFF_BASE_MS, c.uploadRetryMaxMs),
    backoffMaxMs: c.uploadRetryMaxMs,
    // A command may need two segments at once in memory (cold-reads.ts, ColdSegmentNeeded).
    cacheBytes: Math.max(c.cacheBytes, 2 * c.segmentBytes),
    maxBacklogBytes: c.maxBacklogBytes,
  };
  const onError = hooks.onColdError ?? (() => undefined);
  if (settings.store === 'postgres') {
    const store = (await openStore({ ...settings, coldStore: null }, hooks)) as import('./postgres/engine.js').PostgresStore;
    const tier = new ColdTier(store.coldRows(), objects, tierSettings, hooks.nowMs, onError);
    store.setColdChunks({
      containing: (streamId, segments, position) => tier.reads.containingIn(streamId, segments, position),
      from: (streamId, segments, from, before) => tier.reads.fromIn(streamId, segments, from, before),
    });
    tier.uploader.start();
    return withColdTier(store, tier);
  }
  const store = openStoreNow({ ...settings, coldStore: null }, hooks, 'thread') as SqliteStore;
  const tier = new ColdTier(store.coldRows(), objects, tierSettings, hooks.nowMs, onError);
  store.setColdChunks({
    end: (streamId) => tier.host.coldEnd(streamId),
    containing: (streamId, position) => tier.reads.containingNow(streamId, position),
    from: (streamId, from, before) => tier.reads.fromNow(streamId, from, before),
  });
  tier.uploader.start();
  return withColdTier(store, tier);
}
