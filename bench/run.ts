/**
 * `npm run bench`: rill against the Durable Streams reference server (in memory and on
 * files) and a bare node:http floor, same client and load, in turn, on 127.0.0.1.
 * Prints progress on stderr, one Markdown table and the target checks on stdout, and
 * writes everything as JSON under .bench/.
 *
 *   node .bench/build/run.js [--quick] [--rounds N] [--only appends,producers,rate,sse,longpoll,catchup,streams]
 *                            [--out FILE] [--data DIR] [--streams 1,500,10000] [--duration S]
 *                            [--rill path/to/dist/cli/main.js] [--cpu-prof]
 *
 * `--cpu-prof` writes rill's CPU profiles to .bench/profiles/; `node .bench/build/profile.js
 * FILE` prints where the time went.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { checkTargets, renderChecks, renderTable, type Row } from './report.js';
import { FULL, QUICK, WORKLOADS, type BenchSettings, type WorkloadName } from './settings.js';
import { freshDataDir, needsDataDir, profileRillInto, removeDataDir, startTarget, TARGET_LABELS, useRillBuild, type Running, type TargetName } from './targets.js';
import { prepareStreams, runAppends, type AppendSpec } from './workloads/appends.js';
import { prepareCatchUp, runCatchUp } from './workloads/catchup.js';
import { createManyStreams, PROBE_STREAM, restartToFirstRead, settledRss } from './workloads/memory.js';
import { prepareLongPoll, runLongPoll } from './workloads/longpoll.js';
import { prepareSse, runSse } from './workloads/sse.js';

const ROOT = resolve(import.meta.dirname, '../..');
/**
 * Appends also run on rill without durability (the gap to `rill` is what storage costs),
 * on the durable floor (the least any durable server can cost here) and on the SQLite
 * floor (the least a durable server on SQLite can cost).
 */
const APPEND_TARGETS: TargetName[] = ['rill', 'rill-memory', 'ref-memory', 'ref-file', 'floor', 'durable-floor', 'sqlite-floor'];
/** Servers that must answer every append; another server's refusals are noted and not counted. */
const MUST_ANSWER: TargetName[] = ['rill', 'rill-memory', 'durable-floor', 'sqlite-floor'];
const STORES: TargetName[] = ['rill', 'ref-memory', 'ref-file'];

