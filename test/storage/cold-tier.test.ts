/**
 * The cold tier on each engine that has one (SQLite, PostgreSQL), in this process, against
 * a real S3-compatible server (s3rver, test/helpers/s3.ts) and, for PostgreSQL, the real
 * server of the run (test/helpers/postgres.ts). Uploader passes are run by the tests, never
 * by the timer, so that what each pass finds is exact.
 *
 * On every engine, the crash between an upload and the hot store's trim, made exact: the
 * object store is the real one, wrapped so that the process "dies" right after the store
 * acknowledged a PUT and before the engine's transaction; the store is closed and opened
 * again as a restart would. Then: the bytes are still hot and read back once; the
 * restart's upload writes the same key with the same bytes (no second object), commits,
 * and everything reads back once, from the cold tier now, the tiers meeting exactly.
 *
 * On PostgreSQL, two nodes on one database and one bucket: only one uploads a given
 * segment; a node reads what the other moved (from offset 0, and a tail it follows), its
 * batches read anchors from the other's segments; and a read whose boundary and hot rows
 * were taken just before the other node moved those rows still answers every byte once.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_PRODUCER_SETTINGS } from '../../src/core/types.js';
import { checkColdTier, sqliteSegmentLines } from '../../src/storage/cold/check.js';
import { postgresSegmentLines } from '../../src/storage/postgres/cold-check.js';
import type { ColdHost } from '../../src/storage/cold/host.js';
import { openS3ObjectStore, type ObjectStore } from '../../src/storage/cold/object-store.js';
import { ColdTier, withColdTier, type TieredStore } from '../../src/storage/cold/tiered-store.js';
import { PostgresStore } from '../../src/storage/postgres/engine.js';
import { SqliteStore } from '../../src/storage/sqlite/engine.js';
import { v1StreamKey } from '../../src/protocol/ids.js';
import { sharedDatabase } from '../helpers/postgres.js';
import { seededRandom } from '../helpers/seed.js';
import { startTestS3, TEST_BUCKET, type TestS3 } from '../helpers/s3.js';
import { removeDir, tempDataDir } from '../helpers/server.js';
import { until } from '../helpers/waits.js';
import { appendRequest, createRequest } from './fixtures.js';

/** The backends holding an advisory lock on the test's database: a cold tier's upload lock. */
const ADVISORY_LOCK_HOLDERS = `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`;

const rng = seededRandom();
const SETTINGS = {
  window: { bytes: 8 * 1024, ageMs: 0 },
  segmentBytes: 8 * 1024,
  // Passes are run by the test, never by the timer.
  intervalMs: 3_600_000,
  backoffBaseMs: 3_600_000,
  backoffMaxMs: 3_600_000,
  cacheBytes: 1024 * 1024,
  maxBacklogBytes: 0,
};

type Engine = 'sqlite' | 'postgres';

let s3: TestS3;
const dirs: string[] = [];

beforeAll(async () => {
  s3 = await startTestS3();
});

afterAll(async () => {
  await s3.close();
  dirs.forEach(removeDir);
});

/** The real object store, with the process dying right after the store acknowledged a PUT. */
function dyingAfterPut(objects: ObjectStore): ObjectStore {
  return {
    ...objects,
    async put(key, body, sha256Hex) {
      await objects.put(key, body, sha256Hex);
      throw new Error(`the process died after the store acknowledged ${key}`);
    },
  };
}

interface Node {
  store: TieredStore;
  tier: ColdTier;
  errors: unknown[];
}

/** Where an engine keeps its data: a data directory (SQLite) or a database (PostgreSQL). */
async function newPlace(engine: Engine): Promise<string> {
  if (engine === 'postgres') return sharedDatabase();
  const dataDir = tempDataDir();
  dirs.push(dataDir);
  return dataDir;
}

