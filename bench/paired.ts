/**
 * Two rill builds on PostgreSQL in paired, interleaved rounds of plain appends, or with
 * `--producers` of producer appends (one producer per connection; issue 41):
 *
 *   npm run bench:build && node .bench/build/paired.js [--producers] BEFORE/dist/bin/rill.js AFTER/dist/bin/rill.js [rounds] [seconds] [streams] [rill-pg|rill-pg-2]
 *
 * One node of each build (`rill-pg`; or two, `rill-pg-2`, the load spread over both) on its own database of one bench PostgreSQL server
 * (durable, as in the bench), and rill on SQLite (the first build) for the ratio the issue
 * asks; each round runs the three one after the other, the two PostgreSQL builds in an
 * order that alternates, so that a busy machine's drift hits both alike. Per round: appends/s,
 * and server CPU per append (the node and the PostgreSQL server's processes) with the
 * node's share; at the end the medians, and each build's appends per commit and round
 * trips per append from the totals its node logs at its stop.
 */
import { removeDataDir, freshDataDir, startTarget, stopBenchPostgres, useRillBuild, cpuSecondsOf, type Running, type TargetName } from './targets.js';
import { prepareStreams, runAppends, type AppendSpec } from './workloads/appends.js';
import { tmpdir } from 'node:os';

interface Measured {
  label: string;
  build: string;
  target: Running;
  rates: number[];
  cpuUs: number[];
  nodeCpuUs: number[];
}

const args = process.argv.slice(2);
const producers = args.includes('--producers');
const [before, after, roundsArg, secondsArg, streamsArg, targetArg] = args.filter((arg) => arg !== '--producers');
if (!before || !after) {
  process.stderr.write('usage: node .bench/build/paired.js [--producers] BEFORE/dist/bin/rill.js AFTER/dist/bin/rill.js [rounds=7] [seconds=4] [streams=500] [rill-pg|rill-pg-2]\n');
  process.exit(2);
}
const target: TargetName = targetArg === 'rill-pg-2' ? 'rill-pg-2' : 'rill-pg';
const rounds = Number(roundsArg ?? 7);
const spec: AppendSpec = { streams: Number(streamsArg ?? 500), connections: 50, durationS: Number(secondsArg ?? 4), producers, prefix: producers ? 'paired-producers' : 'paired' };

function log(message: string): void {
  process.stdout.write(`[paired ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function start(label: string, build: string, name: TargetName): Promise<Measured> {
  // Nodes start (and restart) from the build in use when they do.
  useRillBuild(build);
  const target = await startTarget(name, name === 'rill' ? freshDataDir(tmpdir(), `rill-paired-${process.pid}`) : null);
  await prepareStreams(target.url, spec);
  // Restarted, so that the totals a node logs at its stop count appends only.
  await target.restartNodes?.();
  await runAppends(target.urls, { ...spec, durationS: 2 });
  await target.checkpoint?.();
  return { label, build, target, rates: [], cpuUs: [], nodeCpuUs: [] };
}

async function round(m: Measured, index: number): Promise<void> {
  const cpu0 = m.target.cpuSeconds();
  const node0 = cpuSecondsOf(m.target.pid);
  const result = await runAppends(m.target.urls, spec);
  // As the bench does: the pages the round dirtied are written with its appends.
  await m.target.checkpoint?.();
  const n = Math.max(1, result.requests);
  const cpuUs = ((m.target.cpuSeconds() - cpu0) * 1e6) / n;
  // The first node's only (of two, about half).
  const nodeUs = ((cpuSecondsOf(m.target.pid) - node0) * 1e6) / n;
  m.rates.push(result.appendsPerS);
  m.cpuUs.push(cpuUs);
  m.nodeCpuUs.push(nodeUs);
  log(`round ${index + 1} ${m.label}: ${Math.round(result.appendsPerS)}/s p50 ${result.p50Ms} ms, CPU ${cpuUs.toFixed(0)} µs an append (node ${nodeUs.toFixed(0)}), ${result.non2xx} non-2xx, ${result.errors} errors`);
  if (result.non2xx > 0) throw new Error(`${m.label} answered ${result.non2xx} appends with a non-2xx status`);
}

async function summary(m: Measured): Promise<void> {
  let totals = '';
  if (m.target.storeTotals) {
    useRillBuild(m.build);
    await m.target.stop();
    const t = m.target.storeTotals();
    if (t) totals = `, ${(t.commands / t.batches).toFixed(1)} appends a commit, ${(t.roundTrips / t.commands).toFixed(3)} round trips an append`;
    // Of the batches: optimistic, stale guards, beside another (overlapped) and deferred after it, where the build counts them.
    const counts = (['optimistic', 'stale', 'overlapped', 'deferred'] as const).filter((k) => t?.[k] !== undefined).map((k) => `${k} ${t![k]}`);
    if (t && counts.length > 0) totals += ` (of ${t.batches} batches: ${counts.join(', ')})`;
  }
  const rates = m.rates.map((r) => Math.round(r)).join(' / ');
  log(`${m.label}: median ${Math.round(median(m.rates))} appends/s, CPU ${median(m.cpuUs).toFixed(0)} µs (node ${median(m.nodeCpuUs).toFixed(0)})${totals}; rounds ${rates}`);
}

const measured: Measured[] = [];
try {
  measured.push(await start('before', before, target), await start('after', after, target), await start('sqlite', before, 'rill'));
  for (let r = 0; r < rounds; r++) {
    const [a, b, s] = measured as [Measured, Measured, Measured];
    for (const m of r % 2 === 0 ? [a, b, s] : [b, a, s]) await round(m, r);
  }
  for (const m of measured) await summary(m);
  const [a, b, s] = measured.map((m) => median(m.rates)) as [number, number, number];
  // Round by round, the pairs' ratios: on a busy machine a round's rate can move 3x from the
  // next, and the median of each build's rounds can then fall on rounds of different load.
  const pairs = measured[1]!.rates.map((rate, i) => rate / measured[0]!.rates[i]!);
  const won = pairs.filter((ratio) => ratio > 1).length;
  log(`after / before ${(b / a).toFixed(2)}x (medians), ${median(pairs).toFixed(2)}x (median of the rounds' pairs; after faster in ${won} of ${pairs.length}); before / sqlite ${(a / s).toFixed(2)}x; after / sqlite ${(b / s).toFixed(2)}x`);
} finally {
  for (const m of measured) {
    await m.target.stop();
    removeDataDir(m.target.dataDir);
  }
  await stopBenchPostgres();
}
