/**
 * Seed 000 (exactly-once writes) as a reference model, checked against the real engines.
 *
 * `SeedModel` (./seed-model.ts) is written from the seed text, not from src/core: it forgets idle
 * producers eagerly, keeps whole records in a Map and renders answers itself. Random
 * histories of several producers on two streams (epochs up and down, seqs in order,
 * repeated, ahead, digests matching, mismatching or absent, closes, Stream-Incarnation,
 * time jumps past the idle-evict and forget timings, a small producer limit, bursts that
 * land in one group commit, and restarts of the SQLite engine on the same directory) are
 * run against the model and an engine. The SQLite engine also restarts from crash images
 * (its files copied while it runs, as a power cut leaves them), with its held appends and
 * producer changes sealed every few appends or never, so that the producer changes a
 * crash leaves only in `recent_batches` are replayed, mid-seal and whole. Each SQLite
 * history starts from a copy of an empty store its engine made once (the same migrations made
 * its schema; only their cost per history is saved). Both must give the same status, error
 * code and headers for every write, and hold the same bytes at the end.
 *
 * The histories must reach every kind of answer of the seed. Some are rare (a write from the
 * epoch a claim just closed), so besides its random histories each engine runs one history
 * steered to each kind, which must reach it: no seed can miss one. Every history comes from the
 * file's seed (test/helpers/seed.ts): a failure prints it, and RILL_TEST_SEED replays it.
 */
