/**
 * `node .bench/build/sched.js`: where the machine's time goes under the appends load, by
 * process, as the kernel's scheduler counts it (`/proc/PID/task/TID/schedstat`): each
 * process's CPU and its time spent runnable but waiting for a core, per append, and the
 * cores busy in all. On two cores a server, its database and the load generator compete:
 * issue 41 found with it that rill on PostgreSQL leaves a fifth of the machine idle where
 * SQLite keeps it busy, and needs a third more CPU an append (docs/performance.md).
 * Linux only.
 *
 *   node .bench/build/sched.js [--target rill|rill-pg] [--producers] [--streams 500] [--seconds 6] [--top 8] [--rill path/to/dist/bin/rill.js]
 */
import { readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { resolve } from 'node:path';
import { loadOptions } from './load-options.js';
import { freshDataDir, removeDataDir, startTarget, stopBenchPostgres, useRillBuild, type TargetName } from './targets.js';
import { prepareStreams, runAppends, type AppendSpec } from './workloads/appends.js';

const CONNECTIONS = 50;
const START_TIMEOUT_MS = 60_000;

/** Nanoseconds on a core and waiting for one, summed over a process's threads. */
interface Sched {
  runNs: number;
  waitNs: number;
}

function options() {
  const o = loadOptions(6, { target: { type: 'string', default: 'rill-pg' } });
  const target = o.values.target;
  if (target !== 'rill' && target !== 'rill-pg') throw new Error('--target is rill or rill-pg');
  return { ...o, target: target as TargetName };
}

/** Every process's scheduler counts now; processes and threads that end meanwhile are skipped. */
function schedOfAll(): Map<number, Sched> {
  const all = new Map<number, Sched>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    const sum: Sched = { runNs: 0, waitNs: 0 };
    try {
      for (const tid of readdirSync(`/proc/${pid}/task`)) {
        const [runNs, waitNs] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').trim().split(' ').map(Number);
        sum.runNs += runNs!;
        sum.waitNs += waitNs!;
      }
    } catch {
      continue;
    }
    all.set(pid, sum);
  }
  return all;
}

/** A process's name and the start of its command line, to tell a PostgreSQL backend from the load generator. */
function describe(pid: number): string {
  if (pid === process.pid) return 'this process (the load generator)';
  try {
    const command = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/[\0\s]+/g, ' ').trim();
    // Kernel threads have no command line: their name, as ps shows it.
    return command === '' ? `[${readFileSync(`/proc/${pid}/comm`, 'utf8').trim()}]` : command.slice(0, 70);
  } catch {
    return `pid ${pid} (ended)`;
  }
}

function report(before: Map<number, Sched>, after: Map<number, Sched>, elapsedNs: number, appends: number, top: number): string {
  const used: Array<{ pid: number; runNs: number; waitNs: number }> = [];
  for (const [pid, end] of after) {
    const start = before.get(pid);
    // A thread that ended in the window takes its counts with it: never below nothing.
    if (start) used.push({ pid, runNs: Math.max(0, end.runNs - start.runNs), waitNs: Math.max(0, end.waitNs - start.waitNs) });
  }
  used.sort((a, b) => b.runNs - a.runNs);
  const perAppendUs = (ns: number) => (ns / 1000 / appends).toFixed(1);
  const cores = (ns: number) => (ns / elapsedNs).toFixed(2);
  const lines = ['| process | CPU µs an append | waiting for a core, µs an append | cores busy |', '|---|---:|---:|---:|'];
  for (const u of used.slice(0, top)) lines.push(`| ${describe(u.pid)} | ${perAppendUs(u.runNs)} | ${perAppendUs(u.waitNs)} | ${cores(u.runNs)} |`);
  const run = used.reduce((sum, u) => sum + u.runNs, 0);
  const wait = used.reduce((sum, u) => sum + u.waitNs, 0);
  lines.push(`| all processes | ${perAppendUs(run)} | ${perAppendUs(wait)} | ${cores(run)} |`);
  return lines.join('\n') + '\n';
}

async function main(): Promise<void> {
  const o = options();
  if (o.rill !== undefined) useRillBuild(resolve(o.rill));
  const dataDir = o.target === 'rill' ? freshDataDir(tmpdir(), `rill-sched-${process.pid}`) : null;
  const target = await startTarget(o.target, dataDir, [], START_TIMEOUT_MS);
  try {
    const spec: AppendSpec = { streams: o.streams, connections: CONNECTIONS, durationS: o.seconds, producers: o.producers, prefix: 'sched' };
    await prepareStreams(target.url, spec);
    await runAppends(target.url, spec);
    const before = schedOfAll();
    const startNs = process.hrtime.bigint();
    const result = await runAppends(target.url, spec);
    const elapsedNs = Number(process.hrtime.bigint() - startNs);
    const after = schedOfAll();
    if (result.non2xx > 0 || result.errors > 0) throw new Error(`${result.non2xx} answers not 2xx and ${result.errors} errors`);
    process.stdout.write(
      `${o.target}, ${o.streams} streams, ${o.producers ? 'producer' : 'plain'} appends, ${o.seconds} s counted after ${o.seconds} s of warm-up: ` +
        `${Math.round(result.appendsPerS).toLocaleString('en-US')} appends/s\n\n${report(before, after, elapsedNs, result.requests, o.top)}`,
    );
  } finally {
    await target.stop();
    if (dataDir) removeDataDir(dataDir);
    await stopBenchPostgres();
  }
}

await main();
