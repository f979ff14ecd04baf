/**
 * `node .bench/build/pg-statements.js`: where rill on PostgreSQL spends the database's
 * time, statement by statement. One node on the bench's PostgreSQL server, which loads
 * pg_stat_statements for this (with planning times); the appends workload's load
 * (autocannon, 50 connections, 100-byte appends spread over the streams, or one producer
 * per connection with `--producers`), once to warm up and once counted. Prints the
 * appends per second, the CPU per append of the node and of PostgreSQL's processes, and
 * the statements with the most execution time: per append, per call, calls and plans.
 * Execution time leaves out a statement's parse and bind (where PostgreSQL reads its
 * parameters) and the commit's flush; the CPU figures hold everything. Issue 41 found
 * with it that the guard and the loads read every stream row (docs/performance.md).
 *
 *   node .bench/build/pg-statements.js [--producers] [--streams 500] [--seconds 8] [--top 8] [--rill path/to/dist/bin/rill.js]
 */
import { resolve } from 'node:path';
import { loadOptions } from './load-options.js';
import { adminClient, cpuSecondsOf, keepStatementStats, startTarget, stopBenchPostgres, useRillBuild } from './targets.js';
import { prepareStreams, runAppends, type AppendSpec } from './workloads/appends.js';

interface StatementRow {
  calls: string;
  total_exec_time: number;
  plans: string;
  query: string;
}

const CONNECTIONS = 50;
const START_TIMEOUT_MS = 60_000;

async function main(): Promise<void> {
  const o = loadOptions(8);
  if (o.rill !== undefined) useRillBuild(resolve(o.rill));
  keepStatementStats();
  const target = await startTarget('rill-pg', null, [], START_TIMEOUT_MS);
  try {
    const admin = await adminClient();
    const spec: AppendSpec = { streams: o.streams, connections: CONNECTIONS, durationS: o.seconds, producers: o.producers, prefix: 'statements' };
    await prepareStreams(target.url, spec);
    await runAppends(target.url, spec);
    await admin.query('SELECT pg_stat_statements_reset()');
    const [allBefore, nodeBefore] = [target.cpuSeconds(), cpuSecondsOf(target.pid)];
    const result = await runAppends(target.url, spec);
    const [all, node] = [target.cpuSeconds() - allBefore, cpuSecondsOf(target.pid) - nodeBefore];
    if (result.non2xx > 0 || result.errors > 0) throw new Error(`${result.non2xx} answers not 2xx and ${result.errors} errors`);
    const appends = result.requests;
    const perAppendUs = (seconds: number) => ((seconds * 1e6) / appends).toFixed(1);
    const { rows } = await admin.query<StatementRow>(
      'SELECT calls, total_exec_time, plans, query FROM pg_stat_statements WHERE calls > 1 ORDER BY total_exec_time DESC LIMIT $1',
      [o.top],
    );
    process.stdout.write(
      `${o.streams} streams, ${o.producers ? 'producer' : 'plain'} appends, ${o.seconds} s counted after ${o.seconds} s of warm-up: ` +
        `${Math.round(result.appendsPerS).toLocaleString('en-US')} appends/s; CPU per append: node ${perAppendUs(node)} µs, PostgreSQL ${perAppendUs(all - node)} µs\n\n` +
        '| execution µs per append | µs per call | calls | plans | statement |\n|---:|---:|---:|---:|---|\n',
    );
    for (const row of rows) {
      const ms = row.total_exec_time;
      const text = row.query.replace(/\s+/g, ' ').slice(0, 120);
      process.stdout.write(`| ${((ms * 1000) / appends).toFixed(2)} | ${((ms * 1000) / Number(row.calls)).toFixed(1)} | ${row.calls} | ${row.plans} | \`${text}\` |\n`);
    }
  } finally {
    await target.stop();
    await stopBenchPostgres();
  }
}

await main();
