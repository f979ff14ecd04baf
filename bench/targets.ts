/**
 * The servers under test, each in its own process on 127.0.0.1: rill (SQLite, durable
 * acks), the reference server in memory and on files, and the bare node:http floor; for
 * appends also rill in memory (no storage, no fsync), to show what durability costs, the
 * durable floor (bodies written to a file and fdatasynced, nothing else: the least
 * durability costs here) and the SQLite floor (one INSERT per body, group commit: the
 * least SQLite costs as DESIGN.md has rill use it).
 * rill on PostgreSQL runs as one node (`rill-pg`) or two (`rill-pg-2`, two processes on
 * one database), each target on a fresh database of one PostgreSQL server that the bench
 * starts once, durable (fsync=on, synchronous_commit=on: bench/postgres.ts), in the data
 * directory's `postgres` folder, on the first PostgreSQL target, and stops at its end.
 * `rill-cold` is rill on SQLite with a cold tier (bench/s3.ts) on an s3rver of its own,
 * started before it and stopped after it.
 * Each is started fresh for a workload and stopped by its pid.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, closeSync, existsSync, fstatSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, readSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { SignJWT } from 'jose';
import pg from 'pg';
import { createDatabase, startPostgres, type PostgresServer } from './postgres.js';
import { freePort } from './ports.js';
import { COLD_BUCKET, coldArgs, s3Env } from './s3.js';

export type TargetName = 'rill' | 'rill-auth' | 'rill-no-metrics' | 'rill-no-log' | 'rill-cold' | 'rill-pg' | 'rill-pg-2' | 'rill-memory' | 'ref-memory' | 'ref-file' | 'floor' | 'durable-floor' | 'sqlite-floor';

export const TARGET_LABELS: Record<TargetName, string> = {
  rill: 'rill (sqlite, durable)',
  'rill-auth': 'rill (sqlite, durable), auth on',
  'rill-no-metrics': 'rill --metrics off (sqlite, durable)',
  'rill-no-log': 'rill --access-log off (sqlite, durable)',
  'rill-cold': 'rill --cold-store (sqlite, durable, s3rver)',
  'rill-pg': 'rill on PostgreSQL, 1 node',
  'rill-pg-2': 'rill on PostgreSQL, 2 nodes',
  'rill-memory': 'rill --store memory (not durable)',
  'ref-memory': 'reference in-memory',
  'ref-file': 'reference file-backed',
  floor: 'bare node:http floor',
  'durable-floor': 'durable floor (node:http + fdatasync)',
  'sqlite-floor': 'SQLite floor (node:http + one INSERT each, group commit)',
};

/** The bench is compiled to .bench/build; the repository root is two levels up. */
const ROOT = resolve(import.meta.dirname, '../..');
/** The rill build under test; `--rill` points at another one (to compare two builds). */
let rillCli = join(ROOT, 'dist/bin/rill.js');

export function useRillBuild(cli: string): void {
  rillCli = resolve(cli);
}

/** Node flags for rill's process only; `--cpu-prof` puts its CPU profiles in a folder. */
let rillNodeFlags: string[] = [];

export function profileRillInto(dir: string): void {
  mkdirSync(dir, { recursive: true });
  rillNodeFlags = ['--cpu-prof', `--cpu-prof-dir=${resolve(dir)}`];
}
/** Node flags for every server process started by startTarget, rill on PostgreSQL included (bench:instructions' `--by-function`). */
let allNodeFlags: string[] = [];

export function addNodeFlags(flags: string[]): void {
  allNodeFlags = [...allNodeFlags, ...flags];
}
const SERVERS = join(import.meta.dirname, 'servers');

/** rill's processes per PostgreSQL target; the targets not named here are not on PostgreSQL. */
const POSTGRES_NODES: Partial<Record<TargetName, number>> = { 'rill-pg': 1, 'rill-pg-2': 2 };

export function isPostgresTarget(name: TargetName): boolean {
  return POSTGRES_NODES[name] !== undefined;
}