import { copyFileSync, mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import type { AppendRequest } from '../../src/core/types.js';
import { appendAnswer } from '../../src/http/writes.js';
import { MemoryStore } from '../../src/storage/memory/engine.js';
import { SqliteStore } from '../../src/storage/sqlite/engine.js';
import { PostgresStore } from '../../src/storage/postgres/engine.js';
import { sharedDatabase } from '../helpers/postgres.js';
import { emptyDatabaseOver, keptConnection } from '../storage/fixtures.js';
import type { Store } from '../../src/storage/store.js';
import { testSeed } from '../helpers/seed.js';
import { MAX_NUMBER, STREAM_TYPE, OTHER_TYPE, SETTINGS, PRODUCER_IDS, STREAM_NAMES, hex, SeedModel, type Write, type Answer } from './seed-model.js';

// ---------------------------------------------------------------------------------------
// Random histories.
// ---------------------------------------------------------------------------------------

interface WriteSpec {
  stream: number;
  producer: number;
  epochMove: 'same' | 'up' | 'up2' | 'down' | 'zero' | 'max';
  seqMove: 'next' | 'newest' | 'older' | 'zero' | 'ahead' | 'max';
  pick: number;
  bodyMode: 'fresh' | 'same';
  digest: 'none' | 'match' | 'wrong';
  close: 'no' | 'with-append' | 'only';
  incarnation: 'none' | 'right' | 'wrong';
  wrongType: boolean;
}

type Action =
  | { kind: 'write'; spec: WriteSpec }
  | { kind: 'burst'; specs: WriteSpec[] }
  | { kind: 'zombie'; specs: [WriteSpec, WriteSpec] }
  | { kind: 'tick'; ms: number }
  | { kind: 'restart' };

const weighted = <T>(...pairs: Array<[T, number]>) => fc.oneof(...pairs.map(([v, weight]) => ({ arbitrary: fc.constant(v), weight })));

const writeSpec: fc.Arbitrary<WriteSpec> = fc.record({
  stream: fc.integer({ min: 0, max: STREAM_NAMES.length - 1 }),
  producer: fc.integer({ min: 0, max: PRODUCER_IDS.length - 1 }),
  epochMove: weighted<WriteSpec['epochMove']>(['same', 40], ['up', 6], ['up2', 3], ['down', 6], ['zero', 3], ['max', 1]),
  seqMove: weighted<WriteSpec['seqMove']>(['next', 12], ['newest', 3], ['older', 2], ['zero', 1], ['ahead', 2], ['max', 1]),
  pick: fc.nat({ max: 1_000 }),
  bodyMode: weighted<WriteSpec['bodyMode']>(['same', 2], ['fresh', 1]),
  digest: weighted<WriteSpec['digest']>(['none', 4], ['match', 5], ['wrong', 1]),
  close: weighted<WriteSpec['close']>(['no', 100], ['with-append', 1], ['only', 1]),
  incarnation: weighted<WriteSpec['incarnation']>(['none', 6], ['right', 6], ['wrong', 1]),
  wrongType: weighted([false, 20], [true, 1]),
});

/** The producer's next epoch claims (seq 0), then a write from the epoch it closed arrives. */
function zombie(spec: fc.Arbitrary<WriteSpec>): fc.Arbitrary<Action> {
  return fc.tuple(spec, spec).map(([claim, late]) => ({
    kind: 'zombie' as const,
    specs: [
      { ...claim, epochMove: 'up' as const, seqMove: 'zero' as const },
      { ...late, stream: claim.stream, producer: claim.producer, epochMove: 'down' as const, seqMove: 'next' as const },
    ] as [WriteSpec, WriteSpec],
  }));
}

const action: fc.Arbitrary<Action> = fc.oneof(
  { weight: 12, arbitrary: writeSpec.map((spec) => ({ kind: 'write' as const, spec })) },
  { weight: 2, arbitrary: fc.array(writeSpec, { minLength: 2, maxLength: 5 }).map((specs) => ({ kind: 'burst' as const, specs })) },
  // A zombie: the producer's next epoch claims, then a write from the epoch it closed arrives.
  // Random writes reach that fence rarely; the steered histories below make sure of it.
  { weight: 1, arbitrary: zombie(writeSpec) },
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 400 }).map((ms) => ({ kind: 'tick' as const, ms })) },
  { weight: 1, arbitrary: fc.integer({ min: 1_000, max: 1_600 }).map((ms) => ({ kind: 'tick' as const, ms })) },
  { weight: 1, arbitrary: fc.integer({ min: 4_000, max: 6_000 }).map((ms) => ({ kind: 'tick' as const, ms })) },
  // Exactly at, and just short of, the idle-evict and forget timings: the boundaries.
  {
    weight: 1,
    arbitrary: fc
      .constantFrom(SETTINGS.idleEvictMs - 1, SETTINGS.idleEvictMs, SETTINGS.forgetAfterMs - 1, SETTINGS.forgetAfterMs)
      .map((ms) => ({ kind: 'tick' as const, ms })),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'restart' as const }) },
);

/** What each client remembers of its own writes, and the bodies it sent per key. */
class Clients {
  private readonly lastSent = new Map<string, { epoch: number; seq: number }>();
  private readonly bodies = new Map<string, Buffer>();
  private counter = 0;

  /** Turns a relative spec into a concrete write, based on what the model holds now. */
  resolve(spec: WriteSpec, model: SeedModel): Write {
    const id = PRODUCER_IDS[spec.producer]!;
    const clientKey = `${spec.stream}/${id}`;
    const record = model.streams[spec.stream]!.producers.get(id);
    // A producer the stream does not know (new, forgotten or evicted) has applied nothing yet.
    const base = record ? { epoch: record.epoch, seq: record.seq } : { epoch: this.lastSent.get(clientKey)?.epoch ?? 0, seq: -1 };
    const epoch = moveEpoch(base.epoch, spec.epochMove);
    const seq = moveSeq(epoch === base.epoch ? base.seq : -1, spec);
    this.lastSent.set(clientKey, { epoch, seq });
    const body = this.body(`${clientKey}/${epoch}/${seq}`, spec);
    const digest = spec.digest === 'none' ? undefined : spec.digest === 'match' ? hex(body) : hex(Buffer.concat([body, Buffer.from('!')]));
    return {
      stream: spec.stream,
      producer: id,
      epoch,
      seq,
      body,
      digest,
      close: spec.close !== 'no',
      incarnation: spec.incarnation,
      contentType: spec.wrongType ? OTHER_TYPE : STREAM_TYPE,
    };
  }

