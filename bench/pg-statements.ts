/**
 * `node .bench/build/pg-statements.js`: where rill on PostgreSQL spends the database's
 * time, statement by statement. One node on the bench's PostgreSQL server, which loads
 * pg_stat_statements for this (with planning times); the appends workload's load
 * (autocannon, 50 connections, 100-byte appends spread over the streams, or one producer
 * per connection with `--producers`; with `--producers --newcomers` each append from a producer new
 * to its stream), once to warm up and once counted. Prints the
 * appends per second, the CPU per append of the node and of PostgreSQL's processes, and
 * the statements with the most execution time: per append, per call, calls and plans.
 * Execution time leaves out a statement's parse and bind (where PostgreSQL reads its
 * parameters) and the commit's flush; the CPU figures hold everything. Issue 41 found
 * with it that the guard and the loads read every stream row (docs/performance.md).
 *
 *   node .bench/build/pg-statements.js [--producers [--newcomers]] [--streams 500] [--seconds 8] [--top 8] [--rill path/to/dist/bin/rill.js]
 */
import { resolve } from 'node:path';
import pg from 'pg';
import { loadOptions } from './load-options.js';
import { adminClient, benchPostgres, cpuSecondsOf, keepStatementStats, startTarget, stopBenchPostgres, useRillBuild } from './targets.js';
import { prepareStreams, runAppends, type AppendSpec } from './workloads/appends.js';

interface TableRow {
  relname: string;
  ins: string;
  upd: string;
  hot: string;
}

/** Rows inserted and updated in each table, and how many updates were HOT (no index entries made). */
const TABLE_COUNTS = 'SELECT relname, n_tup_ins AS ins, n_tup_upd AS upd, n_tup_hot_upd AS hot FROM pg_stat_user_tables';

/** Backends report their counts at most once a second, when idle: the counted run's, waited for. */
const STATS_REPORTED_MS = 1_500;

interface StatementRow {
  calls: string;
  total_exec_time: number;
  plans: string;
  query: string;
}

const CONNECTIONS = 50;
const START_TIMEOUT_MS = 60_000;

async function main(): Promise<void> {
  const o = loadOptions(8, { newcomers: { type: 'boolean', default: false } });
  const newcomers = o.values.newcomers === true;
  if (o.rill !== undefined) useRillBuild(resolve(o.rill));
  keepStatementStats();
  const target = await startTarget('rill-pg', null, [], START_TIMEOUT_MS);
  try {
    const admin = await adminClient();
    const spec: AppendSpec = { streams: o.streams, connections: CONNECTIONS, durationS: o.seconds, producers: o.producers || newcomers, newcomers, prefix: 'statements' };
    await prepareStreams(target.url, spec);
    await runAppends(target.url, spec);
    await admin.query('SELECT pg_stat_statements_reset()');
    const tables = await rillDatabaseClient(admin);
    await new Promise((r) => setTimeout(r, STATS_REPORTED_MS));
    const tablesBefore = (await tables.query<TableRow>(TABLE_COUNTS)).rows;
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
      `${o.streams} streams, ${newcomers ? 'new producers\'' : o.producers ? 'producer' : 'plain'} appends, ${o.seconds} s counted after ${o.seconds} s of warm-up: ` +
        `${Math.round(result.appendsPerS).toLocaleString('en-US')} appends/s; CPU per append: node ${perAppendUs(node)} µs, PostgreSQL ${perAppendUs(all - node)} µs\n\n` +
        '| execution µs per append | µs per call | calls | plans | statement |\n|---:|---:|---:|---:|---|\n',
    );
    for (const row of rows) {
      const ms = row.total_exec_time;
      const text = row.query.replace(/\s+/g, ' ').slice(0, 120);
      process.stdout.write(`| ${((ms * 1000) / appends).toFixed(2)} | ${((ms * 1000) / Number(row.calls)).toFixed(1)} | ${row.calls} | ${row.plans} | \`${text}\` |\n`);
    }
    await new Promise((r) => setTimeout(r, STATS_REPORTED_MS));
    printTableCounts(tablesBefore, (await tables.query<TableRow>(TABLE_COUNTS)).rows, appends);
    await tables.end();
  } finally {
    await target.stop();
    await stopBenchPostgres();
  }
}

/** A connection to the node's database, whose tables pg_stat_user_tables shows. */
async function rillDatabaseClient(admin: pg.Client): Promise<pg.Client> {
  const { rows } = await admin.query<{ datname: string }>("SELECT datname FROM pg_stat_activity WHERE application_name LIKE 'rill-node%' LIMIT 1");
  if (rows.length === 0) throw new Error('no connection of the rill node found in pg_stat_activity');
  const url = new URL((await benchPostgres()).adminUrl);
  url.pathname = `/${rows[0]!.datname}`;
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  return client;
}

function printTableCounts(before: TableRow[], after: TableRow[], appends: number): void {
  const earlier = new Map(before.map((row) => [row.relname, row]));
  const perAppend = (n: number) => (n / appends).toFixed(3);
  process.stdout.write('\n| table | rows inserted per append | rows updated per append | of them HOT |\n|---|---:|---:|---:|\n');
  for (const row of after) {
    const was = earlier.get(row.relname);
    const since = (key: 'ins' | 'upd' | 'hot') => Number(row[key]) - Number(was?.[key] ?? 0);
    const [ins, upd, hot] = [since('ins'), since('upd'), since('hot')];
    if (ins + upd === 0) continue;
    process.stdout.write(`| ${row.relname} | ${perAppend(ins)} | ${perAppend(upd)} | ${upd > 0 ? `${((100 * hot) / upd).toFixed(0)}%` : '-'} |\n`);
  }
}

await main();