/** What a PostgreSQL node logs at its stop ('postgres store totals'): its committed batches, their commands and round trips. */
export interface StoreTotals {
  batches: number;
  commands: number;
  /** Round trips to the database for those batches, BEGIN, hints and COMMIT included. */
  roundTrips: number;
  /** Optimistic batches, guards that failed, and batches committed beside another or deferred after it (builds that count them). */
  optimistic?: number;
  stale?: number;
  overlapped?: number;
  deferred?: number;
}

export interface Running {
  name: TargetName;
  /** The first node's URL (the only one's, but for `rill-pg-2`). */
  url: string;
  /** Every node's URL, `url` first. */
  urls: string[];
  /** The first node's pid. */
  pid: number;
  dataDir: string | null;
  /** Resident set size of the server process, in bytes (of all its nodes). */
  rssBytes(): number;
  /**
   * CPU time the server process has used, in seconds. On PostgreSQL: the nodes' and the
   * PostgreSQL server's (postmaster, backends and background processes), for that is what
   * a single rill process on SQLite does alone.
   */
  cpuSeconds(): number;
  /**
   * Bytes the server process has caused to be written to storage (/proc/PID/io write_bytes).
   * On PostgreSQL: the nodes' and every process of the PostgreSQL server's.
   */
  writtenBytes(): number;
  /** Headers every request to it carries: the bearer token of an auth-on target. */
  headers: Record<string, string>;
  /** SIGTERM, then SIGKILL if it has not exited after `graceMs` (every node). */
  stop(graceMs?: number): Promise<void>;
  /** PostgreSQL: the nodes' totals as they logged them at their last stop, summed; null before a stop, or when a node did not log them. */
  storeTotals?(): StoreTotals | null;
  /**
   * PostgreSQL: stops the nodes and starts them again on the same database and ports, so
   * that the totals they log at their next stop count from here.
   */
  restartNodes?(): Promise<void>;
  /**
   * PostgreSQL: a CHECKPOINT, so that the data pages dirtied so far are written now
   * (counted in writtenBytes) and not at a checkpoint minutes later.
   */
  checkpoint?(): Promise<void>;
  /** PostgreSQL: where the server's WAL insert position is, in bytes from its start (the whole server's WAL, every database's). */
  walBytes?(): Promise<number>;
}

function commandFor(name: TargetName, port: number, dataDir: string | null): string[] {
  switch (name) {
    case 'rill':
      return [rillCli, 'serve', '--host', '127.0.0.1', '--port', String(port), '--store', 'sqlite', '--data', dataDir!];
    case 'rill-auth':
      return [rillCli, 'serve', '--host', '127.0.0.1', '--port', String(port), '--store', 'sqlite', '--data', dataDir!, '--auth-secret-file', secretFileIn(dataDir!)];
    case 'rill-no-metrics':
      return [rillCli, 'serve', '--host', '127.0.0.1', '--port', String(port), '--store', 'sqlite', '--data', dataDir!, '--metrics', 'off'];
    case 'rill-no-log':
      return [rillCli, 'serve', '--host', '127.0.0.1', '--port', String(port), '--store', 'sqlite', '--data', dataDir!, '--access-log', 'off'];
    case 'rill-cold':
      return [rillCli, 'serve', '--host', '127.0.0.1', '--port', String(port), '--store', 'sqlite', '--data', dataDir!, ...coldArgs()];
    case 'rill-memory':
      return [rillCli, 'serve', '--host', '127.0.0.1', '--port', String(port), '--store', 'memory'];
    case 'rill-pg':
    case 'rill-pg-2':
      throw new Error(`${name} runs through startPostgresTarget`);
    case 'ref-memory':
      return [join(SERVERS, 'reference.js'), String(port)];
    case 'ref-file':
      return [join(SERVERS, 'reference.js'), String(port), dataDir!];
    case 'floor':
      return [join(SERVERS, 'floor.js'), String(port)];
    case 'durable-floor':
      return [join(SERVERS, 'durable-floor.js'), String(port), dataDir!];
    case 'sqlite-floor':
      return [join(SERVERS, 'sqlite-floor.js'), String(port), dataDir!];
  }
}

