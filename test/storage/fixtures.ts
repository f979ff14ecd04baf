/**
 * Helpers for the storage contract suite: engines under test, an injectable clock,
 * request builders and a seeded random source. Expected values in the suite are
 * computed from the protocol (byte positions, message framing), never read back from
 * the engine under test.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import type { CreateOutcome, CreateRequest } from '../../src/core/create.js';
import type { SubscriptionState } from '../../src/core/subscription-types.js';
import { DEFAULT_PRODUCER_SETTINGS, type AppendOutcome, type AppendRequest, type Receipt, type StreamState } from '../../src/core/types.js';
import { MemoryStore } from '../../src/storage/memory/engine.js';
import { SqliteStore, type RecentIndexing } from '../../src/storage/sqlite/engine.js';
import type { Store } from '../../src/storage/store.js';
import { ThreadStore } from '../../src/storage/thread/host.js';
import { PostgresStore, type PostgresStoreOptions } from '../../src/storage/postgres/engine.js';
import { sharedDatabase } from '../helpers/postgres.js';
import { seededRandom as seededRng, testSeed } from '../helpers/seed.js';

/** A clock tests move by hand. */
export class TestClock {
  constructor(public nowMs = 1_700_000_000_000) {}
  readonly read = (): number => this.nowMs;
  advance(ms: number): number {
    this.nowMs += ms;
    return this.nowMs;
  }
}

export interface EngineUnderTest {
  name: string;
  /** Opens a fresh, empty store. */
  open(clock: TestClock): Store | Promise<Store>;
  /**
   * Closes `store` and opens it again on the same data, when the engine keeps data
   * across processes; engines that keep nothing answer the same store.
   */
  reopen(store: Store, clock: TestClock): Promise<Store>;
  /** Releases what `open` took (temp dirs). */
  cleanup(): void;
}

/** Engine settings the suite shrinks so that rare paths run in every test. */
export interface SqliteTuning {
  /** Appends sealed and indexed every few commits, a slice at a time. */
  recentIndexing?: RecentIndexing;
  /** A stream cache of a few entries: states are evicted and reloaded all the time. */
  streamCacheEntries?: number;
  /** On a thread of its own, as a server runs it (src/storage/thread/host.ts). */
  thread?: boolean;
}

function tuningName({ recentIndexing, streamCacheEntries, thread }: SqliteTuning): string {
  const parts: string[] = [];
  if (thread) parts.push('on its own thread');
  if (recentIndexing) parts.push(`appends indexed every ${recentIndexing.sealRows} rows or ${recentIndexing.sealBytes} bytes, ${recentIndexing.stepRows} at a time`);
  if (streamCacheEntries !== undefined) parts.push(`${streamCacheEntries} cached streams`);
  return parts.length === 0 ? 'sqlite' : `sqlite, ${parts.join(', ')}`;
}