/** The engine at `place` with a cold tier over `objects`, wired as `rill serve --cold-store` wires it (storage/open.ts); `wrap` may stand in front of its host. */
async function openNode(engine: Engine, place: string, objects: ObjectStore, wrap: (host: ColdHost) => ColdHost = (h) => h): Promise<Node> {
  const errors: unknown[] = [];
  const onError = (error: unknown) => errors.push(error);
  if (engine === 'sqlite') {
    const inner = new SqliteStore({ dataDir: place, producers: DEFAULT_PRODUCER_SETTINGS });
    const tier = new ColdTier(inner.coldRows(), objects, SETTINGS, Date.now, onError);
    inner.setColdChunks({
      end: (id) => tier.host.coldEnd(id),
      containing: (id, position) => tier.reads.containingNow(id, position),
      from: (id, from, before) => tier.reads.fromNow(id, from, before),
    });
    return { store: withColdTier(inner, tier), tier, errors };
  }
  const inner = await PostgresStore.open({ url: place, producers: DEFAULT_PRODUCER_SETTINGS });
  const tier = new ColdTier(wrap(inner.coldRows()), objects, SETTINGS, Date.now, onError);
  inner.setColdChunks({
    containing: (id, segments, position) => tier.reads.containingIn(id, segments, position),
    from: (id, segments, from, before) => tier.reads.fromIn(id, segments, from, before),
  });
  return { store: withColdTier(inner, tier), tier, errors };
}

async function readAll(store: TieredStore, name: string, from = 0): Promise<Buffer> {
  const stream = (await store.getStream(name))!;
  return store.readRange(stream, from, stream.tail - from);
}

/** About 180 KiB in 60 appends, from the file's seed. */
function someAppends(count = 60): Buffer[] {
  return Array.from({ length: count }, () => Buffer.alloc(rng.int(2000, 4000), rng.int(0, 255)));
}

/** The stream's segments follow one another from 0 and end where its hot rows begin: nothing held twice, nothing missing. */
async function expectTiersMeet(node: Node, name: string): Promise<void> {
  const stream = (await node.store.getStream(name))!;
  const segments = await node.tier.host.segments(stream.id, 0, stream.tail);
  let at = 0;
  for (const segment of segments) {
    expect(segment.start).toBe(at);
    at = segment.end;
  }
  const level = await node.tier.host.hotLevel(stream, 0, stream.tail);
  expect(level.coldEnd).toBe(at);
  if (at < stream.tail) expect(level.hot[0]?.start).toBe(at);
}

describe.each<Engine>(['sqlite', 'postgres'])('cold tier on %s', (engine) => {
  it('a crash between the upload and the trim loses nothing and holds nothing twice', async () => {
    const place = await newPlace(engine);
    const prefix = `crash-between-${engine}`;
    const objects = await openS3ObjectStore(`s3://${TEST_BUCKET}/${prefix}`, s3.env);
    const name = v1StreamKey('between');
    const appends = someAppends();
    const all = Buffer.concat(appends);

    const first = await openNode(engine, place, dyingAfterPut(objects));
    await first.store.run('createStream', createRequest(name));
    for (const data of appends) await first.store.run('append', { name, request: appendRequest(data) });
    await first.tier.uploader.pass();
    expect(first.errors).toHaveLength(1);
    const uploaded = [...s3.objectFiles().keys()].filter((k) => k.startsWith(`${prefix}/`));
    expect(uploaded).toHaveLength(1);
    // The object is in the store, but nothing names it: the bytes are hot, once.
    expect(first.tier.stats().coldBytes).toBe(0);
    expect((await readAll(first.store, name)).equals(all)).toBe(true);
    await first.store.close();

    const second = await openNode(engine, place, objects);
    await second.tier.uploader.pass();
    expect(second.errors).toEqual([]);
    const stats = second.tier.stats();
    expect(stats.uploads).toBeGreaterThan(0);
    expect(stats.coldBytes).toBeGreaterThan(0);
    // The same range was uploaded again to the same key, with the same bytes: one object for it.
    const after = [...s3.objectFiles().keys()].filter((k) => k.startsWith(`${prefix}/`));
    expect(after).toContain(uploaded[0]);
    expect(after).toHaveLength(stats.uploads);
    expect((await readAll(second.store, name)).equals(all)).toBe(true);
    await expectTiersMeet(second, name);
    await second.store.close();
    const lines = engine === 'sqlite' ? sqliteSegmentLines(`${place}/rill.db`) : await postgresSegmentLines(place);
    expect((await checkColdTier(lines, objects)).problems).toEqual([]);
    objects.close();
  });

  it('the uploader reaches every stream: past a page of streams with nothing to move', async () => {
    const place = await newPlace(engine);
    const objects = await openS3ObjectStore(`s3://${TEST_BUCKET}/paged-${engine}`, s3.env);
    const { store, tier, errors } = await openNode(engine, place, objects);
    // More than a page (500) of empty streams first, so that the one to move comes after them.
    await Promise.all(Array.from({ length: 520 }, (_, i) => store.run('createStream', createRequest(v1StreamKey(`empty-${i}`)))));
    const name = v1StreamKey('long');
    await store.run('createStream', createRequest(name));
    const appends = someAppends();
    for (const data of appends) await store.run('append', { name, request: appendRequest(data) });
    await tier.uploader.pass();
    expect(errors).toEqual([]);
    expect(tier.stats().uploads).toBeGreaterThan(0);
    expect((await readAll(store, name)).equals(Buffer.concat(appends))).toBe(true);
    await store.close();
    objects.close();
  });
});