export function needsDataDir(name: TargetName): boolean {
  return name === 'rill' || name === 'rill-auth' || name === 'rill-no-metrics' || name === 'rill-no-log' || name === 'rill-cold' || name === 'ref-file' || name === 'durable-floor' || name === 'sqlite-floor';
}

/** A fresh, empty data directory on the same disk as the repository (not tmpfs). */
export function freshDataDir(base: string, name: string): string {
  const dir = join(base, name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** Every server this process started and has not stopped, killed if the bench dies. */
const live = new Set<ChildProcess>();
/** The folders of their standard output (spawnListening), removed with them. */
const outputDirs = new Set<string>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
  for (const dir of outputDirs) rmSync(dir, { recursive: true, force: true });
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => process.exit(130));
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((r) => child.once('exit', () => r()));
}

/** One server process, spawned and listening. */
interface Process {
  child: ChildProcess;
  url: string;
  output(): string;
  stop(graceMs: number): Promise<void>;
}

/** What a server's output is kept of. */
const KEPT_OUTPUT_CHARS = 64 * 1024;

/**
 * Where a server's standard output goes: a file on tmpfs, as `rill serve > rill.log` sends
 * it to a file, not a pipe into this process. At info rill writes an access line per
 * request, about 2.5 MB a second under the append loads. Through a pipe each write woke
 * this process, which runs the load generator: that cost rill 4-9 µs of CPU per request and
 * the load generator up to 8 more, for rill alone, as no other server logs per request
 * (docs/performance.md, "The access log behind a pipe"). tmpfs, so that the log's writeback
 * does not share the disk with the servers' flushes.
 */
const OUTPUT_DIR = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();

/** About the last `bytes` bytes of a file as text, or '' if it cannot be read. */
function tailOf(file: string, bytes: number): string {
  let fd: number | undefined;
  try {
    fd = openSync(file, 'r');
    const size = fstatSync(fd).size;
    const tail = Buffer.alloc(Math.min(size, bytes));
    readSync(fd, tail, 0, tail.length, size - tail.length);
    return tail.toString();
  } catch {
    return '';
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * rill runs at its default log level, info, as operators run it: its figures include the
 * access log's line per request (`rill-no-log` runs without it). The other servers log
 * nothing per request either way.
 */
function logLevelOf(name: TargetName): string {
  return isRill(name) ? 'info' : 'warn';
}

/** Whether a target is rill itself, on any store, rather than a server it is compared with. */
function isRill(name: TargetName): boolean {
  return name.startsWith('rill');
}

/**
 * The variables `npm start` sets before `node` (package.json's start script), so that the
 * bench runs rill as it is run. Today glibc's malloc on transparent huge pages: a 32 MiB
 * append or read faults in 16 pages of 2 MiB instead of 8,192 of 4 KiB (docs/operating.md,
 * "Memory and large appends"). The other servers run as their authors ship them.
 */
function startEnvironment(): Record<string, string> {
  const start: string = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts.start;
  const env: Record<string, string> = {};
  for (const word of start.split(' ')) {
    const assignment = /^([A-Z_]+)=(\S*)$/.exec(word);
    if (!assignment) break;
    env[assignment[1]!] = assignment[2]!;
  }
  return env;
}

let rillEnv: Readonly<Record<string, string>> | undefined;

/** startEnvironment, read once, when a rill is first started: importing this module reads no file. */
function rillEnvironment(): Readonly<Record<string, string>> {
  return (rillEnv ??= startEnvironment());
}

async function spawnListening(command: string[], port: number, logLevel: string, startTimeoutMs: number, env: Record<string, string> = {}): Promise<Process> {
  const [program, ...args] = command;
  const outputDir = mkdtempSync(join(OUTPUT_DIR, 'rill-bench-output-'));
  outputDirs.add(outputDir);
  const stdoutFile = join(outputDir, 'stdout');
  const stdoutFd = openSync(stdoutFile, 'w');
  let child: ChildProcess;
  try {
    child = spawn(program!, args, {
      env: { ...process.env, RILL_LOG_LEVEL: logLevel, ...env },
      stdio: ['ignore', stdoutFd, 'pipe'],
    });
  } finally {
    closeSync(stdoutFd);
  }
  live.add(child);
  child.once('exit', () => live.delete(child));
  // The last of what it wrote, for a failure's message and the totals a node logs at its
  // stop: its standard output's tail, then its standard error's. Kept once its output has
  // closed, and the file removed then.
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-KEPT_OUTPUT_CHARS)));
  let closedOutput: string | null = null;
  const output = () => closedOutput ?? tailOf(stdoutFile, KEPT_OUTPUT_CHARS) + stderr;
  child.once('close', () => {
    closedOutput = output();
    rmSync(outputDir, { recursive: true, force: true });
    outputDirs.delete(outputDir);
  });
  const url = `http://127.0.0.1:${port}`;
  await waitListening(url, child, output, startTimeoutMs);
  return {
    child,
    url,
    output,
    async stop(graceMs) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited(child);
      clearTimeout(timer);
    },
  };
}