  /** Like a real producer: told that its epoch expired, it claims one above the floor. */
  observe(w: Write, answer: Answer): void {
    if (answer.headers['producer-outcome'] !== 'producer-expired') return;
    const floor = Number(answer.headers['producer-epoch']);
    this.lastSent.set(`${w.stream}/${w.producer}`, { epoch: Math.min(MAX_NUMBER, floor + 1), seq: -1 });
  }

  private body(key: string, spec: WriteSpec): Buffer {
    if (spec.close === 'only') return Buffer.alloc(0);
    const previous = this.bodies.get(key);
    const body = spec.bodyMode === 'same' && previous ? previous : Buffer.from(`<${this.counter++}|${key}>`);
    this.bodies.set(key, body);
    return body;
  }
}

function moveEpoch(epoch: number, move: WriteSpec['epochMove']): number {
  switch (move) {
    case 'same':
      return epoch;
    case 'up':
      return Math.min(MAX_NUMBER, epoch + 1);
    case 'up2':
      return Math.min(MAX_NUMBER, epoch + 2);
    case 'down':
      return Math.max(0, epoch - 1);
    case 'zero':
      return 0;
    case 'max':
      return MAX_NUMBER;
  }
}

/** `last` is the highest seq of the epoch, or -1 when the epoch has none. */
function moveSeq(last: number, spec: WriteSpec): number {
  switch (spec.seqMove) {
    case 'next':
      return last + 1;
    case 'newest':
      return Math.max(0, last);
    case 'older':
      return last > 0 ? spec.pick % last : 0;
    case 'zero':
      return 0;
    case 'ahead':
      return last + 2 + (spec.pick % 3);
    case 'max':
      return MAX_NUMBER;
  }
}

// ---------------------------------------------------------------------------------------
// Running a history against an engine.
// ---------------------------------------------------------------------------------------

interface EngineKind {
  name: string;
  /** Opens the engine on `dir`, or on the storage of `lane` for an engine that keeps nothing there. */
  open(dir: string, lane: number, clock: () => number): Store | Promise<Store>;
  /** Empties the engine's storage once it is open, for engines that do not keep it in `dir`. */
  empty?(lane: number): Promise<void>;
  /** Histories to run; each costs round trips on a networked engine. */
  runs?: number;
  /** How many histories run at a time, each lane on storage of its own (1 unless given). */
  lanes?: number;
  restartable: boolean;
  /** Restarts from a copy of the running engine's files instead of after a clean close. */
  crashImages?: boolean;
  /**
   * Keeps its storage in `dir` (`STORE_FILES`): each history starts from a copy of an empty
   * store this engine made and closed once, rather than making the schema again.
   */
  filesInDir?: boolean;
}

/** Seals after every few appends, a change or two written per step. */
const TINY_SEALS = { sealRows: 3, sealBytes: 64, stepRows: 1 };
/** Never seals within a history: every producer change stays held until the restart. */
const NO_SEALS = { sealRows: 1e9, sealBytes: 1e12, stepRows: 1 };

/** PostgreSQL histories run four at a time, each lane on a database of its own. */
const POSTGRES_LANES = 4;

