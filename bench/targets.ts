/**
 * The servers under test, each in its own process on 127.0.0.1: rill (SQLite, durable
 * acks), the reference server in memory and on files, and the bare node:http floor; for
 * appends also rill in memory (no storage, no fsync), to show what durability costs, the
 * durable floor (bodies written to a file and fdatasynced, nothing else: the least
 * durability costs here) and the SQLite floor (one INSERT per body, group commit: the
 * least SQLite costs as DESIGN.md has rill use it).
 * Each is started fresh for a workload and stopped by its pid.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { freePort } from './ports.js';

export type TargetName = 'rill' | 'rill-memory' | 'ref-memory' | 'ref-file' | 'floor' | 'durable-floor' | 'sqlite-floor';

export const TARGET_LABELS: Record<TargetName, string> = {
  rill: 'rill (sqlite, durable)',
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
let rillCli = join(ROOT, 'dist/cli/main.js');

export function useRillBuild(cli: string): void {
  rillCli = resolve(cli);
}

/** Node flags for rill's process only; `--cpu-prof` puts its CPU profiles in a folder. */
let rillNodeFlags: string[] = [];

export function profileRillInto(dir: string): void {
  mkdirSync(dir, { recursive: true });
  rillNodeFlags = ['--cpu-prof', `--cpu-prof-dir=${resolve(dir)}`];
}
const SERVERS = join(import.meta.dirname, 'servers');

export interface Running {
  name: TargetName;
  url: string;
  pid: number;
  dataDir: string | null;
  /** Resident set size of the server process, in bytes. */
  rssBytes(): number;
  /** CPU time the server process has used, in seconds. */
  cpuSeconds(): number;
  /** Bytes the server process has caused to be written to storage (/proc/PID/io write_bytes). */
  writtenBytes(): number;
  /** SIGTERM, then SIGKILL if it has not exited after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

function commandFor(name: TargetName, port: number, dataDir: string | null): string[] {
  switch (name) {
    case 'rill':
      return [rillCli, 'serve', '--host', '127.0.0.1', '--port', String(port), '--store', 'sqlite', '--data', dataDir!];
    case 'rill-memory':
      return [rillCli, 'serve', '--host', '127.0.0.1', '--port', String(port), '--store', 'memory'];
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
  return name === 'rill' || name === 'ref-file' || name === 'durable-floor' || name === 'sqlite-floor';
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
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => process.exit(130));
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((r) => child.once('exit', () => r()));
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
  const port = await freePort();
  const flags = name === 'rill' ? rillNodeFlags : [];
  const command = [process.execPath, ...flags, ...commandFor(name, port, dataDir), ...extraArgs];
  const [program, ...args] = [...launcher, ...command];
  const child = spawn(program!, args, {
    env: { ...process.env, RILL_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  child.once('exit', () => live.delete(child));
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const url = `http://127.0.0.1:${port}`;
  await waitListening(url, child, () => output, startTimeoutMs);
  return {
    name,
    url,
    pid: child.pid!,
    dataDir,
    rssBytes: () => rssOf(child.pid!),
    cpuSeconds: () => cpuSecondsOf(child.pid!),
    writtenBytes: () => writtenBytesOf(child.pid!),
    async stop(graceMs = 10_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited(child);
      clearTimeout(timer);
    },
  };
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

/** CPU time the process has used so far, user and system, in seconds (/proc/PID/stat). */
export function cpuSecondsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name, which is in parentheses and may hold spaces.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_S;
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
