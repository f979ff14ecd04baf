/**
 * The workloads that carry what the tests no longer bound (issue 42: no wall-clock or memory
 * bound in a test): JSON floods and a stalled SSE reader (`limits`), the SIGTERM drain
 * (`drain`), a subscription over many streams (`subscriptions`), all on rill alone, and
 * long-poll delivery from one node to another (`crossnode`, rill on PostgreSQL, two nodes).
 * Each figure's former test bound is beside it in docs/performance.md.
 */
import type { Row } from './report.js';
import type { BenchSettings } from './settings.js';
import { freshDataDir, startTarget, TARGET_LABELS, type Running, type TargetName } from './targets.js';
import { runCrossNode } from './workloads/crossnode.js';
import { runDrain } from './workloads/drain.js';
import { acceptedFlood, framingInSlices, refusedFlood, stalledReader, type StartRill } from './workloads/floods.js';
import { runSubscriptions } from './workloads/subscriptions.js';
import { runStalls } from './workloads/stalls.js';

/** What run.ts lends these workloads: its progress line and its start and stop of servers. */
export interface BoundsContext {
  dataBase: string;
  progress(message: string): void;
  startAll(names: TargetName[], tag: string): Promise<Running[]>;
  stopAll(running: Running[]): Promise<void>;
  selected(names: TargetName[]): TargetName[];
}

const row = (key: string, label: string, unit: string): Row => ({ key, label, unit, better: 'lower', rounds: {} });
const MB = 1e6;

/** Fresh rill processes, each on a fresh data directory, all removed by `done`. */
function rillStarter(ctx: BoundsContext, tag: string): { start: StartRill; done(): Promise<void> } {
  const started: Running[] = [];
  return {
    async start(args) {
      const t = await startTarget('rill', freshDataDir(ctx.dataBase, `${tag}-${started.length}`), args);
      started.push(t);
      return t;
    },
    async done() {
      await ctx.stopAll(started.splice(0));
    },
  };
}

export async function limitsWorkload(s: BenchSettings, rows: Row[], ctx: BoundsContext): Promise<void> {
  if (ctx.selected(['rill']).length === 0) return;
  const f = s.floods;
  const r = {
    idle: row('json-flood-head-idle', `slowest HEAD of the idle server over ${f.idleMs} ms`, 'ms'),
    flood: row('json-flood-head', `slowest HEAD while a refused ${f.refusedElements.toLocaleString('en-US')}-element JSON array is framed`, 'ms'),
    floodRss: row('json-flood-rss', `peak memory added by that refused array (${((2 * f.refusedElements) / 2 ** 20).toFixed(1)} MiB)`, 'MB'),
    accepted: row('json-million-rss', `peak memory added by an accepted ${f.acceptedElements.toLocaleString('en-US')}-element JSON array`, 'MB'),
    framing: row('json-frame-head', `slowest HEAD while a ${((320 * f.paddedElements) / MB).toFixed(1)} MB padded JSON body is framed`, 'ms'),
    storing: row('json-frame-head-storing', `slowest HEAD while its ${((2 * f.paddedElements) / 1000).toFixed(0)} KB are appended as binary for as long`, 'ms'),
    stalled: row('sse-stalled-rss', `resident memory gained while ${f.stalledMiB} MiB pass a stalled SSE reader`, 'MB'),
  };
  rows.push(...Object.values(r));
  const rill = rillStarter(ctx, 'limits');
  try {
    for (let round = 0; round < s.rounds; round++) {
      const refused = await refusedFlood(rill.start, f);
      const acceptedGrowth = await acceptedFlood(rill.start, f);
      const framing = await framingInSlices(rill.start, f);
      const stalledGrowth = await stalledReader(rill.start, f);
      await rill.done();
      ctx.progress(
        `limits: round ${round + 1}/${s.rounds}: slowest HEAD idle ${refused.idleHeadMs.toFixed(1)} ms, refused flood ${refused.headMs.toFixed(1)} ms (+${(refused.peakGrowthBytes / MB).toFixed(0)} MB peak), accepted +${(acceptedGrowth / MB).toFixed(0)} MB peak; framing ${framing.framingHeadMs.toFixed(1)} ms against storing ${framing.storingHeadMs.toFixed(1)} ms; stalled SSE reader +${(stalledGrowth / MB).toFixed(0)} MB`,
      );
      const push = (x: Row, value: number) => (x.rounds.rill ??= []).push(value);
      push(r.idle, refused.idleHeadMs);
      push(r.flood, refused.headMs);
      push(r.floodRss, refused.peakGrowthBytes / MB);
      push(r.accepted, acceptedGrowth / MB);
      push(r.framing, framing.framingHeadMs);
      push(r.storing, framing.storingHeadMs);
      push(r.stalled, stalledGrowth / MB);
    }
  } finally {
    await rill.done();
  }
}