const ENGINES: EngineKind[] = [
  { name: 'memory', open: (_dir, _lane, clock) => new MemoryStore({ producers: SETTINGS, nowMs: clock }), restartable: false },
  { name: 'sqlite', open: (dir, _lane, clock) => new SqliteStore({ dataDir: dir, producers: SETTINGS, nowMs: clock }), restartable: true, filesInDir: true },
  {
    name: 'sqlite from crash images, tiny seals',
    open: (dir, _lane, clock) => new SqliteStore({ dataDir: dir, producers: SETTINGS, nowMs: clock, recentIndexing: TINY_SEALS }),
    restartable: true,
    crashImages: true,
    filesInDir: true,
  },
  {
    name: 'sqlite from crash images, no seals',
    open: (dir, _lane, clock) => new SqliteStore({ dataDir: dir, producers: SETTINGS, nowMs: clock, recentIndexing: NO_SEALS }),
    restartable: true,
    crashImages: true,
    filesInDir: true,
  },
  {
    name: 'postgres',
    open: async (_dir, lane, clock) => PostgresStore.open({ url: await laneDatabase(lane), producers: SETTINGS, nowMs: clock }),
    empty: async (lane) => emptyDatabaseOver(await laneCleaners[lane]!(await laneDatabase(lane))),
    // 120 histories (49 s at 200 here, one at a time): npm test stays near 12 minutes; RILL_MODEL_RUNS_POSTGRES runs more.
    runs: Number(process.env.RILL_MODEL_RUNS_POSTGRES ?? 120),
    // Its time is round trips: four histories at a time, each lane on a database of its own.
    lanes: POSTGRES_LANES,
    restartable: true,
  },
];

/** A database per lane on the shared server, made when the lane first opens. */
const laneDatabases = new Map<number, Promise<string>>();

function laneDatabase(lane: number): Promise<string> {
  if (!laneDatabases.has(lane)) laneDatabases.set(lane, sharedDatabase());
  return laneDatabases.get(lane)!;
}

/**
 * A connection per lane that empties its database before each history, kept for the whole
 * file (keptConnection): a connection per history cost a PostgreSQL backend and a SCRAM
 * exchange each (about 20 ms). The store of each history still connects on its own, as a
 * server does.
 */
// The random histories run on lanes 0 to POSTGRES_LANES - 1, the steered ones beside them on one more.
const laneCleaners = Array.from({ length: POSTGRES_LANES + 1 }, () => keptConnection());

/** tmpfs when there is one: this test checks rules and restarts, the crash tests check fsync. */
function scratchDir(): string {
  const base = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
  return mkdtempSync(join(base, 'rill-model-'));
}

/** The files of a SQLite store: the database and its WAL (a clean close leaves no WAL). */
const STORE_FILES = ['rill.db', 'rill.db-wal'];

function copyStoreFiles(from: string, to: string): void {
  for (const file of STORE_FILES) if (existsSync(join(from, file))) copyFileSync(join(from, file), join(to, file));
}

/**
 * An empty store per engine, opened by the engine (so made by its own migrations) and closed
 * cleanly, once: opening a copy is a restart of a store with no streams, as opening a new
 * directory is, without creating and altering every table again for each of the histories.
 */
const emptyStores = new Map<string, Promise<string>>();

function emptyStoreOf(engine: EngineKind): Promise<string> {
  if (!emptyStores.has(engine.name)) {
    emptyStores.set(
      engine.name,
      (async () => {
        const dir = scratchDir();
        const store = await engine.open(dir, 0, () => HISTORY_START_MS);
        await store.close();
        return dir;
      })(),
    );
  }
  return emptyStores.get(engine.name)!;
}

afterAll(async () => {
  for (const dir of await Promise.all(emptyStores.values())) rmSync(dir, { recursive: true, force: true });
});

function requestOf(w: Write, incarnation: string): AppendRequest {
  return {
    contentType: w.contentType,
    data: w.body,
    close: w.close,
    streamSeq: null,
    producer: { id: w.producer, epoch: w.epoch, seq: w.seq, ...(w.digest !== undefined ? { digest: w.digest } : {}) },
    bodyDigest: w.digest !== undefined ? hex(w.body) : null,
    incarnation: w.incarnation === 'none' ? null : w.incarnation === 'right' ? incarnation : `${incarnation}-old`,
    recordMatch: null,
  };
}

