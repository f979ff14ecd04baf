/**
 * The crash soak: the real server on SQLite (or on PostgreSQL, given a database, with one
 * or more nodes) under mixed load, SIGKILLed and restarted at random moments. After every
 * restart, and at the end, the checker verifies every stream against what the clients were
 * told. Used by `npm run soak` and, shortened, by the test suite.
 */
import { freePort, removeDir, startServer, tempDataDir, type ServerProcess } from '../../helpers/server.js';
import { checkAll } from './checker.js';
import { Ledger, type StreamSpec } from './ledger.js';
import { pagingReader, sseReader, type Reader, type ReaderContext } from './readers.js';
import { Rng, sleep } from './support.js';
import { casWriter, closer, createStream, jsonBatchWriter, plainWriter, producerWriter, type SoakContext } from './writers.js';

export interface SoakOptions {
  /**
   * When the load ends: after this long (`npm run soak`), or once the server has been
   * killed `restarts` times and `acknowledged` writes were answered (the test: counts, so
   * that a slow machine makes the soak longer, never weaker).
   */
  end: { durationMs: number } | { restarts: number; acknowledged: number };
  seed: number;
  /** A kill comes a random time in this range after the previous restart. */
  killGapMs: [number, number];
  log?: (line: string) => void;
  /** The server's store: SQLite in a data directory of its own unless a PostgreSQL database is given; the database stays up. */
  postgresUrl?: string;
  /** Server processes on the one PostgreSQL database (default 1); the clients spread their requests over them. */
  nodes?: number;
}

export interface SoakReport {
  seed: number;
  store: 'sqlite' | 'postgres';
  nodes: number;
  durationMs: number;
  restarts: number;
  checks: number;
  acknowledged: number;
  ackedByKind: Record<string, number>;
  unknownOutcomes: Record<string, number>;
  lost: number;
  duplicated: number;
  violations: number;
  violationSamples: string[];
  readerBytes: number;
  readerReads: number;
  streamBytes: number;
  streams: number;
  restartMs: { mean: number; max: number };
  checkMs: { mean: number; max: number };
}

function spread(values: number[]): { mean: number; max: number } {
  if (values.length === 0) return { mean: 0, max: 0 };
  return { mean: Math.round(values.reduce((a, b) => a + b, 0) / values.length), max: Math.max(...values) };
}

const BUCKET = '/soak-bucket';
const SERVER_ARGS = ['--sse-lifetime', '3s', '--sse-heartbeat', '1s', '--long-poll-timeout', '1s'];

function stream(name: string, contentType: string, path = `${BUCKET}/${name}`): StreamSpec {
  return { name, path, contentType, incarnation: null, closeAcked: false, closable: false };
}

const STREAMS = {
  plain: stream('plain', 'application/octet-stream'),
  prod: stream('prod', 'text/plain'),
  outbox: stream('outbox', 'text/plain', '/v1/stream/soak-outbox'),
  cas: stream('cas', 'application/json'),
  json: stream('json', 'application/json'),
};

/**
 * The server's processes: one, or with PostgreSQL several nodes on one database. Each
 * request goes to the next node in turn (`base`); a crash SIGKILLs one node, drawn at
 * random, and starts it again on its port while the others serve on.
 */
class Supervisor {
  readonly servers: ServerProcess[] = [];
  restarts = 0;
  /** Time from SIGKILL to the restarted server answering /healthz. */
  readonly restartMs: number[] = [];
  private turn = 0;

  constructor(
    readonly dataDir: string,
    readonly ports: number[],
    readonly postgresUrl: string | undefined,
  ) {}

  async start(): Promise<void> {
    for (let node = 0; node < this.ports.length; node++) await this.startNode(node);
  }

  private async startNode(node: number): Promise<void> {
    this.servers[node] = await startServer({ process: true, dataDir: this.dataDir, port: this.ports[node], postgresUrl: this.postgresUrl, args: SERVER_ARGS });
  }

  async crash(rng: Rng): Promise<void> {
    // One node: no draw, so that a seed gives the history it gave before there were several.
    const node = this.ports.length === 1 ? 0 : rng.int(0, this.ports.length - 1);
    const killedAt = Date.now();
    await this.servers[node]!.kill();
    await this.startNode(node);
    this.restartMs.push(Date.now() - killedAt);
    this.restarts += 1;
  }

  /** The next node's URL: each call moves on to the next node. */
  nextBase(): string {
    this.turn = (this.turn + 1) % this.ports.length;
    return `http://127.0.0.1:${this.ports[this.turn]}`;
  }

  /** SIGTERM to every node; the exit codes that were not 0. */
  async stop(): Promise<Array<number | null>> {
    const codes = await Promise.all(this.servers.map((server) => server.stop()));
    return codes.filter((code) => code !== 0);
  }