export async function drainWorkload(s: BenchSettings, rows: Row[], ctx: BoundsContext): Promise<void> {
  if (ctx.selected(['rill']).length === 0) return;
  const r = {
    live: row('drain-live-end', 'SIGTERM to live readers (long-poll, SSE) ended', 'ms'),
    exit: row('drain-exit', 'last in-flight write answered to exit, an idle keep-alive connection open', 'ms'),
    stalled: row('drain-stalled-exit', 'SIGTERM to exit past stalled clients, --drain-timeout 1s', 'ms'),
    delayed: row('drain-delay-exit', 'SIGTERM to exit, idle, --shutdown-delay 1s', 'ms'),
  };
  rows.push(...Object.values(r));
  const rill = rillStarter(ctx, 'drain');
  try {
    for (let round = 0; round < s.rounds; round++) {
      const d = await runDrain(rill.start);
      await rill.done();
      ctx.progress(`drain: round ${round + 1}/${s.rounds}: live readers ended after ${d.liveEndedMs.toFixed(0)} ms, exit ${d.exitAfterWorkMs.toFixed(0)} ms after the last write; past stalled clients ${d.stalledExitMs.toFixed(0)} ms; after the delay ${d.delayedExitMs.toFixed(0)} ms`);
      (r.live.rounds.rill ??= []).push(d.liveEndedMs);
      (r.exit.rounds.rill ??= []).push(d.exitAfterWorkMs);
      (r.stalled.rounds.rill ??= []).push(d.stalledExitMs);
      (r.delayed.rounds.rill ??= []).push(d.delayedExitMs);
    }
  } finally {
    await rill.done();
  }
}

export async function subscriptionsWorkload(s: BenchSettings, rows: Row[], ctx: BoundsContext): Promise<void> {
  if (ctx.selected(['rill']).length === 0) return;
  const spec = s.subscriptions;
  const what = `pull-wake subscription over ${spec.streams.toLocaleString('en-US')} streams`;
  const r = {
    link: row('subs-link', `${what}: created (every stream linked)`, 'ms'),
    idle: row('subs-idle-cpu', `${what}: server CPU share, idle`, 'share of a core'),
    trickle: row('subs-trickle-cpu', `${what}: server CPU share, ${spec.tricklePerS} appends/s and a worker`, 'share of a core'),
    rss: row('subs-rss-growth', `${what}: resident memory gained, subscription and trickle`, 'MB'),
  };
  rows.push(...Object.values(r));
  // One round: each needs its streams created first, which takes longer than what it measures.
  const rill = rillStarter(ctx, 'subscriptions');
  try {
    const t = await rill.start(['--subscription-sweep', '500ms']);
    ctx.progress(`subscriptions: creating ${spec.streams} streams`);
    const x = await runSubscriptions(t, spec);
    ctx.progress(`subscriptions: linked in ${x.linkMs.toFixed(0)} ms, CPU ${x.idleCpuShare.toFixed(3)} idle and ${x.trickleCpuShare.toFixed(3)} under the trickle, +${(x.rssGrowthBytes / MB).toFixed(0)} MB`);
    r.link.rounds.rill = [x.linkMs];
    r.idle.rounds.rill = [x.idleCpuShare];
    r.trickle.rounds.rill = [x.trickleCpuShare];
    r.rss.rounds.rill = [x.rssGrowthBytes / MB];
  } finally {
    await rill.done();
  }
}

