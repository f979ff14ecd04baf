/**
 * Starts a real rill server on a free port; tests talk to it over HTTP only.
 *
 * - By default in this test's own process: `rill serve`'s own option parser turns the same
 *   flags and RILL_* variables into settings (src/cli/serve-options.ts), and the server is
 *   the one the command runs (openRillServer), on a real store. No process start per server,
 *   and the test may hand it a clock it controls (`clock`).
 * - With `process: true`, the real `rill` binary (dist/bin/rill.js) as a child process,
 *   waited for on /healthz and stopped by pid: for tests of the process itself (signals and
 *   SIGKILL, exit codes, its log, the data-directory lock, memory it holds), and for any test
 *   whose own process blocks (a synchronous child) while the server must answer.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort } from '../../bench/ports.js';
import type { TestClock } from './clock.js';
import type { ServerSettings } from '../../src/http/settings.js';
import type { Store } from '../../src/storage/store.js';

export { freePort };

export const CLI = resolve(import.meta.dirname, '../../dist/bin/rill.js');

/** A server a test started, in its own process or as a child process. */
export interface RunningServer {
  url: string;
  port: number;
  dataDir: string;
  /** Everything the server logged (the child's stdout and stderr). */
  output(): string;
  /** Stops the server (a child: SIGTERM and wait for its exit) and resolves with its exit code (0 in-process). */
  stop(): Promise<number | null>;
  /** In-process only: the server's store, for tests that count what it does (PostgresStore's stats). */
  store?: Store;
}

/** A server started as the real `rill` binary in a child process (`process: true`). */
export interface ServerProcess extends RunningServer {
  child: ChildProcess;
  /** SIGKILL and wait for exit. */
  kill(): Promise<void>;
}

export interface StartOptions {
  store?: 'sqlite' | 'memory' | 'postgres';
  /** A PostgreSQL database: the store is then 'postgres' unless given. */
  postgresUrl?: string;
  dataDir?: string;
  port?: number;
  /** `rill serve` flags. */
  args?: string[];
  /**
   * RILL_* variables the server reads (in-process too); a child process also gets the rest.
   * In-process, the cold tier's object store reads its AWS_* variables here (over process.env's).
   */
  env?: Record<string, string>;
  /** In-process only: the clock the server judges time by. */
  clock?: TestClock;
  /**
   * In-process only: settings laid over the ones the flags make, for values `rill serve`
   * refuses an operator but a test needs, such as an SSE lifetime under 1 s so that rill's
   * own client is seen reconnecting without waiting seconds for it.
   */
  settings?: Partial<ServerSettings>;
}

/** Run the `rill` binary in a child process instead of in this one. */
export interface ProcessOptions extends StartOptions {
  process: true;
  clock?: undefined;
  settings?: undefined;
}

export function tempDataDir(prefix = 'rill-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

async function waitHealthy(url: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const port = Number(new URL(url).port);
  // What the last probe got, for the error: a refused connection (not listening yet), a status, a hang.
  let lastProbe = 'no probe answered';
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`rill exited with ${child.exitCode} before it was ready`);
    try {
      // Bounded too: a connection that hangs must end in this error, with the server's output.
      const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(Math.max(1, deadline - Date.now())) });
      // Another process may have taken the port (the child then exits with 2): its answers are not the child's.
      if (res.status === 200 && listensOn(child.pid!, port)) return;
      lastProbe = res.status === 200 ? 'answered by a process other than the child' : `status ${res.status}`;
    } catch (error) {
      lastProbe = String((error as { cause?: unknown }).cause ?? error);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`rill did not become healthy within ${timeoutMs} ms (pid ${child.pid}; last /healthz probe: ${lastProbe})`);
}

/** TCP sockets listening on the port, as /proc/net tells them: `socket:[inode]`. */
function listenersOn(port: number): Set<string> {
  const hexPort = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  const LISTEN = '0A';
  const sockets = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields[1]?.endsWith(hexPort) && fields[3] === LISTEN) sockets.add(`socket:[${fields[9]}]`);
    }
  }
  return sockets;
}

/** Whether the process holds a socket listening on the port (Linux: its open files in /proc). */
function listensOn(pid: number, port: number): boolean {
  const listeners = listenersOn(port);
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (listeners.has(readlinkSync(`/proc/${pid}/fd/${fd}`))) return true;
    } catch {
      // The descriptor closed between the listing and the read.
    }
  }
  return false;
}

function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((r) => child.once('exit', (code) => r(code)));
}

/**
 * The vitest project `postgres` (vitest.config.ts) runs the HTTP and client tests again
 * with RILL_TEST_STORE=postgres: every server a test starts without naming its store then
 * runs on PostgreSQL, one fresh database per data directory, so that a test restarting
 * "on the same data" restarts on the same database.
 */
const databaseOfDir = new Map<string, Promise<string>>();

/** A test server's store: the one asked for, else PostgreSQL with a URL or in the `postgres` project. */
function storeOf(options: StartOptions): 'sqlite' | 'memory' | 'postgres' {
  if (options.store !== undefined) return options.store;
  return options.postgresUrl || process.env.RILL_TEST_STORE === 'postgres' ? 'postgres' : 'sqlite';
}

/** The test's URL, or a database of the data directory's own for a store storeOf chose. */
async function postgresUrlFor(options: StartOptions, store: ReturnType<typeof storeOf>, dataDir: string): Promise<string | null> {
  if (options.postgresUrl) return options.postgresUrl;
  if (options.store !== undefined || store !== 'postgres') return null;
  let url = databaseOfDir.get(dataDir);
  if (!url) databaseOfDir.set(dataDir, (url = import('./postgres.js').then((m) => m.sharedDatabase())));
  return url;
}

