/**
 * Results: each row is one figure measured on several servers over several rounds; the
 * table shows the medians and rill's ratio to each other server, and the targets of
 * issue 7 and those of rill on PostgreSQL are checked against those ratios.
 */
import { COLD_HOT_BYTES, COLD_SEGMENT_BYTES } from './s3.js';
import { TARGET_LABELS, type TargetName } from './targets.js';

export interface Row {
  key: string;
  label: string;
  unit: string;
  better: 'higher' | 'lower';
  rounds: Partial<Record<TargetName, number[]>>;
}

export interface Check {
  target: string;
  met: boolean;
  detail: string;
}

const ORDER: TargetName[] = ['rill', 'rill-auth', 'rill-no-metrics', 'rill-no-log', 'rill-cold', 'rill-pg', 'rill-pg-2', 'rill-memory', 'ref-memory', 'ref-file', 'floor', 'durable-floor', 'sqlite-floor'];

export function median(values: number[] | undefined): number {
  if (!values || values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function medianOf(rows: Row[], key: string, target: TargetName): number {
  return median(rows.find((r) => r.key === key)?.rounds[target]);
}

function format(value: number): string {
  if (!Number.isFinite(value)) return '-';
  if (Math.abs(value) >= 1000) return Math.round(value).toLocaleString('en-US');
  if (Math.abs(value) >= 100) return value.toFixed(0);
  if (Math.abs(value) >= 10) return value.toFixed(1);
  return value.toFixed(2);
}

function ratio(a: number, b: number): string {
  return Number.isFinite(a) && Number.isFinite(b) && b !== 0 ? `${(a / b).toFixed(2)}x` : '-';
}

/** A Markdown table: one row per figure, medians per server, then rill's ratios. */
export function renderTable(rows: Row[]): string {
  const header = [
    'figure',
    ...ORDER.map((t) => TARGET_LABELS[t]),
    'rill / ref mem',
    'rill / ref file',
    'rill / rill metrics off',
    'rill / rill access log off',
    'rill / floor',
    'rill memory / ref mem',
    'rill / durable floor',
    'rill / SQLite floor',
    'rill-pg / rill',
    'rill-pg / ref file',
    'rill-pg-2 / rill-pg',
    'auth on / off',
    'cold tier / rill',
  ];
  const lines = [header, header.map(() => '---')];
  for (const row of rows) {
    const m = Object.fromEntries(ORDER.map((t) => [t, median(row.rounds[t])])) as Record<TargetName, number>;
    lines.push([
      `${row.label} (${row.unit})`,
      ...ORDER.map((t) => format(m[t])),
      ratio(m.rill, m['ref-memory']),
      ratio(m.rill, m['ref-file']),
      ratio(m.rill, m['rill-no-metrics']),
      ratio(m.rill, m['rill-no-log']),
      ratio(m.rill, m.floor),
      ratio(m['rill-memory'], m['ref-memory']),
      ratio(m.rill, m['durable-floor']),
      ratio(m.rill, m['sqlite-floor']),
      ratio(m['rill-pg'], m.rill),
      ratio(m['rill-pg'], m['ref-file']),
      ratio(m['rill-pg-2'], m['rill-pg']),
      ratio(m['rill-auth'], m.rill),
      ratio(m['rill-cold'], m.rill),
    ]);
  }
  return lines.map((cells) => `| ${cells.join(' | ')} |`).join('\n');
}

type Op = '>=' | '<' | '<=';

function check(target: string, value: number, limit: number, op: Op, detail: string): Check {
  // A ratio or difference of figures, one of them not measured, is NaN: not measured either.
  if (!Number.isFinite(value)) return { target, met: false, detail: 'not measured in this run' };
  const met = op === '>=' ? value >= limit : op === '<=' ? value <= limit : value < limit;
  return { target, met, detail: `${detail} = ${format(value)} (needs ${op} ${limit})` };
}

/** One server's figure: the rounds of row `key` on `target`. */
export interface Figure {
  key: string;
  target: TargetName;
}

/**
 * Round k of `a` over round k of `b`, for each k. The bench interleaves its rounds, so the two
 * ran side by side in time: how far these spread shows how much one run's ratio of medians
 * says near a target, on a machine whose pace moves between rounds (docs/performance.md).
 * Empty when the two do not have the same number of rounds.
 */
export function roundRatios(rows: Row[], a: Figure, b: Figure): number[] {
  const of = (f: Figure) => rows.find((r) => r.key === f.key)?.rounds[f.target] ?? [];
  const [ra, rb] = [of(a), of(b)];
  if (ra.length !== rb.length) return [];
  return ra.map((value, k) => value / rb[k]!).filter(Number.isFinite);
}

/** A target on the ratio of two medians, judged on that ratio; the range of the round-by-round ratios is given beside it. */
function ratioCheck(target: string, rows: Row[], a: Figure, b: Figure, limit: number, op: Op): Check {
  const value = medianOf(rows, a.key, a.target) / medianOf(rows, b.key, b.target);
  const judged = check(target, value, limit, op, 'ratio');
  const rounds = roundRatios(rows, a, b);
  if (!Number.isFinite(value) || rounds.length < 2) return judged;
  return { ...judged, detail: `${judged.detail}; round by round ${format(Math.min(...rounds))}-${format(Math.max(...rounds))}` };
}

/** ratioCheck of two servers in the same row, whose rounds ran interleaved. */
function sameRowRatio(rows: Row[]) {
  return (target: string, key: string, a: TargetName, b: TargetName, limit: number, op: Op) =>
    ratioCheck(target, rows, { key, target: a }, { key, target: b }, limit, op);
}

/** The targets of issue 7, each judged on medians from this run. */
export function checkTargets(rows: Row[], mid: number, large: number, spread: number, producerStreams: number): Check[] {
  const m = (key: string, t: TargetName) => medianOf(rows, key, t);
  const r = sameRowRatio(rows);
  const a = `appends-${mid}`;
  const checks = [
    r('appends/s at 500 streams >= 10x reference file-backed', a, 'rill', 'ref-file', 10, '>='),
    r('appends/s at 500 streams >= reference in-memory', a, 'rill', 'ref-memory', 1, '>='),
    r('appends/s at 500 streams with metrics >= 0.95x with --metrics off', a, 'rill', 'rill-no-metrics', 0.95, '>='),
    r('appends/s at 500 streams with the access log >= 0.95x with --access-log off (issue 41)', a, 'rill', 'rill-no-log', 0.95, '>='),
    r('appends/s at 500 streams >= 0.7x bare floor', a, 'rill', 'floor', 0.7, '>='),
    r('appends/s at 500 streams with auth on >= 0.9x auth off (issue 24)', a, 'rill-auth', 'rill', 0.9, '>='),
    r(`producer appends/s at ${producerStreams} streams >= reference in-memory (issue 41)`, `producers-${producerStreams}`, 'rill', 'ref-memory', 1, '>='),
    check('append p99 at 50 connections < 10 ms', m(`${a}-p99`, 'rill'), 10, '<', 'p99 ms'),
    check('appends/s at 10,000 streams >= 0.9x of 500', m(`appends-${large}`, 'rill') / m(a, 'rill'), 0.9, '>=', 'ratio'),
    ratioCheck(
      `appends/s over ${spread.toLocaleString('en-US')} streams >= 0.95x of ${mid}, rounds paired on one server (issue 41)`,
      rows,
      { key: `spread-${spread}`, target: 'rill' },
      { key: `spread-${spread}-paired`, target: 'rill' },
      0.95,
      '>=',
    ),
    check('SSE fan-out p99 < 10 ms', m('sse-p99', 'rill'), 10, '<', 'p99 ms'),
    r('SSE fan-out p99 below reference in-memory', 'sse-p99', 'rill', 'ref-memory', 1, '<'),
    r('SSE over 100 streams p50 <= reference in-memory (issue 41)', 'sse-spread-p50', 'rill', 'ref-memory', 1, '<='),
    r('SSE over 100 streams p99 <= reference in-memory (issue 41)', 'sse-spread-p99', 'rill', 'ref-memory', 1, '<='),
    check('catch-up 10 MB >= 1.5x reference (best of the two)', m('catchup-bytes', 'rill') / Math.max(m('catchup-bytes', 'ref-memory'), m('catchup-bytes', 'ref-file')), 1.5, '>=', 'ratio'),
    r('catch-up 100 MiB of 1 MiB appends >= 1.0x reference in-memory (issue 41)', 'catchup-large', 'rill', 'ref-memory', 1, '>='),
    check('catch-up JSON >= 1.5x reference (best of the two)', m('catchup-json', 'rill') / Math.max(m('catchup-json', 'ref-memory'), m('catchup-json', 'ref-file')), 1.5, '>=', 'ratio'),
    check('many streams resident < 300 MB', m('streams-rss', 'rill'), 300, '<', 'MB'),
    check('restart to first read < 2 s', m('streams-restart', 'rill'), 2000, '<', 'ms'),
    r('longest /healthz wait during 32 MiB appends <= 1.5x reference file-backed (issue 40)', 'stall-append', 'rill', 'ref-file', 1.5, '<='),
  ];
  return checks;
}

/**
 * The targets of rill on PostgreSQL: one node at least half as fast as rill on SQLite and
 * five times the file-backed reference at 500 streams; live delivery from one node's
 * writer to another node's subscribers at most 20 ms (p50) later than to subscribers of
 * the writer's own node on one node; and issue 41's ratios to rill on SQLite in the same
 * run (appends, catch-up, SSE with every subscriber on the node that does not write).
 */
export function checkPostgresTargets(rows: Row[], mid: number): Check[] {
  const m = (key: string, t: TargetName) => medianOf(rows, key, t);
  const r = sameRowRatio(rows);
  const a = `appends-${mid}`;
  // Every reader on the node that does not write, against rill on SQLite: both measured in the same rounds of the SSE workload.
  const awayFromWriter = (percentile: 'p50' | 'p99', limit: number) =>
    ratioCheck(
      `PostgreSQL, 2 nodes: SSE ${percentile}, all subscribers away from the writer, <= ${limit}x rill on SQLite (issue 41)`,
      rows,
      { key: `sse-away-${percentile}`, target: 'rill-pg-2' },
      { key: `sse-${percentile}`, target: 'rill' },
      limit,
      '<=',
    );
  return [
    r('PostgreSQL, 1 node: appends/s at 500 streams >= 0.5x rill on SQLite', a, 'rill-pg', 'rill', 0.5, '>='),
    r('PostgreSQL, 1 node: appends/s at 500 streams >= 5x reference file-backed', a, 'rill-pg', 'ref-file', 5, '>='),
    check(
      'PostgreSQL: cross-node SSE delivery p50 < 20 ms above same-node (2 nodes, other node vs 1 node)',
      m('sse-cross-p50', 'rill-pg-2') - m('sse-p50', 'rill-pg'),
      20,
      '<',
      'ms above',
    ),
    r('PostgreSQL, 1 node: appends/s at 500 streams >= 0.6x rill on SQLite (issue 41)', a, 'rill-pg', 'rill', 0.6, '>='),
    r('PostgreSQL, 1 node: catch-up 100 MiB of 1 MiB appends >= 0.7x rill on SQLite (issue 41)', 'catchup-large', 'rill-pg', 'rill', 0.7, '>='),
    r('PostgreSQL, 1 node: catch-up 10 MiB >= 0.7x rill on SQLite (issue 41)', 'catchup-bytes', 'rill-pg', 'rill', 0.7, '>='),
    awayFromWriter('p50', 3),
    awayFromWriter('p99', 5),
  ];
}

/**
 * Issue 38's cold tier: a stream grown to ten windows keeps the hot store within the
 * window plus one segment once uploads caught up, and uploads did run during the append
 * rounds that compare the two servers (else those rounds would not measure them).
 */
export function checkColdTargets(rows: Row[]): Check[] {
  const m = (key: string) => medianOf(rows, key, 'rill-cold');
  const boundMiB = (COLD_HOT_BYTES + COLD_SEGMENT_BYTES) / 1024 / 1024;
  return [
    check('cold tier: hot store of a stream grown to 10x its window <= window + one segment (issue 38)', m('cold-hot-bytes'), boundMiB, '<=', 'MiB'),
    check('cold tier: segments uploaded per append round >= 1 (issue 38)', m('cold-appends-uploads'), 1, '>=', 'segments'),
  ];
}

export function renderChecks(checks: Check[]): string {
  return checks.map((c) => `- [${c.met ? 'x' : ' '}] ${c.target}: ${c.detail}`).join('\n');
}