export async function crossNodeWorkload(s: BenchSettings, rows: Row[], ctx: BoundsContext): Promise<void> {
  const p50 = row('longpoll-cross-p50', `long-poll on one node, append on the other: delivery p50 (${s.crossNodeDeliveries} appends)`, 'ms');
  const p99 = row('longpoll-cross-p99', `long-poll on one node, append on the other: delivery p99 (${s.crossNodeDeliveries} appends)`, 'ms');
  const running = await ctx.startAll(ctx.selected(['rill-pg-2']), 'crossnode');
  if (running.length > 0) rows.push(p50, p99);
  try {
    for (let round = 0; round < s.rounds; round++) {
      for (const t of running) {
        const x = await runCrossNode(t, s.crossNodeDeliveries, `crossnode-${round}`);
        ctx.progress(`cross-node long-poll: round ${round + 1}/${s.rounds} ${TARGET_LABELS[t.name]}: p50 ${x.p50Ms.toFixed(1)} ms p99 ${x.p99Ms.toFixed(1)} ms`);
        (p50.rounds[t.name] ??= []).push(x.p50Ms);
        (p99.rounds[t.name] ??= []).push(x.p99Ms);
      }
    }
  } finally {
    await ctx.stopAll(running);
  }
}

/**
 * The longest /healthz wait while a server stores large appends, and while it serves a large
 * catch-up read (issue 40): rill on SQLite, on PostgreSQL and in memory beside the
 * reference in file and memory modes, each on a fresh server per round.
 */
export async function stallsWorkload(s: BenchSettings, rows: Row[], ctx: BoundsContext): Promise<void> {
  const mib = (s.stalls.bytes / 1024 / 1024).toFixed(0);
  const append = row('stall-append', `longest /healthz wait during ${s.stalls.appends} appends of ${mib} MiB`, 'ms');
  const read = row('stall-read', `longest /healthz wait during a ${mib} MiB catch-up read`, 'ms');
  const whole = `${s.stalls.appends} appends of ${mib} MiB`;
  const catchUpWait = row('stall-catchup', `longest /healthz wait during a catch-up of ${whole} at the default window`, 'ms');
  const catchUpTime = row('stall-catchup-time', `time of that catch-up`, 'ms');
  rows.push(append, read, catchUpWait, catchUpTime);
  for (let round = 0; round < s.rounds; round++) {
    const running = await ctx.startAll(ctx.selected(['rill', 'rill-pg', 'rill-memory', 'ref-memory', 'ref-file']), `stalls-${round}`);
    try {
      for (const t of round % 2 === 0 ? running : [...running].reverse()) {
        const r = await runStalls(t.url, `stall-${round}`, s.stalls);
        ctx.progress(
          `stalls: round ${round + 1}/${s.rounds} ${TARGET_LABELS[t.name]}: longest /healthz ${r.appendWaitMs.toFixed(0)} ms during appends, ${r.readWaitMs.toFixed(0)} ms during the read, ${r.catchUpWaitMs.toFixed(0)} ms during the catch-up (${r.catchUpMs.toFixed(0)} ms)`,
        );
        (append.rounds[t.name] ??= []).push(r.appendWaitMs);
        (read.rounds[t.name] ??= []).push(r.readWaitMs);
        (catchUpWait.rounds[t.name] ??= []).push(r.catchUpWaitMs);
        (catchUpTime.rounds[t.name] ??= []).push(r.catchUpMs);
      }
    } finally {
      await ctx.stopAll(running);
    }
  }
}