/**
 * Spawns the server and resolves once it accepts requests (within `startTimeoutMs`).
 * `launcher` runs node under another program (valgrind, for instructions.ts).
 */
export async function startTarget(
  name: TargetName,
  dataDir: string | null,
  extraArgs: string[] = [],
  startTimeoutMs = 30_000,
  launcher: string[] = [],
): Promise<Running> {
  if (isPostgresTarget(name)) return startPostgresTarget(name, extraArgs, startTimeoutMs, launcher);
  const port = await freePort();
  const flags = [...allNodeFlags, ...(name === 'rill' || name === 'rill-auth' || name === 'rill-cold' ? rillNodeFlags : [])];
  const headers = name === 'rill-auth' ? await benchToken(dataDir!) : {};
  const s3 = name === 'rill-cold' ? await startBenchS3(startTimeoutMs) : null;
  let server: Process;
  try {
    const env = { ...(isRill(name) ? rillEnvironment() : {}), ...(s3 ? s3Env(s3.url) : {}) };
    server = await spawnListening([...launcher, process.execPath, ...flags, ...commandFor(name, port, dataDir), ...extraArgs], port, logLevelOf(name), startTimeoutMs, env);
  } catch (error) {
    await s3?.stop(10_000);
    throw error;
  }
  const pid = server.child.pid!;
  return {
    name,
    url: server.url,
    urls: [server.url],
    pid,
    dataDir,
    headers,
    rssBytes: () => rssOf(pid),
    cpuSeconds: () => cpuSecondsOf(pid),
    writtenBytes: () => writtenBytesOf(pid),
    // The object store stops after rill, whose last upload pass may still be talking to it.
    stop: async (graceMs = 10_000) => {
      await server.stop(graceMs);
      await s3?.stop(graceMs);
    },
  };
}

/**
 * The `rill-cold` target's object store: s3rver in a process of its own on a free port,
 * its objects in a temporary directory that its stop removes.
 */
async function startBenchS3(startTimeoutMs: number): Promise<Process> {
  const directory = mkdtempSync(join(tmpdir(), 'rill-bench-s3-'));
  const port = await freePort();
  try {
    const s3 = await spawnListening([process.execPath, join(SERVERS, 's3.js'), String(port), directory, COLD_BUCKET], port, 'warn', startTimeoutMs);
    return {
      ...s3,
      async stop(graceMs) {
        await s3.stop(graceMs);
        rmSync(directory, { recursive: true, force: true });
      },
    };
  } catch (error) {
    rmSync(directory, { recursive: true, force: true });
    throw error;
  }
}

/** The auth-on target's HS256 secret, beside its data directory (written by benchToken before it starts). */
function secretFileIn(dataDir: string): string {
  return join(dirname(resolve(dataDir)), `${basename(dataDir)}.secret`);
}

/**
 * A secret for the auth-on target and the header of one token on every stream (one
 * subject, no quotas): what each of its requests costs beyond rill's is checking it.
 */