function wireOf(outcome: Parameters<typeof appendAnswer>[0]): Answer {
  const answer = appendAnswer(outcome);
  return { status: answer.status, code: answer.error?.code ?? null, headers: answer.headers };
}

async function createStreams(store: Store): Promise<string[]> {
  const incarnations: string[] = [];
  for (const name of STREAM_NAMES) {
    const created = await store.run('createStream', {
      name,
      bucket: null,
      contentType: STREAM_TYPE,
      ttlSeconds: null,
      expiresAtMs: null,
      close: false,
      data: Buffer.alloc(0),
      streamSeq: null,
      incarnation: null,
      fork: null,
    });
    if (created.kind !== 'created') throw new Error(`could not create ${name}: ${created.kind}`);
    incarnations.push(created.stream.incarnation);
  }
  return incarnations;
}

/** Where every history's clock starts. */
const HISTORY_START_MS = 1_700_000_000_000;

class Harness {
  nowMs = HISTORY_START_MS;
  store!: Store;
  model!: SeedModel;
  readonly clients = new Clients();
  dir = scratchDir();
  /** Every write and both answers, printed when they disagree. */
  readonly trail: string[] = [];
  readonly kinds = new Set<string>();

  constructor(
    readonly engine: EngineKind,
    readonly lane: number,
  ) {}

  async start(): Promise<void> {
    if (this.engine.filesInDir) copyStoreFiles(await emptyStoreOf(this.engine), this.dir);
    this.store = await this.engine.open(this.dir, this.lane, () => this.nowMs);
    await this.engine.empty?.(this.lane);
    this.model = new SeedModel(await createStreams(this.store));
  }

  async run(act: Action): Promise<void> {
    if (act.kind === 'tick') this.nowMs += act.ms;
    else if (act.kind === 'restart') await this.restart();
    else if (act.kind === 'zombie') for (const spec of act.specs) await this.writes([spec]);
    else await this.writes(act.kind === 'write' ? [act.spec] : act.specs);
  }

  /** All writes of a burst are submitted together, so they share one group commit. */
  private async writes(specs: WriteSpec[]): Promise<void> {
    const writes: Write[] = [];
    const expected: Answer[] = [];
    for (const spec of specs) {
      const w = this.clients.resolve(spec, this.model);
      writes.push(w);
      expected.push(this.model.append(w, this.nowMs));
      this.clients.observe(w, expected[expected.length - 1]!);
    }
    const pending = writes.map((w) =>
      this.store.run('append', { name: STREAM_NAMES[w.stream]!, request: requestOf(w, this.model.streams[w.stream]!.incarnation) }),
    );
    const actual = (await Promise.all(pending)).map(wireOf);
    writes.forEach((w, i) => this.trail.push(traceLine(w, this.nowMs, expected[i]!, actual[i]!)));
    for (const a of expected) this.kinds.add(answerKind(a));
    for (let i = 0; i < writes.length; i++) {
      if (JSON.stringify(sorted(actual[i]!)) !== JSON.stringify(sorted(expected[i]!))) {
        throw new Error(`engine and model disagree on write ${i + 1} of ${writes.length}:\n${this.trail.slice(-30).join('\n')}`);
      }
    }
  }

  private async restart(): Promise<void> {
    if (!this.engine.restartable) return;
    if (this.engine.crashImages) await this.restartFromCrashImage();
    else {
      await this.store.close();
      this.store = await this.engine.open(this.dir, this.lane, () => this.nowMs);
    }
    this.trail.push(`-- restart at ${this.nowMs}${this.engine.crashImages ? ' (crash image)' : ''}`);
    await this.checkLogs();
  }

  /**
   * Every write has its answer, so each is durable: the database and WAL files as they are
   * now, unsynced pages and all, are what a power cut would leave. The running store is
   * closed only after the copy (its close indexes in its own directory).
   */
  private async restartFromCrashImage(): Promise<void> {
    const image = scratchDir();
    copyStoreFiles(this.dir, image);
    await this.store.close();
    rmSync(this.dir, { recursive: true, force: true });
    this.dir = image;
    this.store = await this.engine.open(this.dir, this.lane, () => this.nowMs);
  }