/** SQLite as configured by default, or with some of its settings made tiny. */
export function sqliteEngine({ thread, ...tuning }: SqliteTuning = {}): EngineUnderTest {
  const dirs = new Map<Store, string>();
  const all: string[] = [];
  const openAt = async (dir: string, clock: TestClock): Promise<Store> => {
    const options = { dataDir: dir, producers: DEFAULT_PRODUCER_SETTINGS, nowMs: clock.read, ...tuning };
    const store = thread ? await ThreadStore.open(options) : new SqliteStore(options);
    dirs.set(store, dir);
    return store;
  };
  return {
    name: tuningName({ thread, ...tuning }),
    open(clock) {
      const dir = mkdtempSync(join(tmpdir(), 'rill-contract-'));
      all.push(dir);
      return openAt(dir, clock);
    },
    async reopen(store, clock) {
      const dir = dirs.get(store)!;
      await store.close();
      return openAt(dir, clock);
    },
    cleanup() {
      for (const dir of all.splice(0)) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * One store of `engine` for the enclosing describe block: opened before its tests, closed
 * (and its files removed) after them. Answers a getter, since the store opens later.
 */
export function storeForBlock(engine: EngineUnderTest, clock: TestClock): () => Store {
  let store: Store | undefined;
  beforeAll(async () => {
    store = await engine.open(clock);
  });
  afterAll(async () => {
    await store?.close();
    engine.cleanup();
  });
  return () => store!;
}

/**
 * Every engine, with SQLite twice: as configured by default, and with a tiny cache and
 * indexing, so that stream states come from rows and recent appends, not the cache.
 */
export function everyEngine(): EngineUnderTest[] {
  return [memoryEngine(), sqliteEngine(), sqliteEngine({ streamCacheEntries: 2, recentIndexing: { sealRows: 3, sealBytes: 40, stepRows: 2 } }), postgresEngine()];
}

export function memoryEngine(): EngineUnderTest {
  return {
    name: 'memory',
    open: (clock) => new MemoryStore({ producers: DEFAULT_PRODUCER_SETTINGS, nowMs: clock.read }),
    reopen: async (store) => store,
    cleanup() {},
  };
}

/**
 * PostgreSQL: one database of the run's shared server (test/helpers/postgres.ts), emptied
 * before each store opens on it; reopening closes the store and opens another node's on
 * the same database.
 */
export function postgresEngine(options: Partial<PostgresStoreOptions> = {}): EngineUnderTest {
  let url: Promise<string> | null = null;
  const cleaner = keptConnection();
  const open = async (clock: TestClock): Promise<Store> =>
    PostgresStore.open({ producers: DEFAULT_PRODUCER_SETTINGS, nowMs: clock.read, ...options, url: await (url ??= sharedDatabase()) });
  return {
    name: 'postgres',
    async open(clock) {
      const store = await open(clock);
      await emptyDatabaseOver(await cleaner(await url!));
      return store;
    },
    async reopen(store, clock) {
      await store.close();
      return open(clock);
    },
    cleanup() {},
  };
}

/** Deletes every row rill stored in the database (its schema stays). */
/**
 * A file's PostgreSQL nodes on the shared test database: `node()` opens one judging time by
 * `clock`; after each test every node is closed and the database emptied.
 */
export function usePostgresNodes(clock: TestClock): { node(): Promise<PostgresStore>; url(): string } {
  let url = '';
  const stores: PostgresStore[] = [];
  const cleaner = keptConnection();
  beforeAll(async () => {
    url = await sharedDatabase();
  });
  afterEach(async () => {
    for (const store of stores.splice(0)) await store.close();
    await emptyDatabaseOver(await cleaner(url));
  });
  afterAll(async () => {
    for (const store of stores.splice(0)) await store.close();
  });
  return {
    url: () => url,
    async node() {
      const store = await PostgresStore.open({ url, producers: DEFAULT_PRODUCER_SETTINGS, nowMs: clock.read });
      stores.push(store);
      return store;
    },
  };
}

/**
 * A connection for emptying the database between tests, opened at first use and kept until the
 * file's tests end: a connection per test cost a PostgreSQL backend and an authentication
 * (about 30 ms of CPU). The stores under test still connect on their own. Call at collection
 * (it registers an afterAll).
 */
export function keptConnection(): (url: string) => Promise<pg.Client> {
  let client: Promise<pg.Client> | null = null;
  afterAll(async () => {
    const kept = await client?.catch(() => null);
    client = null;
    await kept?.end();
  });
  return (url) =>
    (client ??= (async () => {
      const connection = new pg.Client(url);
      // A dropped connection fails the next emptying, loudly, instead of ending the worker.
      connection.on('error', () => {});
      await connection.connect();
      return connection;
    })());
}

export async function emptyDatabase(url: string): Promise<void> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    await emptyDatabaseOver(client);
  } finally {
    await client.end();
  }
}

/** emptyDatabase over a connection the caller keeps (a new one costs a backend and an authentication). */
export async function emptyDatabaseOver(client: pg.ClientBase): Promise<void> {
  await client.query('TRUNCATE streams, chunks, producers, snapshots, buckets, subscriptions, subscription_links');
  await client.query(`DELETE FROM rill_meta WHERE key <> 'schema_version'`);
}

/**
 * A pull-wake subscription `id` of `scope` as stored, created at `createdAtMs`, idle
 * unless `overrides` say otherwise.
 */
export function subscriptionState(id: string, createdAtMs: number, overrides: Partial<SubscriptionState> = {}, scope = 'v1'): SubscriptionState {
  return {
    key: `${scope}/${id}`,
    scope,
    id,
    incarnation: `inc-${id}`,
    config: { type: 'pull-wake', pattern: null, streams: [], webhookUrl: null, wakeStream: 'wakes', leaseTtlMs: 30_000, description: null },
    configHash: 'ab'.repeat(32),
    createdAtMs,
    generation: 0,
    wake: null,
    ...overrides,
  };
}

export const OCTET = 'application/octet-stream';
export const JSON_TYPE = 'application/json';

export function createRequest(name: string, overrides: Partial<CreateRequest> = {}): CreateRequest {
  return {
    name,
    bucket: null,
    contentType: OCTET,
    ttlSeconds: null,
    expiresAtMs: null,
    close: false,
    data: Buffer.alloc(0),
    streamSeq: null,
    incarnation: null,
    fork: null,
    ...overrides,
  };
}

export function appendRequest(data: Buffer | string, overrides: Partial<AppendRequest> = {}): AppendRequest {
  return {
    contentType: OCTET,
    data: typeof data === 'string' ? Buffer.from(data) : data,
    close: false,
    streamSeq: null,
    producer: null,
    bodyDigest: null,
    incarnation: null,
    recordMatch: null,
    ...overrides,
  };
}

export function expectCreated(outcome: CreateOutcome): StreamState {
  if (outcome.kind !== 'created') throw new Error(`expected created, got ${JSON.stringify(outcome)}`);
  return outcome.stream;
}

export function expectAppended(outcome: AppendOutcome): Receipt {
  if (outcome.kind !== 'appended') throw new Error(`expected appended, got ${JSON.stringify(outcome)}`);
  return outcome.receipt;
}

/** The error code of a refused outcome. */
export function refusal(outcome: { kind: string; error?: { code: string } }): string {
  expect(outcome.kind).toBe('rejected');
  return outcome.error!.code;
}

export async function mustGet(store: Store, name: string): Promise<StreamState> {
  const stream = await store.getStream(name);
  if (!stream) throw new Error(`stream ${name} is not stored`);
  return stream;
}

/** Reads a stream's whole visible history. */
export async function readAll(store: Store, name: string): Promise<Buffer> {
  const stream = await mustGet(store, name);
  return store.readRange(stream, 0, stream.tail + 1);
}

/**
 * Integers in [0, n) drawn from this file's seed (test/helpers/seed.ts: RILL_TEST_SEED, printed
 * when a test fails) and a stream number `k`, so that one use's draws do not shift another's.
 */
export function seededRandom(k: number): (n: number) => number {
  const rng = seededRng(testSeed() + k);
  return (n: number) => Math.floor(rng.next() * n);
}

export function randomBytes(random: (n: number) => number, length: number): Buffer {
  const out = Buffer.alloc(length);
  for (let i = 0; i < length; i++) out[i] = random(256);
  return out;
}

/** Appends with known positions, so expected chunk boundaries come from the test. */
export interface AppendLog {
  bytes: Buffer;
  /** [start, end) of each append. */
  spans: Array<{ start: number; data: Buffer }>;
}

export function spanContaining(log: AppendLog, position: number): { start: number; data: Buffer } | undefined {
  return log.spans.find((s) => s.start <= position && position < s.start + s.data.length);
}