async function benchToken(dataDir: string): Promise<Record<string, string>> {
  const secret = randomBytes(32).toString('base64url');
  // Private, as rill refuses a secret file others may read (issue 37); a file left by an earlier run keeps its mode.
  writeFileSync(secretFileIn(dataDir), secret, { mode: 0o600 });
  chmodSync(secretFileIn(dataDir), 0o600);
  const token = await new SignJWT({ rill: { grants: [{ bucket: '*', can: ['admin'] }] } })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject('bench')
    .setExpirationTime('1d')
    .sign(new TextEncoder().encode(secret));
  return { authorization: `Bearer ${token}` };
}

// --- rill on PostgreSQL ----------------------------------------------------------------

/** Where the bench's PostgreSQL server keeps its data: on the repository's disk, like the other servers'. */
let postgresDir = join(ROOT, '.bench/data/postgres');
let postgres: Promise<PostgresServer> | null = null;
/** The bench's own connection to the server, for CHECKPOINT and its settings. */
let postgresAdmin: Promise<pg.Client> | null = null;

/** The folder the bench's PostgreSQL server is created in (emptied first); before its first target starts. */
export function placePostgresIn(dir: string): void {
  postgresDir = resolve(dir);
}

/**
 * Run as root, PostgreSQL runs as the OS user `postgres` (bench/postgres.ts), which must be
 * able to reach its data dir: every folder above it must let others through.
 */
function reachableByPostgres(dir: string): boolean {
  if (process.getuid?.() !== 0) return true;
  for (let d = dirname(dir); ; d = dirname(d)) {
    try {
      if ((statSync(d).mode & 0o001) === 0) return false;
    } catch {
      // not made yet: mkdirSync makes it 0755
    }
    if (dirname(d) === d) return true;
  }
}

/** Whether the bench's PostgreSQL server loads pg_stat_statements (bench/pg-statements.ts). */
let statementStats = false;

/** Before the bench's PostgreSQL server starts: have it keep pg_stat_statements, planning times included. */
export function keepStatementStats(): void {
  statementStats = true;
}

/**
 * The bench's PostgreSQL server, started on first use: durable, fsync=on and
 * synchronous_commit=on. In the data directory's `postgres` folder, or, where the `postgres`
 * user could not reach that, in a temp dir of startPostgres's own.
 */
export function benchPostgres(): Promise<PostgresServer> {
  postgres ??= (async () => {
    rmSync(postgresDir, { recursive: true, force: true });
    const reachable = reachableByPostgres(postgresDir);
    if (reachable) mkdirSync(postgresDir, { recursive: true });
    const server = await startPostgres(reachable ? { dataDir: postgresDir, durable: true } : { durable: true });
    if (statementStats) await loadStatementStats(server);
    return server;
  })();
  return postgres;
}

/** A library PostgreSQL loads only at its start: set, then the server killed and started again (a stop would remove a temp dir). */
async function loadStatementStats(server: PostgresServer): Promise<void> {
  const asAdmin = async (sql: string[]) => {
    const client = new pg.Client({ connectionString: server.adminUrl });
    await client.connect();
    try {
      for (const statement of sql) await client.query(statement);
    } finally {
      await client.end();
    }
  };
  await asAdmin([`ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'`, 'ALTER SYSTEM SET pg_stat_statements.track_planning = on']);
  await server.kill();
  await server.restart();
  await asAdmin(['CREATE EXTENSION IF NOT EXISTS pg_stat_statements']);
}

/** The bench's own connection to its PostgreSQL server (closed by stopBenchPostgres). */
export function adminClient(): Promise<pg.Client> {
  postgresAdmin ??= (async () => {
    const client = new pg.Client({ connectionString: (await benchPostgres()).adminUrl });
    client.on('error', () => {});
    await client.connect();
    return client;
  })();
  return postgresAdmin;
}

/** Whether this run has started a PostgreSQL server. */
export function postgresStarted(): boolean {
  return postgres !== null;
}