  async checkLogs(): Promise<void> {
    for (let i = 0; i < STREAM_NAMES.length; i++) {
      const stream = await this.store.getStream(STREAM_NAMES[i]!);
      const m = this.model.streams[i]!;
      expect({ tail: stream?.tail, closed: stream?.closed }).toEqual({ tail: m.tail, closed: m.closed });
      const bytes = await this.store.readRange(stream!, 0, m.tail + 1);
      expect(bytes.equals(Buffer.concat(m.parts))).toBe(true);
    }
  }

  async stop(): Promise<void> {
    await this.store.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function sorted(a: Answer): Answer {
  return { status: a.status, code: a.code, headers: Object.fromEntries(Object.entries(a.headers).sort(([x], [y]) => (x < y ? -1 : 1))) };
}

function answerLine(a: Answer): string {
  return `${a.status} ${a.code ?? ''} ${JSON.stringify(sorted(a).headers)}`;
}

function traceLine(w: Write, nowMs: number, expected: Answer, actual: Answer): string {
  const what = `t=${nowMs} s${w.stream} ${w.producer} e${w.epoch} q${w.seq} ${w.body.length}B digest=${w.digest ? w.digest.slice(0, 6) : '-'} close=${w.close} inc=${w.incarnation} ct=${w.contentType}`;
  const same = JSON.stringify(sorted(expected)) === JSON.stringify(sorted(actual));
  return same ? `${what}\n   = ${answerLine(actual)}` : `${what}\n   model  ${answerLine(expected)}\n   engine ${answerLine(actual)}`;
}

function answerKind(a: Answer): string {
  return [a.status, a.code, a.headers['producer-outcome']].filter((x) => x !== null && x !== undefined).join(' ');
}

/** Runs one history against a fresh engine; returns the kinds of answer the model gave. */
async function runHistory(engine: EngineKind, lane: number, actions: Action[]): Promise<Set<string>> {
  const h = new Harness(engine, lane);
  try {
    await h.start();
    for (const act of actions) await h.run(act);
    await h.checkLogs();
    return h.kinds;
  } finally {
    await h.stop();
  }
}

/** Every kind of answer of the seed: the histories must reach each, or agreement proves little. */
const EXPECTED_KINDS = [
  '200',
  '204',
  '204 receipt-evicted',
  '400 DIGEST_MISMATCH',
  '400 PRODUCER_SEQ_NOT_ZERO',
  '403 PRODUCER_FENCED epoch-closed;by=claim',
  '403 PRODUCER_FENCED stale-epoch',
  '403 PRODUCER_KEY_CONFLICT key-conflict',
  '403 PRODUCER_EXPIRED producer-expired',
  '409 PRODUCER_SEQ_GAP',
  '409 STREAM_CLOSED',
  '409 CONTENT_TYPE_MISMATCH',
  '412 INCARNATION_MISMATCH',
  '429 PRODUCER_LIMIT',
] as const;

type ExpectedKind = (typeof EXPECTED_KINDS)[number];

// ---------------------------------------------------------------------------------------
// Steered histories: one per kind of answer, built to reach it, so that no seed can miss one.
// ---------------------------------------------------------------------------------------

/**
 * A write by `producer` to `stream` whose answer only `overrides` decide. The rest is drawn
 * among values that change nothing there: a matching digest or none, the right incarnation or
 * none (the steered stream forgets no producer unless the recipe says so, so it has no floor),
 * and a repeat sends the body it sent before.
 */
function harmlessSpec(stream: number, producer: number, overrides: Partial<WriteSpec> = {}): fc.Arbitrary<WriteSpec> {
  return fc
    .record({
      pick: fc.nat({ max: 1_000 }),
      digest: fc.constantFrom<WriteSpec['digest']>('none', 'match'),
      incarnation: fc.constantFrom<WriteSpec['incarnation']>('none', 'right'),
    })
    .map((free) => ({ stream, producer, epochMove: 'same', seqMove: 'next', bodyMode: 'same', close: 'no', wrongType: false, ...free, ...overrides }));
}

function steeredWrite(stream: number, producer: number, overrides: Partial<WriteSpec> = {}): fc.Arbitrary<Action> {
  return harmlessSpec(stream, producer, overrides).map((spec) => ({ kind: 'write' as const, spec }));
}

const tickOf = (ms: number): fc.Arbitrary<Action> => fc.constant({ kind: 'tick' as const, ms });

/** The actions that reach a kind on a stream no producer has written to; `producers` are distinct. */
type Recipe = (stream: number, producers: [number, ...number[]]) => Array<fc.Arbitrary<Action>>;

const RECIPES: Record<ExpectedKind, Recipe> = {
  '200': (s, [p]) => [steeredWrite(s, p)],
  '204': (s, [p]) => [steeredWrite(s, p), steeredWrite(s, p, { seqMove: 'newest' })],
  '204 receipt-evicted': (s, [p]) => [steeredWrite(s, p), steeredWrite(s, p), steeredWrite(s, p, { seqMove: 'older' })],
  '400 DIGEST_MISMATCH': (s, [p]) => [steeredWrite(s, p, { digest: 'wrong' })],
  '400 PRODUCER_SEQ_NOT_ZERO': (s, [p]) => [steeredWrite(s, p), steeredWrite(s, p, { epochMove: 'up', seqMove: 'ahead' })],
  '403 PRODUCER_FENCED epoch-closed;by=claim': (s, [p]) => [steeredWrite(s, p), zombie(harmlessSpec(s, p))],
  // Epochs 0, 1, 2, then a write of epoch 0: the claim of 2 closed 1, so 0 is merely stale.
  '403 PRODUCER_FENCED stale-epoch': (s, [p]) => [
    steeredWrite(s, p),
    steeredWrite(s, p, { epochMove: 'up', seqMove: 'zero' }),
    steeredWrite(s, p, { epochMove: 'up', seqMove: 'zero' }),
    steeredWrite(s, p, { epochMove: 'zero' }),
  ],
  '403 PRODUCER_KEY_CONFLICT key-conflict': (s, [p]) => [steeredWrite(s, p, { digest: 'match' }), steeredWrite(s, p, { seqMove: 'newest', bodyMode: 'fresh', digest: 'match' })],
  '403 PRODUCER_EXPIRED producer-expired': (s, [p]) => [steeredWrite(s, p), tickOf(SETTINGS.forgetAfterMs), steeredWrite(s, p, { incarnation: 'right' })],
  '409 PRODUCER_SEQ_GAP': (s, [p]) => [steeredWrite(s, p, { seqMove: 'ahead' })],
  '409 STREAM_CLOSED': (s, [p]) => [steeredWrite(s, p, { close: 'with-append' }), steeredWrite(s, p)],
  '409 CONTENT_TYPE_MISMATCH': (s, [p]) => [steeredWrite(s, p, { wrongType: true })],
  '412 INCARNATION_MISMATCH': (s, [p]) => [steeredWrite(s, p, { incarnation: 'wrong' })],
  // One producer more than the limit, with no time passing: none is idle long enough to evict.
  '429 PRODUCER_LIMIT': (s, producers) => producers.map((p) => steeredWrite(s, p)),
};

/** `act` with every write moved to `stream`. */
function movedTo(act: Action, stream: number): Action {
  const move = (spec: WriteSpec): WriteSpec => ({ ...spec, stream });
  if (act.kind === 'write') return { kind: 'write', spec: move(act.spec) };
  if (act.kind === 'burst') return { kind: 'burst', specs: act.specs.map(move) };
  if (act.kind === 'zombie') return { kind: 'zombie', specs: [move(act.specs[0]), move(act.specs[1])] };
  return act;
}

/**
 * A random history with the recipe of `kind` planted in it: random actions on the other stream
 * (which leave the recipe's stream as new), the recipe, then random actions on both.
 */
function steeredTo(kind: ExpectedKind): fc.Arbitrary<Action[]> {
  const producers = PRODUCER_IDS.map((_, i) => i);
  const setting = fc.record({
    stream: fc.integer({ min: 0, max: STREAM_NAMES.length - 1 }),
    producers: fc.shuffledSubarray(producers, { minLength: SETTINGS.maxProducers + 1, maxLength: SETTINGS.maxProducers + 1 }),
  });
  return setting
    .chain(({ stream, producers }) =>
      fc.tuple(
        fc.array(action, { maxLength: 20 }).map((before) => before.map((act) => movedTo(act, 1 - stream))),
        fc.tuple(...RECIPES[kind](stream, producers as [number, ...number[]])),
        fc.array(action, { maxLength: 20 }),
      ),
    )
    .map(([before, recipe, after]) => [...before, ...recipe, ...after]);
}

const steeredHistories = fc.tuple(...EXPECTED_KINDS.map((kind) => steeredTo(kind).map((actions) => ({ kind, actions }))));

/** Runs the history steered to each kind of answer; each must reach its kind. */
async function checkSteered(engine: EngineKind, lane: number, seed: number, coverage: Set<string>): Promise<void> {
  await fc.assert(
    fc.asyncProperty(steeredHistories, async (steered) => {
      for (const { kind, actions } of steered) {
        const reached = await runHistory(engine, lane, actions);
        expect([...reached], `the history steered to ${kind}`).toContain(kind);
        for (const k of reached) coverage.add(k);
      }
    }),
    { seed, numRuns: 1 },
  );
}

async function checkRandom(engine: EngineKind, lane: number, seed: number, runs: number, coverage: Set<string>): Promise<void> {
  await fc.assert(
    fc.asyncProperty(fc.array(action, { minLength: 1, maxLength: 70, size: 'max' }), async (actions) => {
      for (const k of await runHistory(engine, lane, actions)) coverage.add(k);
    }),
    { seed, numRuns: runs },
  );
}

/** Lane `lane`'s share of `runs` histories split over `lanes`. */
const shareOf = (runs: number, lanes: number, lane: number): number => Math.floor(runs / lanes) + (lane < runs % lanes ? 1 : 0);

/** Waits for every check, so that none still runs when the test ends, then throws the first failure. */
async function allOf(checks: Array<Promise<void>>): Promise<void> {
  const failed = (await Promise.allSettled(checks)).find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}

/**
 * An engine with lanes runs that many random histories at a time, each lane on storage of its
 * own, with the steered histories on one lane more. Every lane draws from a seed of its own,
 * derived from the file's seed, so that RILL_TEST_SEED replays them all. The engines run one
 * after another: the others compute on this process's one thread, so running them at the same
 * time saved nothing and made each test's time the whole file's.
 */
describe.each(ENGINES.map((engine, index) => ({ ...engine, index })))('seed 000 model vs the $name engine', (engine) => {
  it('agrees on every answer and on the log for random producer histories', async () => {
    const coverage = new Set<string>();
    const lanes = engine.lanes ?? 1;
    const runs = engine.runs ?? (engine.restartable ? 500 : 1000);
    const seedOf = (lane: number) => testSeed() + 100 * engine.index + lane;
    const random = Array.from({ length: lanes }, (_, lane) => checkRandom(engine, lane, seedOf(lane), shareOf(runs, lanes, lane), coverage));
    await allOf([checkSteered(engine, lanes, seedOf(lanes), coverage), ...random]);
    // The histories must reach every answer of the seed, or agreement proves little.
    expect([...coverage].sort()).toEqual(expect.arrayContaining([...EXPECTED_KINDS]));
  }, 120_000);
});