  async killAll(): Promise<void> {
    for (const server of this.servers) {
      const child = server.child;
      if (child.exitCode === null && child.signalCode === null) await server.kill();
    }
  }
}

async function setUp(ctx: SoakContext, rng: Rng): Promise<void> {
  const bucket = await fetch(ctx.nextBase() + BUCKET, { method: 'PUT' });
  if (bucket.status !== 201) throw new Error(`creating the soak bucket answered ${bucket.status}`);
  for (const spec of Object.values(STREAMS)) if (!(await createStream(ctx, rng, spec))) throw new Error(`could not create ${spec.path}`);
}

function startWriters(ctx: SoakContext, rng: Rng): Array<Promise<void>> {
  const s = STREAMS;
  return [
    plainWriter(ctx, rng.fork(1), s.plain, 'w1'),
    plainWriter(ctx, rng.fork(2), s.plain, 'w2'),
    producerWriter(ctx, rng.fork(3), s.prod, { pid: 'pa', digest: true, outbox: false, restartChance: 0.01 }),
    producerWriter(ctx, rng.fork(4), s.prod, { pid: 'pb', digest: false, outbox: false, restartChance: 0.02 }),
    producerWriter(ctx, rng.fork(5), s.outbox, { pid: 'ob', digest: true, outbox: true, restartChance: 0.01 }),
    casWriter(ctx, rng.fork(6), s.cas, 'c1'),
    casWriter(ctx, rng.fork(7), s.cas, 'c2'),
    jsonBatchWriter(ctx, rng.fork(8), s.json, 'j1'),
    closer(ctx, rng.fork(9), BUCKET, 1000),
  ];
}

function startReaders(ctx: ReaderContext, rng: Rng, readers: Reader[]): Array<Promise<void>> {
  const reader = (label: string, spec: StreamSpec): Reader => {
    const r: Reader = { label, stream: spec.name, offset: 0, chunks: [], verified: 0, reads: 0 };
    readers.push(r);
    return r;
  };
  const s = STREAMS;
  return [
    pagingReader(ctx, rng.fork(11), s.plain, reader('catch-up reader of plain', s.plain), false),
    pagingReader(ctx, rng.fork(12), s.json, reader('catch-up reader of json', s.json), false),
    pagingReader(ctx, rng.fork(13), s.cas, reader('long-poll reader of cas', s.cas), true),
    sseReader(ctx, rng.fork(14), s.plain, reader('SSE tail of plain (base64)', s.plain)),
    sseReader(ctx, rng.fork(15), s.prod, reader('SSE tail of prod (text)', s.prod)),
  ];
}

interface Phase {
  checkMs: number[];
  supervisor: Supervisor;
  ledger: Ledger;
  readers: Reader[];
  rng: Rng;
  log: (line: string) => void;
}

/** Kills and restarts the server at random moments until `ended`, checking after each restart. */
async function crashLoop(p: Phase, ended: (nextGapMs: number) => boolean, gapMs: [number, number]): Promise<number> {
  let checks = 0;
  while (!ended(gapMs[0])) {
    // pacing: the time between kills, not a wait for an outcome
    await sleep(p.rng.int(gapMs[0], gapMs[1]));
    await p.supervisor.crash(p.rng);
    const checkStarted = Date.now();
    await checkAll(p.supervisor.nextBase(), p.ledger, p.readers);
    p.checkMs.push(Date.now() - checkStarted);
    checks += 1;
    if (p.supervisor.restarts % 10 === 0) {
      const l = p.ledger;
      p.log(`  ${p.supervisor.restarts} restarts, ${l.acknowledged} acknowledged, lost ${l.lost.size}, duplicated ${l.duplicated.size}, violations ${l.violationCount}`);
    }
  }
  return checks;
}

/** After the load: one more crash at rest, then the readers finish and everything is checked. */
async function finish(p: Phase, finalTails: Map<string, number>, setReaderDeadline: (ms: number) => void, readerRuns: Array<Promise<void>>): Promise<number> {
  await p.supervisor.crash(p.rng);
  for (const [name, tail] of await checkAll(p.supervisor.nextBase(), p.ledger, p.readers)) finalTails.set(name, tail);
  setReaderDeadline(Date.now() + 60_000);
  await Promise.all(readerRuns);
  for (const r of p.readers) {
    if (r.offset !== finalTails.get(r.stream)) p.ledger.violation(`${r.label} stopped at ${r.offset}, the stream ends at ${finalTails.get(r.stream)}`);
  }
  await checkAll(p.supervisor.nextBase(), p.ledger, p.readers);
  for (const code of await p.supervisor.stop()) p.ledger.violation(`SIGTERM at the end exited with ${code}`);
  return 2;
}