describe('cold tier on PostgreSQL: two nodes on one database and one bucket', () => {
  /** The object store, counting the PUTs of each key. */
  function countingPuts(objects: ObjectStore, puts: Map<string, number>): ObjectStore {
    return {
      ...objects,
      async put(key, body, sha256Hex) {
        puts.set(key, (puts.get(key) ?? 0) + 1);
        await objects.put(key, body, sha256Hex);
      },
    };
  }

  it('one node uploads a given segment; the other reads across the boundary from offset 0 and at the tail it follows, and its batches read anchors from the segments', async () => {
    const url = await sharedDatabase();
    const prefix = 'two-nodes';
    const objects = await openS3ObjectStore(`s3://${TEST_BUCKET}/${prefix}`, s3.env);
    const puts = new Map<string, number>();
    const a = await openNode('postgres', url, countingPuts(objects, puts));
    const b = await openNode('postgres', url, countingPuts(objects, puts));
    const names = [v1StreamKey('two-a'), v1StreamKey('two-b')];
    for (const name of names) await a.store.run('createStream', createRequest(name));
    const written = new Map<string, Buffer[]>(names.map((n) => [n, []]));
    let followed = 0;
    let read = Buffer.alloc(0);
    for (let round = 0; round < 4; round++) {
      // Both nodes write, then both run a pass at once: one holds the upload lock.
      for (const [i, name] of names.entries()) {
        for (const data of someAppends(15)) {
          await (i === 0 ? a : b).store.run('append', { name, request: appendRequest(data) });
          written.get(name)!.push(data);
        }
      }
      await Promise.all([a.tier.uploader.pass(), b.tier.uploader.pass()]);
      // B follows stream 0 from where it last read, whichever node moved what it reads.
      const next = await readAll(b.store, names[0]!, followed);
      read = Buffer.concat([read, next]);
      followed += next.length;
    }
    // Passes until nothing is due, each time from both nodes at once.
    for (let guard = 0; guard < 20 && a.tier.stats().uploadLagBytes + b.tier.stats().uploadLagBytes >= 2 * SETTINGS.segmentBytes; guard++) {
      await Promise.all([a.tier.uploader.pass(), b.tier.uploader.pass()]);
    }
    expect([...a.errors, ...b.errors]).toEqual([]);
    expect(read.equals(Buffer.concat(written.get(names[0]!)!))).toBe(true);

    const segments = await a.tier.host.allSegments();
    const uploads = a.tier.stats().uploads + b.tier.stats().uploads;
    expect(segments.length).toBeGreaterThan(4);
    // Every segment was put once, by one node, and committed once: no object is orphaned or doubled.
    expect(uploads).toBe(segments.length);
    expect([...puts.values()].every((n) => n === 1)).toBe(true);
    expect([...puts.keys()].sort()).toEqual(segments.map((s) => s.key).sort());
    expect([...s3.objectFiles().keys()].filter((k) => k.startsWith(`${prefix}/`)).sort()).toEqual(segments.map((s) => s.key).sort());
    // B's cache is cold for what A moved: it fetched it.
    for (const name of names) {
      expect((await readAll(b.store, name)).equals(Buffer.concat(written.get(name)!))).toBe(true);
      expect((await readAll(a.store, name)).equals(Buffer.concat(written.get(name)!))).toBe(true);
      await expectTiersMeet(b, name);
    }
    expect(b.tier.stats().coldFetches).toBeGreaterThan(0);
    // Every node counts the same bytes as cold after its pass.
    expect(a.tier.stats().coldBytes).toBe(b.tier.stats().coldBytes);

    // A fork on a third node, whose cache holds nothing, at an offset deep in the cold range:
    // its batch needs the anchor's segment (ColdSegmentNeeded), which is fetched, and the command run again.
    const c = await openNode('postgres', url, objects);
    const source = (await c.store.getStream(names[1]!))!;
    const forkAt = segments.find((s) => s.streamId === source.id)!.end - 100;
    const fork = v1StreamKey('two-fork');
    const created = await c.store.run('createStream', createRequest(fork, { fork: { sourceName: names[1]!, offset: forkAt, subOffset: 0 } }));
    expect(created.kind, JSON.stringify(created)).toBe('created');
    expect(c.tier.stats().coldFetches).toBeGreaterThan(0);
    expect((await readAll(a.store, fork)).equals(Buffer.concat(written.get(names[1]!)!).subarray(0, forkAt))).toBe(true);
    await c.store.close();

    await a.store.close();
    await b.store.close();
    objects.close();
  });

  it('a read whose boundary and hot rows were taken just before the other node moved those rows answers every byte once', async () => {
    const url = await sharedDatabase();
    const objects = await openS3ObjectStore(`s3://${TEST_BUCKET}/moved-under-read`, s3.env);
    /** B's reads pause right after their boundary and hot rows came back, until `release`. */
    let paused: { reached: () => void; release: Promise<void> } | null = null;
    const pausing = (host: ColdHost): ColdHost =>
      new Proxy(host, {
        get(target, property) {
          const value = Reflect.get(target, property, target) as unknown;
          if (property !== 'hotLevel') return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
          return async (...args: Parameters<ColdHost['hotLevel']>) => {
            const level = await target.hotLevel(...args);
            const pause = paused;
            if (pause !== null) {
              pause.reached();
              await pause.release;
            }
            return level;
          };
        },
      });
    const a = await openNode('postgres', url, objects);
    const b = await openNode('postgres', url, objects, pausing);
    const name = v1StreamKey('moved-under-read');
    await a.store.run('createStream', createRequest(name));
    const appends = someAppends();
    for (const data of appends) await a.store.run('append', { name, request: appendRequest(data) });
    const all = Buffer.concat(appends);

    let reached!: () => void;
    let release!: () => void;
    const atPause = new Promise<void>((resolve) => (reached = resolve));
    paused = { reached, release: new Promise<void>((resolve) => (release = resolve)) };
    // B takes the boundary (nothing cold yet) and every row hot...
    const reading = readAll(b.store, name);
    await atPause;
    paused = null;
    // ...then A moves most of them to objects and deletes them from the hot table.
    await a.tier.uploader.pass();
    expect(a.tier.stats().coldBytes).toBeGreaterThan(all.length / 2);
    release();
    expect((await reading).equals(all)).toBe(true);

    // And the other way: B's boundary taken after A's upload reads the moved bytes from the segments.
    const more = someAppends();
    for (const data of more) await a.store.run('append', { name, request: appendRequest(data) });
    const whole = Buffer.concat([all, ...more]);
    const atSecondPause = new Promise<void>((resolve) => (reached = resolve));
    paused = { reached, release: new Promise<void>((resolve) => (release = resolve)) };
    const second = readAll(b.store, name);
    await atSecondPause;
    paused = null;
    await a.tier.uploader.pass();
    release();
    expect((await second).equals(whole)).toBe(true);
    expect((await readAll(b.store, name)).equals(whole)).toBe(true);
    expect([...a.errors, ...b.errors]).toEqual([]);
    await a.store.close();
    await b.store.close();
    objects.close();
  });

  it('while one node uploads, the other uploads nothing; when the uploading node\'s connection dies, the other takes over and nothing is held twice', async () => {
    const url = await sharedDatabase();
    const prefix = 'lock-handover';
    const objects = await openS3ObjectStore(`s3://${TEST_BUCKET}/${prefix}`, s3.env);
    /** A's PUTs wait, once the store acknowledged them, until `release`. */
    let reached!: () => void;
    let release!: () => void;
    const atPut = new Promise<void>((resolve) => (reached = resolve));
    const released = new Promise<void>((resolve) => (release = resolve));
    const stalling: ObjectStore = {
      ...objects,
      async put(key, body, sha256Hex) {
        await objects.put(key, body, sha256Hex);
        reached();
        await released;
      },
    };
    const a = await openNode('postgres', url, stalling);
    const b = await openNode('postgres', url, objects);
    const name = v1StreamKey('handover');
    await a.store.run('createStream', createRequest(name));
    const appends = someAppends();
    for (const data of appends) await a.store.run('append', { name, request: appendRequest(data) });
    const all = Buffer.concat(appends);

    const passOfA = a.tier.uploader.pass();
    await atPut;
    // A holds the upload lock mid-upload: B's pass counts the lag, and uploads nothing.
    await b.tier.uploader.pass();
    expect(b.tier.stats().uploads).toBe(0);
    expect(b.tier.stats().uploadLagBytes).toBeGreaterThan(0);
    // A's node dies as far as PostgreSQL knows: its lock connection ends, and the lock with it.
    const admin = new pg.Client(url);
    await admin.connect();
    const lockHolders = async () => (await admin.query<{ pid: number }>(ADVISORY_LOCK_HOLDERS)).rows;
    const holders = await lockHolders();
    expect(holders).toHaveLength(1);
    await admin.query('SELECT pg_terminate_backend($1)', [holders[0]!.pid]);
    // pg_terminate_backend only signals the backend; the lock is free once it has exited
    // (B's pass right after found it still held once, and uploaded nothing).
    await until(async () => (await lockHolders()).length === 0, "the upload lock of A's terminated connection released");
    await admin.end();
    await b.tier.uploader.pass();
    expect(b.tier.stats().uploads).toBeGreaterThan(0);
    // A goes on after its PUT: its segment's transaction cannot run without the lock, and fails.
    release();
    await passOfA;
    expect(a.tier.stats().uploads).toBe(0);
    expect(a.errors).toHaveLength(1);
    expect(String(a.errors[0])).toMatch(/upload lock|terminat|Connection/i);
    // A's object had B's key and bytes: no orphan, nothing held twice, every byte once.
    const segments = await b.tier.host.allSegments();
    expect([...s3.objectFiles().keys()].filter((k) => k.startsWith(`${prefix}/`)).sort()).toEqual(segments.map((s) => s.key).sort());
    for (const node of [a, b]) expect((await readAll(node.store, name)).equals(all)).toBe(true);
    await expectTiersMeet(b, name);
    // A's next pass takes the lock again on a new connection.
    for (const data of someAppends(10)) await a.store.run('append', { name, request: appendRequest(data) });
    await a.tier.uploader.pass();
    expect(a.tier.stats().uploads).toBeGreaterThan(0);
    await a.store.close();
    await b.store.close();
    objects.close();
  });
});
