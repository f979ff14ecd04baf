/**
 * Starts the real `rill` binary (dist/cli/main.js) as a child process on a free port,
 * waits for /healthz, and stops it by pid. Tests talk to it over HTTP only.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort } from '../../bench/ports.js';

export { freePort };

export const CLI = resolve(import.meta.dirname, '../../dist/cli/main.js');

export interface ServerProcess {
  url: string;
  port: number;
  dataDir: string;
  child: ChildProcess;
  /** Everything the server wrote to stdout and stderr. */
  output(): string;
  /** SIGTERM and wait for exit; resolves with the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL and wait for exit. */
  kill(): Promise<void>;
}

export interface StartOptions {
  store?: 'sqlite' | 'memory' | 'postgres';
  /** A PostgreSQL database: the store is then 'postgres' unless given. */
  postgresUrl?: string;
  dataDir?: string;
  port?: number;
  args?: string[];
  env?: Record<string, string>;
}

export function tempDataDir(prefix = 'rill-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

async function waitHealthy(url: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`rill exited with ${child.exitCode} before it was ready`);
    try {
      const res = await fetch(`${url}/healthz`);
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`rill did not become healthy within ${timeoutMs} ms`);
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

async function postgresUrlFor(options: StartOptions, dataDir: string): Promise<string | null> {
  if (options.postgresUrl) return options.postgresUrl;
  if (options.store !== undefined || process.env.RILL_TEST_STORE !== 'postgres') return null;
  let url = databaseOfDir.get(dataDir);
  if (!url) databaseOfDir.set(dataDir, (url = import('./postgres.js').then((m) => m.sharedDatabase())));
  return url;
}

export async function startServer(options: StartOptions = {}): Promise<ServerProcess> {
  const port = options.port ?? (await freePort());
  const dataDir = options.dataDir ?? tempDataDir();
  const postgresUrl = await postgresUrlFor(options, dataDir);
  const store = options.store ?? (postgresUrl ? 'postgres' : 'sqlite');
  const postgres = postgresUrl ? ['--postgres-url', postgresUrl] : [];
  const args = [CLI, 'serve', '--host', '127.0.0.1', '--port', String(port), '--store', store, '--data', dataDir, ...postgres, ...(options.args ?? [])];
  const child = spawn(process.execPath, args, { env: { ...process.env, RILL_LOG_LEVEL: 'warn', ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitHealthy(url, child, 15_000);
  } catch (error) {
    child.kill('SIGKILL');
    throw new Error(`${(error as Error).message}\n${output}`);
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