/** The server's version and durability settings, as it reports them, for the bench's output. */
export async function postgresSettings(): Promise<Record<string, string>> {
  const client = await adminClient();
  const names = ['server_version', 'data_directory', 'fsync', 'synchronous_commit', 'full_page_writes', 'wal_sync_method', 'shared_buffers', 'checkpoint_timeout', 'max_wal_size'];
  const { rows } = await client.query<{ name: string; setting: string; unit: string | null }>('SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1)', [names]);
  const settings: Record<string, string> = {};
  for (const name of names) {
    const row = rows.find((r) => r.name === name);
    if (row) settings[name] = row.unit ? `${row.setting} (${row.unit})` : row.setting;
  }
  return settings;
}

/** Stops the bench's PostgreSQL server, if started, and removes its data. */
export async function stopBenchPostgres(): Promise<void> {
  const admin = postgresAdmin;
  const server = postgres;
  postgresAdmin = postgres = null;
  if (admin) await (await admin.catch(() => null))?.end().catch(() => {});
  if (!server) return;
  await (await server.catch(() => null))?.stop();
  rmSync(postgresDir, { recursive: true, force: true });
}

/** The postmaster and every process under it (backends and background processes). */
function processTree(root: number): number[] {
  const parents = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    const siblings = parents.get(ppid) ?? [];
    siblings.push(Number(entry));
    parents.set(ppid, siblings);
  }
  const tree = [root];
  for (let i = 0; i < tree.length; i++) tree.push(...(parents.get(tree[i]!) ?? []));
  return tree;
}

/** Reads a figure of a process that may have exited meanwhile: 0 then (an exited child's count moves to its parent's, once reaped). */
function orZero(read: () => number): number {
  try {
    const value = read();
    return Number.isFinite(value) ? value : 0;
  } catch {
    return 0;
  }
}

/**
 * Bytes written by the PostgreSQL server's processes so far. A child's count moves to its
 * parent's /proc/PID/io when the parent reaps it, so a backend that exits is still counted.
 */
function postgresWrittenBytes(server: PostgresServer): number {
  return processTree(server.pid()).reduce((sum, pid) => sum + orZero(() => writtenBytesOf(pid)), 0);
}

/** CPU time of the PostgreSQL server's processes so far, the postmaster's reaped children included (cutime, cstime). */
function postgresCpuSeconds(server: PostgresServer): number {
  const [postmaster, ...children] = processTree(server.pid());
  return orZero(() => cpuSecondsOf(postmaster!, true)) + children.reduce((sum, pid) => sum + orZero(() => cpuSecondsOf(pid)), 0);
}

/** Two nodes' totals added up, each count that either node logs. */
function sumTotals(a: StoreTotals, b: StoreTotals): StoreTotals {
  const sum: StoreTotals = { batches: a.batches + b.batches, commands: a.commands + b.commands, roundTrips: a.roundTrips + b.roundTrips };
  for (const k of ['optimistic', 'stale', 'overlapped', 'deferred'] as const) if (a[k] !== undefined || b[k] !== undefined) sum[k] = (a[k] ?? 0) + (b[k] ?? 0);
  return sum;
}

function totalsIn(output: string): StoreTotals | null {
  for (const line of output.split('\n').reverse()) {
    if (!line.includes('postgres store totals')) continue;
    try {
      const totals = (JSON.parse(line) as { postgres?: StoreTotals }).postgres;
      if (totals && [totals.batches, totals.commands, totals.roundTrips].every(Number.isFinite)) return totals;
    } catch {
      // not a log line of ours
    }
  }
  return null;
}

/**
 * rill on PostgreSQL: `POSTGRES_NODES[name]` node processes on a fresh database of the
 * bench's server, started one after the other (the first creates the schema).
 */
