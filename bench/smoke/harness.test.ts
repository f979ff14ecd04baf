/**
 * The benchmark harness runs end to end on its smallest setting: every server starts,
 * every workload runs, and the results file has a figure for each. It checks that the
 * harness works, never how fast anything is (`npm run bench` measures that).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, expect, test } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const outDir = mkdtempSync(join(tmpdir(), 'rill-bench-smoke-'));

afterAll(() => rmSync(outDir, { recursive: true, force: true }));

test('npm run bench runs end to end on --quick', () => {
  execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.bench.json'], { cwd: ROOT, stdio: 'pipe' });
  const out = join(outDir, 'results.json');
  const stdout = execFileSync(process.execPath, [join(ROOT, '.bench/build/run.js'), '--quick', '--out', out, '--data', join(outDir, 'data')], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], timeout: 240_000 }).toString();
  expect(stdout).toContain('| figure |');
  const results = JSON.parse(readFileSync(out, 'utf8')) as { rows: Array<{ key: string; rounds: Record<string, number[]> }> };
  const keys = results.rows.map((r) => r.key);
  expect(keys).toEqual(expect.arrayContaining(['appends-10', 'appends-10-cpu', 'appends-10-client-cpu', 'producers-20', 'rate-20-p99', 'sse-p99', 'longpoll-p99', 'longpoll-cpu', 'catchup-bytes', 'catchup-json', 'streams-rss', 'streams-restart']));
  // The figures the tests no longer bound (bench/bounds.ts).
  const bounds = ['json-flood-head-idle', 'json-flood-head', 'json-flood-rss', 'json-million-rss', 'json-frame-head', 'json-frame-head-storing', 'sse-stalled-rss'];
  bounds.push('drain-live-end', 'drain-exit', 'drain-stalled-exit', 'drain-delay-exit', 'subs-link', 'subs-idle-cpu', 'subs-trickle-cpu', 'subs-rss-growth', 'longpoll-cross-p50', 'longpoll-cross-p99');
  expect(keys).toEqual(expect.arrayContaining(bounds));
  // Ursula's extensions on rill alone (bench/extensions.ts): each pair of forms and its ratio.
  const extensions = ['records-catchup-offset', 'records-catchup-record', 'records-catchup-ratio', 'records-random'];
  for (const size of [2, 8]) extensions.push(`tx-${size}`, `tx-${size}-single`, `tx-${size}-ratio`);
  expect(keys).toEqual(expect.arrayContaining(extensions));
  for (const key of extensions) expect(results.rows.find((r) => r.key === key)!.rounds.rill?.every((v) => v > 0), key).toBe(true);
  // Figures of rill on PostgreSQL alone: its WAL, round trips and commits per append, and delivery across two nodes
  // (SSE spread over both and all on the node that does not write, long-poll).
  const onPostgresOnly = (key: string) => /-(wal|roundtrips|batch)$/.test(key) || /^sse-(same|cross|away)-/.test(key) || /^longpoll-cross-/.test(key);
  // The cold tier's own figures (its two tiers, its fetches and uploads) are of rill with a cold tier alone.
  const onColdOnly = ['cold-hot-bytes', 'cold-cold-bytes', 'cold-catchup-fetches', 'cold-appends-uploads'];
  for (const row of results.rows) {
    const server = onPostgresOnly(row.key) ? 'rill-pg-2' : onColdOnly.includes(row.key) ? 'rill-cold' : 'rill';
    expect(row.rounds[server]?.length, row.key).toBeGreaterThan(0);
    expect(row.rounds[server]!.every(Number.isFinite), row.key).toBe(true);
  }
  // Appends are also measured on the floors that say what durability and SQLite cost.
  const appends = results.rows.find((r) => r.key === 'appends-10')!;
  for (const floor of ['floor', 'durable-floor', 'sqlite-floor']) expect(appends.rounds[floor]?.every((v) => v > 0), floor).toBe(true);
  // A round at full speed costs the server and the load generator CPU time, counted per request.
  for (const key of ['appends-10-cpu', 'appends-10-client-cpu']) {
    const cpu = results.rows.find((r) => r.key === key)!;
    for (const server of ['rill', 'floor']) expect(cpu.rounds[server]?.every((v) => v > 0), `${key} ${server}`).toBe(true);
  }
  // rill on PostgreSQL, one node and two, in the appends at the middle stream count, the producer appends and SSE fan-out.
  expect(keys).toEqual(expect.arrayContaining(['appends-10-roundtrips', 'appends-10-wal', 'producers-20-roundtrips', 'sse-same-p50', 'sse-cross-p50']));
  for (const key of ['appends-10', 'appends-10-written', 'appends-10-wal', 'appends-10-roundtrips', 'appends-10-batch', 'producers-20', 'producers-20-roundtrips', 'sse-p50']) {
    const row = results.rows.find((r) => r.key === key)!;
    for (const server of ['rill-pg', 'rill-pg-2']) expect(row.rounds[server]?.every((v) => v > 0), `${key} ${server}`).toBe(true);
  }
  expect(stdout).toContain('Targets (rill on PostgreSQL):');
  expect(stdout).toMatch(/fsync=on, synchronous_commit=on/);
  // The bench stopped its PostgreSQL server and removed its data.
  expect(existsSync(join(outDir, 'data', 'postgres'))).toBe(false);
  // The cold tier (issue 38): every figure on rill with a cold tier, those it shares with rill on rill too, and its checks met.
  const cold = ['cold-hot-bytes', 'cold-cold-bytes', 'cold-db-bytes', 'cold-catchup', 'cold-catchup-fetches', 'cold-appends', 'cold-appends-p99', 'cold-appends-uploads'];
  expect(keys).toEqual(expect.arrayContaining(cold));
  // Uploads during a quick round of half a second depend on the machine's speed: they are only counted (finite, above).
  for (const key of cold.filter((k) => k !== 'cold-appends-uploads')) expect(results.rows.find((r) => r.key === key)!.rounds['rill-cold']?.every((v) => v > 0), key).toBe(true);
  expect(stdout).toMatch(/- \[x\] cold tier: hot store of a stream grown to 10x its window/);
  // Long-poll readers got their messages from every server, the floor's included.
  const longPoll = results.rows.find((r) => r.key === 'longpoll-p50')!;
  for (const server of ['rill', 'ref-memory', 'floor']) expect(longPoll.rounds[server]?.every((v) => v > 0), server).toBe(true);
  // SSE readers got their messages from every floor, the durable ones after their flush, and the writer its answers.
  for (const key of ['sse-p50', 'sse-spread-p50', 'sse-spread-writer-p50']) {
    const row = results.rows.find((r) => r.key === key)!;
    for (const server of ['floor', 'durable-floor', 'sqlite-floor']) expect(row.rounds[server]?.every((v) => v > 0), `${key} ${server}`).toBe(true);
  }
}, 300_000);