function progress(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

/** Data directories of the servers under test; on the repository's disk, not tmpfs. */
let DATA_BASE = join(ROOT, '.bench/data');

async function startAll(names: TargetName[], tag: string): Promise<Running[]> {
  const running: Running[] = [];
  for (const name of names) running.push(await startTarget(name, needsDataDir(name) ? freshDataDir(DATA_BASE, `${tag}-${name}`) : null));
  return running;
}

async function stopAll(running: Running[]): Promise<void> {
  for (const target of running) {
    await target.stop();
    removeDataDir(target.dataDir);
  }
}

/** Each round visits every server, in an order that rotates, so drifting load hits all alike. */
function roundOrder<T>(items: T[], round: number): T[] {
  const k = round % items.length;
  return [...items.slice(k), ...items.slice(0, k)];
}

function push(row: Row, target: TargetName, value: number): void {
  (row.rounds[target] ??= []).push(value);
}

interface RequestCosts {
  serverUs: number;
  clientUs: number;
  /** Bytes the server wrote to storage. */
  writtenBytes: number;
}

/** CPU time used from now on by a server and by this process, and the server's writes, per request answered. */
function costMeter(t: Running): { perRequest(requests: number): RequestCosts } {
  const server0 = t.cpuSeconds();
  const written0 = t.writtenBytes();
  const client0 = process.cpuUsage();
  return {
    perRequest(requests) {
      const client = process.cpuUsage(client0);
      const n = Math.max(1, requests);
      return {
        serverUs: ((t.cpuSeconds() - server0) * 1e6) / n,
        clientUs: (client.user + client.system) / n,
        writtenBytes: (t.writtenBytes() - written0) / n,
      };
    },
  };
}

/** One append workload: as fast as answered, with producers, or paced at a fixed rate. */
interface AppendLoad {
  streams: number;
  producers: boolean;
  ratePerS?: number;
}

function appendKey(load: AppendLoad): { key: string; what: string } {
  const streamsText = `${load.streams} stream${load.streams === 1 ? '' : 's'}`;
  if (load.producers) return { key: `producers-${load.streams}`, what: `producer appends, ${streamsText}` };
  if (load.ratePerS !== undefined) return { key: `rate-${load.streams}`, what: `appends at ${load.ratePerS.toLocaleString('en-US')}/s, ${streamsText}` };
  return { key: `appends-${load.streams}`, what: `appends, ${streamsText}` };
}

async function appendWorkload(s: BenchSettings, rows: Row[], load: AppendLoad): Promise<void> {
  const { key, what } = appendKey(load);
  const spec: AppendSpec = { streams: load.streams, connections: s.connections, durationS: s.appendDurationS, producers: load.producers, prefix: key, ratePerS: load.ratePerS };
  const rate: Row = { key, label: what, unit: 'appends/s', better: 'higher', rounds: {} };
  const p50: Row = { key: `${key}-p50`, label: `${what} p50`, unit: 'ms', better: 'lower', rounds: {} };
  const p99: Row = { key: `${key}-p99`, label: `${what} p99`, unit: 'ms', better: 'lower', rounds: {} };
  const failures: Row = { key: `${key}-failed`, label: `${what}, refused or failed (not counted)`, unit: 'requests', better: 'lower', rounds: {} };
  // CPU per request, of the server and of the load generator (this process): on two
  // shared cores the rate is bound by their sum, so these say where a round's time went.
  const serverCpu: Row = { key: `${key}-cpu`, label: `${what}, server CPU per request`, unit: 'µs', better: 'lower', rounds: {} };
  const clientCpu: Row = { key: `${key}-client-cpu`, label: `${what}, load generator CPU per request`, unit: 'µs', better: 'lower', rounds: {} };
  // What an append costs the disk: the page writes behind the 100 bytes, which grow with
  // the stream count when each stream's index entries land on pages of their own.
  const written: Row = { key: `${key}-written`, label: `${what}, bytes written to storage per request`, unit: 'B', better: 'lower', rounds: {} };
  rows.push(rate, p50, p99, serverCpu, clientCpu, written);
  // The file-backed reference does not reach the fixed rate: its latency there would be its queue's.
  const targets = load.ratePerS === undefined ? APPEND_TARGETS : APPEND_TARGETS.filter((t) => t !== 'ref-file');
  // Paced, a round's figures drift less with the machine's speed; three rounds do.
  const rounds = load.ratePerS === undefined ? s.appendRounds : s.rounds;
  const running = await startAll(targets, key);
  try {
    for (const t of running) {
      progress(`${what}: preparing ${TARGET_LABELS[t.name]}`);
      await prepareStreams(t.url, spec);
      if (s.warmupS > 0) await runAppends(t.url, { ...spec, durationS: s.warmupS });
    }
    for (let round = 0; round < rounds; round++) {
      for (const t of roundOrder(running, round)) {
        const meter = costMeter(t);
        const r = await runAppends(t.url, spec);
        const used = meter.perRequest(r.requests);
        progress(`${what}: round ${round + 1}/${rounds} ${TARGET_LABELS[t.name]}: ${Math.round(r.appendsPerS)}/s p50 ${r.p50Ms} ms p99 ${r.p99Ms} ms, CPU per request ${used.serverUs.toFixed(0)} µs server, ${used.clientUs.toFixed(0)} µs load generator, ${used.writtenBytes.toFixed(0)} B written${r.non2xx + r.errors > 0 ? ` (${r.non2xx} non-2xx, ${r.errors} errors)` : ''}`);
        if (r.non2xx > 0 && MUST_ANSWER.includes(t.name)) throw new Error(`${TARGET_LABELS[t.name]} answered ${r.non2xx} appends with a non-2xx status`);
        if (r.non2xx + r.errors > 0) push(failures, t.name, r.non2xx + r.errors);
        push(rate, t.name, r.appendsPerS);
        push(p50, t.name, r.p50Ms);
        push(p99, t.name, r.p99Ms);
        push(serverCpu, t.name, used.serverUs);
        push(clientCpu, t.name, used.clientUs);
        push(written, t.name, used.writtenBytes);
      }
    }
    if (Object.keys(failures.rounds).length > 0) rows.push(failures);
  } finally {
    await stopAll(running);
  }
}

/**
 * A live workload: rill, the in-memory reference and the floor, each round in turn. The
 * file-backed reference takes seconds per append under these loads, which would make
 * the run unbounded; the targets compare with the in-memory reference. The floor holds
 * its readers and answers them from memory: the least a fan-out costs here.
 */
async function liveWorkload(s: BenchSettings, tag: string, measure: (t: Running, round: number) => Promise<void>): Promise<void> {
  const running = await startAll(['rill', 'ref-memory', 'floor'], tag);
  try {
    for (let round = 0; round < s.rounds; round++) for (const t of roundOrder(running, round)) await measure(t, round);
  } finally {
    await stopAll(running);
  }
}

async function sseWorkload(s: BenchSettings, rows: Row[]): Promise<void> {
  const p50: Row = { key: 'sse-p50', label: `SSE fan-out ${s.sseSubscribers} subscribers p50`, unit: 'ms', better: 'lower', rounds: {} };
  const p99: Row = { key: 'sse-p99', label: `SSE fan-out ${s.sseSubscribers} subscribers p99`, unit: 'ms', better: 'lower', rounds: {} };
  rows.push(p50, p99);
  await liveWorkload(s, 'sse', async (t, round) => {
    const spec = { subscribers: s.sseSubscribers, messagesPerS: s.sseMessagesPerS, durationS: s.sseDurationS, warmupMessages: s.sseWarmupMessages, stream: `sse-${round}` };
    await prepareSse(t.url, spec);
    const r = await runSse(t.url, spec);
    progress(`SSE fan-out: round ${round + 1}/${s.rounds} ${TARGET_LABELS[t.name]}: p50 ${r.p50Ms.toFixed(2)} ms p99 ${r.p99Ms.toFixed(2)} ms, ${r.delivered}/${r.expected} delivered`);
    push(p50, t.name, r.p50Ms);
    push(p99, t.name, r.p99Ms);
  });
}

async function longPollWorkload(s: BenchSettings, rows: Row[]): Promise<void> {
  const what = `long-poll fan-out ${s.longPollReaders} readers, ${s.longPollMessagesPerS} msg/s`;
  const p50: Row = { key: 'longpoll-p50', label: `${what} p50`, unit: 'ms', better: 'lower', rounds: {} };
  const p99: Row = { key: 'longpoll-p99', label: `${what} p99`, unit: 'ms', better: 'lower', rounds: {} };
  const cpu: Row = { key: 'longpoll-cpu', label: `${what}, server CPU per delivery`, unit: 'µs', better: 'lower', rounds: {} };
  rows.push(p50, p99, cpu);
  await liveWorkload(s, 'longpoll', async (t, round) => {
    const spec = { readers: s.longPollReaders, messagesPerS: s.longPollMessagesPerS, durationS: s.sseDurationS, warmupMessages: s.sseWarmupMessages, stream: `longpoll-${round}` };
    await prepareLongPoll(t.url, spec);
    const r = await runLongPoll(t.url, spec, () => t.cpuSeconds());
    progress(`long-poll fan-out: round ${round + 1}/${s.rounds} ${TARGET_LABELS[t.name]}: p50 ${r.p50Ms.toFixed(2)} ms p99 ${r.p99Ms.toFixed(2)} ms, ${r.cpuUsPerDelivery.toFixed(0)} µs CPU per delivery, ${r.delivered}/${r.expected} delivered${r.failures > 0 ? `, ${r.failures} failed` : ''}`);
    if (r.failures > 0 && t.name === 'rill') throw new Error(`rill failed ${r.failures} long-poll reads`);
    push(p50, t.name, r.p50Ms);
    push(p99, t.name, r.p99Ms);
    push(cpu, t.name, r.cpuUsPerDelivery);
  });
}

async function catchUpWorkload(s: BenchSettings, rows: Row[]): Promise<void> {
  const mb = (s.catchUpBytes / 1024 / 1024).toFixed(s.catchUpBytes < 1024 * 1024 ? 2 : 0);
  const bytes: Row = { key: 'catchup-bytes', label: `catch-up ${mb} MiB stream`, unit: 'MB/s', better: 'higher', rounds: {} };
  const json: Row = { key: 'catchup-json', label: `catch-up JSON ${s.catchUpJsonMessages.toLocaleString('en-US')} messages`, unit: 'messages/s', better: 'higher', rounds: {} };
  rows.push(bytes, json);
  const spec = { bytes: s.catchUpBytes, jsonMessages: s.catchUpJsonMessages };
  const running = await startAll(STORES, 'catchup');
  try {
    for (const t of running) {
      progress(`catch-up: writing ${mb} MiB and ${spec.jsonMessages} JSON messages to ${TARGET_LABELS[t.name]}`);
      await prepareCatchUp(t.url, spec);
    }
    for (let round = 0; round < s.rounds; round++) {
      for (const t of roundOrder(running, round)) {
        const r = await runCatchUp(t.url, spec);
        progress(`catch-up: round ${round + 1}/${s.rounds} ${TARGET_LABELS[t.name]}: ${r.bytesMBPerS.toFixed(0)} MB/s bytes, ${Math.round(r.jsonMessagesPerS)} JSON messages/s`);
        push(bytes, t.name, r.bytesMBPerS);
        push(json, t.name, r.jsonMessagesPerS);
      }
    }
  } finally {
    await stopAll(running);
  }
}

async function manyStreamsWorkload(s: BenchSettings, rows: Row[]): Promise<void> {
  const count = s.manyStreams.toLocaleString('en-US');
  const idle: Row = { key: 'streams-idle-rss', label: 'resident memory, empty', unit: 'MB', better: 'lower', rounds: {} };
  const rss: Row = { key: 'streams-rss', label: `resident memory, ${count} streams`, unit: 'MB', better: 'lower', rounds: {} };
  const restart: Row = { key: 'streams-restart', label: `restart to first read, ${count} streams`, unit: 'ms', better: 'lower', rounds: {} };
  const created: Row = { key: 'streams-created', label: 'streams created (a refused create is not retried)', unit: 'streams', better: 'higher', rounds: {} };
  rows.push(created, idle, rss, restart);
  for (const name of STORES) {
    let [t] = await startAll([name], 'streams');
    try {
      push(idle, name, (await settledRss(t!, s.settleMs)) / 1e6);
      progress(`many streams: creating ${count} streams on ${TARGET_LABELS[name]}`);
      const made = await createManyStreams(t!.url, { streams: s.manyStreams, connections: s.connections });
      if (made.created !== s.manyStreams) progress(`many streams: ${TARGET_LABELS[name]} created ${made.created} of ${s.manyStreams} (${made.non2xx} non-2xx, ${made.errors} errors)`);
      if (made.created < s.manyStreams && name === 'rill') throw new Error(`rill created only ${made.created} of ${s.manyStreams} streams`);
      push(created, name, made.created);
      push(rss, name, (await settledRss(t!, s.settleMs)) / 1e6);
      progress(`many streams: ${TARGET_LABELS[name]} holds ${count} streams in ${(rss.rounds[name]![0]!).toFixed(0)} MB`);
      if (t!.dataDir === null) continue;
      for (let round = 0; round < s.restartRounds; round++) {
        await t!.stop();
        const restarted = await restartToFirstRead(name, t!.dataDir!, PROBE_STREAM);
        t = restarted.target;
        progress(`many streams: ${TARGET_LABELS[name]} restart ${round + 1}/${s.restartRounds}: first read after ${restarted.ms.toFixed(0)} ms`);
        push(restart, name, restarted.ms);
      }
    } finally {
      await stopAll([t!]);
    }
  }
}

function machine() {
  return { cores: cpus().length, cpu: cpus()[0]?.model ?? 'unknown', node: process.version, platform: `${process.platform} ${process.arch}` };
}

const USAGE = `npm run bench -- [options]
  --quick            small settings: the harness end to end in seconds
  --only LIST        workloads, comma-separated: ${WORKLOADS.join(', ')}
  --streams LIST     stream counts for the append workload (default 1,500,10000)
  --rounds N         rounds per figure (the median is reported)
  --duration S       seconds per append, SSE and long-poll run
  --rill PATH        another rill build's dist/cli/main.js, measured in place of this one
  --cpu-prof         write rill's CPU profiles to .bench/profiles/
  --data DIR         where the servers keep their data (default .bench/data)
  --out FILE         results JSON (default .bench/results-<time>.json and .bench/latest.json)
`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      help: { type: 'boolean', short: 'h' },
      quick: { type: 'boolean' },
      rounds: { type: 'string' },
      only: { type: 'string' },
      out: { type: 'string' },
      data: { type: 'string' },
      streams: { type: 'string' },
      duration: { type: 'string' },
      rill: { type: 'string' },
      'cpu-prof': { type: 'boolean' },
    },
  });
  if (values.help) return void process.stdout.write(USAGE);
  const s: BenchSettings = { ...(values.quick ? QUICK : FULL) };
  if (values.rounds) s.rounds = s.appendRounds = Number(values.rounds);
  if (values.data) DATA_BASE = resolve(values.data);
  if (values.rill) useRillBuild(values.rill);
  if (values['cpu-prof']) profileRillInto(join(ROOT, '.bench/profiles'));
  if (values.streams) s.streamCounts = values.streams.split(',').map(Number);
  if (values.duration) s.appendDurationS = s.sseDurationS = Number(values.duration);
  const only = new Set((values.only?.split(',') ?? [...WORKLOADS]) as WorkloadName[]);
  const loadBefore = loadavg();
  const startedAt = new Date().toISOString();
  progress(`machine: ${machine().cores} cores, Node ${process.version}, load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')}`);
  const rows: Row[] = [];
  const runs: Array<[WorkloadName, () => Promise<void>]> = [
    ...s.streamCounts.map((n): [WorkloadName, () => Promise<void>] => ['appends', () => appendWorkload(s, rows, { streams: n, producers: false })]),
    ['producers', () => appendWorkload(s, rows, { streams: s.producerStreams, producers: true })],
    ['rate', () => appendWorkload(s, rows, { streams: s.producerStreams, producers: false, ratePerS: s.fixedRatePerS })],
    ['sse', () => sseWorkload(s, rows)],
    ['longpoll', () => longPollWorkload(s, rows)],
    ['catchup', () => catchUpWorkload(s, rows)],
    ['streams', () => manyStreamsWorkload(s, rows)],
  ];
  // A workload that fails is reported and the others still run, so that one server's
  // failure late in a long run does not lose what was measured before it.
  const failures: string[] = [];
  for (const [name, run] of runs) {
    if (!only.has(name)) continue;
    try {
      await run();
    } catch (error) {
      failures.push(`${name}: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`);
      progress(`${name} failed: ${failures[failures.length - 1]}`);
    }
  }
  const loadAfter = loadavg();
  const checks = checkTargets(rows, s.streamCounts[1] ?? s.streamCounts[0]!, s.streamCounts[2] ?? NaN);
  const table = renderTable(rows);
  process.stdout.write(`\n${table}\n\nTargets (issue 7):\n${renderChecks(checks)}\n\nload average before ${loadBefore.map((l) => l.toFixed(2)).join(' ')}, after ${loadAfter.map((l) => l.toFixed(2)).join(' ')}\n`);
  if (failures.length > 0) process.stdout.write(`\nFailed, not measured:\n${failures.map((f) => `- ${f}`).join('\n')}\n`);
  const out = values.out ?? join(ROOT, '.bench', `results-${startedAt.replace(/[:.]/g, '-')}.json`);
  mkdirSync(join(ROOT, '.bench'), { recursive: true });
  const json = JSON.stringify({ startedAt, finishedAt: new Date().toISOString(), machine: machine(), loadBefore, loadAfter, settings: s, rows, checks, table, failures }, null, 2);
  writeFileSync(out, json);
  if (!values.out) writeFileSync(join(ROOT, '.bench', 'latest.json'), json);
  progress(`results written to ${out}`);
  if (failures.length > 0) process.exitCode = 1;
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