/** Whether the load is over, given the shortest wait before the next kill. */
function endOf(end: SoakOptions['end'], startedMs: number, p: Phase): (nextGapMs: number) => boolean {
  if ('durationMs' in end) return (nextGapMs) => Date.now() + nextGapMs >= startedMs + end.durationMs;
  return () => p.supervisor.restarts >= end.restarts && p.ledger.acknowledged >= end.acknowledged;
}

export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const started = Date.now();
  const rng = new Rng(options.seed);
  const nodes = options.nodes ?? 1;
  if (nodes > 1 && options.postgresUrl === undefined) throw new Error('several nodes share a PostgreSQL database: give postgresUrl');
  const ports: number[] = [];
  while (ports.length < nodes) {
    const port = await freePort();
    if (!ports.includes(port)) ports.push(port);
  }
  const supervisor = new Supervisor(tempDataDir('rill-soak-'), ports, options.postgresUrl);
  const p: Phase = { checkMs: [], supervisor, ledger: new Ledger(), readers: [], rng, log: options.log ?? (() => {}) };
  let stopping = false;
  let readerDeadline = Number.POSITIVE_INFINITY;
  const finalTails = new Map<string, number>();
  // Each request asks for its node anew, so requests go to the nodes in turn.
  const nextBase = () => supervisor.nextBase();
  const ctx: SoakContext = { nextBase, ledger: p.ledger, stopping: () => stopping };
  const readerCtx: ReaderContext = { nextBase, ledger: p.ledger, finalTail: (s) => finalTails.get(s), deadline: () => readerDeadline };
  await supervisor.start();
  try {
    await setUp(ctx, rng);
    const writers = startWriters(ctx, rng);
    const readerRuns = startReaders(readerCtx, rng, p.readers);
    let checks = await crashLoop(p, endOf(options.end, started, p), options.killGapMs);
    stopping = true;
    await Promise.all(writers);
    checks += await finish(p, finalTails, (ms) => (readerDeadline = ms), readerRuns);
    return report(options, p, checks, Date.now() - started, finalTails);
  } finally {
    stopping = true;
    readerDeadline = 0;
    await supervisor.killAll();
    removeDir(supervisor.dataDir);
  }
}

function report(options: SoakOptions, p: Phase, checks: number, durationMs: number, tails: Map<string, number>): SoakReport {
  const l = p.ledger;
  return {
    seed: options.seed,
    store: options.postgresUrl === undefined ? 'sqlite' : 'postgres',
    nodes: options.nodes ?? 1,
    durationMs,
    restarts: p.supervisor.restarts,
    checks,
    acknowledged: l.acknowledged,
    ackedByKind: Object.fromEntries(l.ackedByKind),
    unknownOutcomes: Object.fromEntries(l.unknownReasons),
    lost: l.lost.size,
    duplicated: l.duplicated.size,
    violations: l.violationCount,
    violationSamples: l.violations.slice(0, 20),
    readerBytes: p.readers.reduce((n, r) => n + r.offset, 0),
    readerReads: p.readers.reduce((n, r) => n + r.reads, 0),
    streamBytes: [...tails.values()].reduce((n, t) => n + t, 0),
    streams: tails.size,
    restartMs: spread(p.supervisor.restartMs),
    checkMs: spread(p.checkMs),
  };
}

export function formatReport(r: SoakReport): string {
  const kinds = Object.entries(r.ackedByKind).map(([k, n]) => `${k} ${n}`).join(', ');
  const unknown = Object.entries(r.unknownOutcomes).map(([k, n]) => `${k} ${n}`).join(', ');
  return [
    `rill crash soak on ${r.store === 'sqlite' ? 'SQLite' : 'PostgreSQL'}${r.nodes > 1 ? `, ${r.nodes} nodes` : ''}: ${(r.durationMs / 60_000).toFixed(1)} min, seed ${r.seed}`,
    `restarts (SIGKILL): ${r.restarts} (kill to healthy: mean ${r.restartMs.mean} ms, max ${r.restartMs.max} ms)`,
    `checks: ${r.checks} (mean ${r.checkMs.mean} ms, max ${r.checkMs.max} ms)`,
    `writes acknowledged: ${r.acknowledged} (${kinds})`,
    `outcomes unknown to clients: ${Object.values(r.unknownOutcomes).reduce((a, b) => a + b, 0)} (${unknown})`,
    `streams: ${r.streams}, bytes at the end: ${r.streamBytes}; readers verified ${r.readerBytes} bytes in ${r.readerReads} reads/events`,
    `lost: ${r.lost}`,
    `duplicated: ${r.duplicated}`,
    `other violations: ${r.violations}`,
    ...r.violationSamples.map((v) => `  - ${v}`),
  ].join('\n');
}