/**
 * A test server's data directory: the test's own, or a fresh one (`made`: removed again if
 * the server does not start). Only SQLite keeps anything there: a memory or PostgreSQL store
 * gets a path that is never made (still a key of its own for postgresUrlFor's database). An
 * empty directory per such server was left behind by every test that did not remove it
 * (remote-readers' PostgreSQL server, one per full run).
 */
function dataDirFor(options: StartOptions, store: ReturnType<typeof storeOf>): { dataDir: string; made: boolean } {
  if (options.dataDir !== undefined) return { dataDir: options.dataDir, made: false };
  if (store !== 'sqlite') return { dataDir: join(tmpdir(), `rill-test-${store}-${randomUUID()}`), made: false };
  return { dataDir: tempDataDir(), made: true };
}

/** The `rill serve` arguments of a test server, on the store storeOf says. */
async function serveArgs(options: StartOptions, port: number): Promise<{ args: string[]; dataDir: string; made: boolean }> {
  const store = storeOf(options);
  const { dataDir, made } = dataDirFor(options, store);
  const postgresUrl = await postgresUrlFor(options, store, dataDir);
  const postgres = postgresUrl ? ['--postgres-url', postgresUrl] : [];
  const args = ['--host', '127.0.0.1', '--port', String(port), '--store', store, '--data', dataDir, ...postgres, ...(options.args ?? [])];
  return { args, dataDir, made };
}

/** Quiet unless a test asks for more: a test reads warnings and errors in output(). */
const TEST_LOG_LEVEL = { RILL_LOG_LEVEL: 'warn' };

export function startServer(options: ProcessOptions): Promise<ServerProcess>;
export function startServer(options?: StartOptions): Promise<RunningServer>;
export function startServer(options: StartOptions | ProcessOptions = {}): Promise<RunningServer> {
  return 'process' in options && options.process ? startServerProcess(options) : startInProcess(options);
}

async function startInProcess(options: StartOptions): Promise<RunningServer> {
  // Port 0 unless one is asked for: the server binds the port the kernel picks, so no other
  // process can take it between a free-port probe and the listen (two files run at once).
  const { args, dataDir, made } = await serveArgs(options, options.port ?? 0);
  try {
    return await openInProcess(options, args, dataDir);
  } catch (error) {
    if (made) removeDir(dataDir);
    throw error;
  }
}

async function openInProcess(options: StartOptions, args: string[], dataDir: string): Promise<RunningServer> {
  // Imported here: a file that only starts child processes does not load the server.
  const [{ serveSettingsOf }, { openRillServer }, { createLogger }] = await Promise.all([
    import('../../src/cli/serve-options.js'),
    import('../../src/http/server.js'),
    import('../../src/ops/logger.js'),
  ]);
  const { flags, settings } = await serveSettingsOf(args, { ...TEST_LOG_LEVEL, ...options.env });
  let output = '';
  const logger = createLogger({ level: flags.logLevel, destination: { write: (line: string) => void (output += line) } });
  const objectStoreEnv = options.env === undefined ? undefined : { ...process.env, ...options.env };
  const rill = await openRillServer({ settings: { ...settings, ...options.settings }, logger, now: options.clock?.now, objectStoreEnv });
  // The command exits on a fatal storage error; here the test sees it in output() and in its answers.
  rill.store.onFatal((error) => logger.fatal({ err: error }, 'storage cannot continue'));
  await rill.listen();
  return {
    url: rill.url(),
    port: Number(new URL(rill.url()).port),
    dataDir,
    output: () => output,
    store: rill.store,
    async stop() {
      await rill.close();
      return 0;
    },
  };
}

/** Tries at a port taken between the probe and the child's listen, before giving up. */
const PORT_TRIES = 3;

/**
 * The binary in a child process, on the port asked for or a free one. The child must be told
 * its port, and another process may take a probed port before the child listens on it: then
 * (and only then) it starts again on another.
 */
async function startServerProcess(options: StartOptions): Promise<ServerProcess> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startChild(options, options.port ?? (await freePort()));
    } catch (error) {
      if (!(error instanceof PortTaken) || options.port !== undefined || attempt >= PORT_TRIES) throw error;
    }
  }
}

/** The child refused to start because another process listens on its --port. */
export class PortTaken extends Error {}

/** Whether the binary's output is its refusal of a --port in use (src/cli/serve-checks.ts words it). */
function refusedPort(output: string, port: number): boolean {
  return output.includes(`rill: CONFIG: --port ${port}: port ${port} on `) && output.includes(' is in use by another process');
}

async function startChild(options: StartOptions, port: number): Promise<ServerProcess> {
  const { args, dataDir, made } = await serveArgs(options, port);
  const child = spawn(process.execPath, [CLI, 'serve', ...args], { env: { ...process.env, ...TEST_LOG_LEVEL, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitHealthy(url, child, 15_000);
  } catch (error) {
    child.kill('SIGKILL');
    await exited(child);
    if (made) removeDir(dataDir);
    const Failure = refusedPort(output, port) ? PortTaken : Error;
    throw new Failure(`${(error as Error).message}\n${output}`);
  }
  return {
    url,
    port,
    dataDir,
    child,
    output: () => output,
    async stop() {
      child.kill('SIGTERM');
      return exited(child);
    },
    async kill() {
      child.kill('SIGKILL');
      await exited(child);
    },
  };
}