async function startPostgresTarget(name: TargetName, extraArgs: string[], startTimeoutMs: number, launcher: string[]): Promise<Running> {
  const server = await benchPostgres();
  const database = await createDatabase(server);
  const ports: number[] = [];
  for (let i = 0; i < POSTGRES_NODES[name]!; i++) ports.push(await freePort());
  const startNodes = async (): Promise<Process[]> => {
    const started: Process[] = [];
    try {
      for (const port of ports) {
        const command = [rillCli, 'serve', '--host', '127.0.0.1', '--port', String(port), '--store', 'postgres', '--postgres-url', database, ...extraArgs];
        // Level info: the nodes log their totals at their stop; otherwise only at their start.
        started.push(await spawnListening([...launcher, process.execPath, ...allNodeFlags, ...rillNodeFlags, ...command], port, 'info', startTimeoutMs, rillEnvironment()));
      }
    } catch (error) {
      await Promise.all(started.map((n) => n.stop(10_000)));
      throw error;
    }
    return started;
  };
  let nodes = await startNodes();
  let totals: StoreTotals | null = null;
  const stopNodes = async (graceMs: number): Promise<void> => {
    const stopping = nodes.filter((n) => n.child.exitCode === null && n.child.signalCode === null);
    if (stopping.length === 0) return;
    await Promise.all(stopping.map((n) => n.stop(graceMs)));
    const each = stopping.map((n) => totalsIn(n.output()));
    totals = each.every((t) => t !== null)
      ? each.reduce<StoreTotals>((sum, t) => sumTotals(sum, t!), { batches: 0, commands: 0, roundTrips: 0 })
      : null;
  };
  const running: Running = {
    name,
    url: nodes[0]!.url,
    urls: nodes.map((n) => n.url),
    pid: nodes[0]!.child.pid!,
    dataDir: null,
    headers: {},
    rssBytes: () => nodes.reduce((sum, n) => sum + rssOf(n.child.pid!), 0),
    cpuSeconds: () => nodes.reduce((sum, n) => sum + cpuSecondsOf(n.child.pid!), 0) + postgresCpuSeconds(server),
    writtenBytes: () => nodes.reduce((sum, n) => sum + writtenBytesOf(n.child.pid!), 0) + postgresWrittenBytes(server),
    stop: (graceMs = 10_000) => stopNodes(graceMs),
    storeTotals: () => totals,
    async restartNodes() {
      await stopNodes(10_000);
      nodes = await startNodes();
      running.pid = nodes[0]!.child.pid!;
      totals = null;
    },
    async checkpoint() {
      await (await adminClient()).query('CHECKPOINT');
    },
    async walBytes() {
      // Not pg_stat_wal: backends report their WAL to it only from time to time.
      const { rows } = await (await adminClient()).query<{ at: string }>("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::text AS at");
      return Number(rows[0]!.at);
    },
  };
  return running;
}

async function waitListening(url: string, child: ChildProcess, output: () => string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode} before it was ready\n${output()}`);
    try {
      const res = await fetch(`${url}/healthz`);
      await res.arrayBuffer();
      return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  child.kill('SIGKILL');
  throw new Error(`server at ${url} did not start within ${timeoutMs} ms\n${output()}`);
}

export function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = /VmRSS:\s+(\d+) kB/.exec(status);
  return match ? Number(match[1]) * 1024 : NaN;
}

/**
 * CPU time the process has used so far, user and system, in seconds (/proc/PID/stat);
 * with `reapedChildren`, also that of its children it has waited for.
 */
export function cpuSecondsOf(pid: number, reapedChildren = false): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name, which is in parentheses and may hold spaces.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const children = reapedChildren ? Number(fields[13]) + Number(fields[14]) : 0;
  return (Number(fields[11]) + Number(fields[12]) + children) / CLOCK_TICKS_PER_S;
}

/**
 * Bytes the process has caused to be written to storage so far: counted when it dirties
 * the page cache, so a write-back after the process ends still counts.
 */
export function writtenBytesOf(pid: number): number {
  const match = /^write_bytes: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'));
  return match ? Number(match[1]) : NaN;
}

/** USER_HZ: 100 on Linux on every architecture Node runs on. */
const CLOCK_TICKS_PER_S = 100;

export function removeDataDir(dir: string | null): void {
  if (dir) rmSync(dir, { recursive: true, force: true });
}
