/**
 * The cold tier's workload (issue 38): rill with `--cold-store` on an s3rver of its own
 * (`rill-cold`, bench/s3.ts) beside plain rill on SQLite, both fresh, same client, same
 * writes. Three figures, as issue 38 asks:
 *
 *  1. A stream grown to `windows` hot windows in 64 KiB appends: the hot store's bytes once
 *     the uploader caught up (`/stats`), against the window plus one segment (a check),
 *     the bytes in object storage, and the database file on disk on both servers.
 *  2. Catch-up reads of that stream from its start: on `rill-cold` most of it comes from
 *     the object store (the read cache holds two segments, so every read fetches them
 *     again), on `rill` all of it from the hot store; and the objects fetched per read.
 *  3. Appends at the middle stream count while a paced writer keeps another stream growing
 *     past its window, so that the uploader uploads throughout each round on `rill-cold`;
 *     the same writer runs on `rill`, so the difference is the cold tier's alone.
 *
 * The growth is done once per server (as catch-up prepares its streams once); its figures
 * are one round each. Catch-up and appends are measured for the run's rounds.
 */
import type { BoundsContext } from './bounds.js';
import type { Row } from './report.js';
import { COLD_HOT_BYTES, COLD_SEGMENT_BYTES, COLD_UPLOAD_INTERVAL_MS } from './s3.js';
import type { BenchSettings } from './settings.js';
import { TARGET_LABELS, type Running, type TargetName } from './targets.js';
import { prepareStreams, runAppends, type AppendSpec } from './workloads/appends.js';
import { coldStats, fileBytes, growStream, pacedWriter, settleUploads, timedCatchUpMs, type ColdStats } from './workloads/cold.js';

export interface ColdSpec {
  /** The grown stream's size, in hot windows (issue 38: 10). */
  windows: number;
  /** Timed catch-up reads per round (their median is the round's figure). */
  readsPerRound: number;
  /** The paced writer's rate during the append rounds: what keeps the uploader busy. */
  uploadBytesPerS: number;
}

const TARGETS: TargetName[] = ['rill-cold', 'rill'];
const GROWN = 'cold-grown';
const UPLOADING = 'cold-uploading';
const APPEND_BYTES = 64 * 1024;
const MiB = 1024 * 1024;

interface ColdRows {
  hot: Row;
  cold: Row;
  disk: Row;
  catchUp: Row;
  fetches: Row;
  appends: Row;
  p99: Row;
  uploads: Row;
}

function coldRows(s: BenchSettings, streams: number): ColdRows {
  const row = (key: string, label: string, unit: string, better: Row['better']): Row => ({ key, label, unit, better, rounds: {} });
  const grown = `a stream of ${s.cold.windows}x its hot window (${COLD_HOT_BYTES / MiB} MiB window, ${COLD_SEGMENT_BYTES / 1024} KiB segments)`;
  const appends = `appends, ${streams} streams, ${(s.cold.uploadBytesPerS / MiB).toFixed(0)} MiB/s to another stream`;
  return {
    hot: row('cold-hot-bytes', `${grown}: hot store once uploads caught up`, 'MiB', 'lower'),
    cold: row('cold-cold-bytes', `${grown}: in object storage`, 'MiB', 'higher'),
    disk: row('cold-db-bytes', `${grown}: SQLite database file on disk (its WAL apart)`, 'MiB', 'lower'),
    catchUp: row('cold-catchup', `catch-up of ${grown}`, 'MB/s', 'higher'),
    fetches: row('cold-catchup-fetches', `catch-up of ${grown}: objects fetched per read`, 'objects', 'lower'),
    appends: row('cold-appends', appends, 'appends/s', 'higher'),
    p99: row('cold-appends-p99', `${appends} p99`, 'ms', 'lower'),
    uploads: row('cold-appends-uploads', `${appends}: segments uploaded per round`, 'segments', 'higher'),
  };
}

function push(row: Row, target: TargetName, value: number): void {
  (row.rounds[target] ??= []).push(value);
}

/** Each round visits every server, the order alternating, so that drift falls on both alike. */
function inTurn(running: Running[], round: number): Running[] {
  return round % 2 === 0 ? running : [...running].reverse();
}

export async function coldWorkload(s: BenchSettings, rows: Row[], ctx: BoundsContext): Promise<void> {
  if (ctx.selected(['rill-cold']).length === 0) return;
  const streams = s.streamCounts[1] ?? s.streamCounts[0]!;
  const r = coldRows(s, streams);
  rows.push(...Object.values(r));
  const running = await ctx.startAll(ctx.selected(TARGETS), 'cold');
  try {
    for (const t of running) await grow(s, t, r, ctx);
    for (let round = 0; round < s.rounds; round++) {
      for (const t of inTurn(running, round)) await catchUpRound(s, t, r, ctx, round);
    }
    const spec: AppendSpec = { streams, connections: s.connections, durationS: s.appendDurationS, producers: false, prefix: 'cold-appends' };
    for (const t of running) await prepareAppends(s, t, spec);
    for (let round = 0; round < s.appendRounds; round++) {
      for (const t of inTurn(running, round)) await appendRound(s, t, spec, r, ctx, round);
    }
  } finally {
    await ctx.stopAll(running);
  }
}

/** Figure 1: the stream grown to `windows` windows; on the cold target, the tiers once uploads caught up. */
async function grow(s: BenchSettings, t: Running, r: ColdRows, ctx: BoundsContext): Promise<void> {
  const bytes = s.cold.windows * COLD_HOT_BYTES;
  ctx.progress(`cold: writing ${bytes / MiB} MiB to ${TARGET_LABELS[t.name]}`);
  await growStream(t.url, GROWN, bytes, APPEND_BYTES);
  let tiers = '';
  if (t.name === 'rill-cold') {
    const settled = await settleUploads(t.url, COLD_SEGMENT_BYTES, COLD_UPLOAD_INTERVAL_MS);
    if (settled.uploadFailures > 0) throw new Error(`rill-cold: ${settled.uploadFailures} upload passes failed`);
    push(r.hot, t.name, settled.hotBytes / MiB);
    push(r.cold, t.name, settled.coldBytes / MiB);
    tiers = `, ${(settled.hotBytes / MiB).toFixed(2)} MiB hot and ${(settled.coldBytes / MiB).toFixed(2)} MiB cold after ${settled.uploads} uploads`;
  }
  // The database file alone is the row: the WAL's size says when SQLite last checkpointed, and the
  // reserve file is a fixed size; every file is in the progress line.
  const files = [...fileBytes(t.dataDir!)].filter(([, bytes]) => bytes > 0);
  const database = files.find(([name]) => name.endsWith('.db'));
  if (database === undefined) throw new Error(`${TARGET_LABELS[t.name]}: no database file in ${t.dataDir}`);
  push(r.disk, t.name, database[1] / MiB);
  const each = files.map(([name, bytes]) => `${name} ${(bytes / MiB).toFixed(2)}`).join(', ');
  ctx.progress(`cold: ${TARGET_LABELS[t.name]}: on disk ${each} MiB${tiers}`);
}

/** Figure 2: catch-up of the grown stream; on the cold target, the objects each read fetched. */
async function catchUpRound(s: BenchSettings, t: Running, r: ColdRows, ctx: BoundsContext, round: number): Promise<void> {
  const bytes = s.cold.windows * COLD_HOT_BYTES;
  const before = t.name === 'rill-cold' ? await coldStats(t.url) : null;
  const ms = await timedCatchUpMs(t.url, GROWN, bytes, s.cold.readsPerRound);
  const mbPerS = bytes / 1e3 / ms;
  push(r.catchUp, t.name, mbPerS);
  let fetched = '';
  if (before !== null) {
    // The untimed first read fetches as the timed ones do: the cache holds two segments.
    const perRead = ((await coldStats(t.url)).coldFetches - before.coldFetches) / (s.cold.readsPerRound + 1);
    push(r.fetches, t.name, perRead);
    fetched = `, ${perRead.toFixed(1)} objects fetched per read`;
  }
  ctx.progress(`cold: catch-up round ${round + 1}/${s.rounds} ${TARGET_LABELS[t.name]}: ${mbPerS.toFixed(0)} MB/s${fetched}`);
}

/** The append streams, and the paced writer's stream filled to its window, so that what it writes next is sealed at once. */
async function prepareAppends(s: BenchSettings, t: Running, spec: AppendSpec): Promise<void> {
  await prepareStreams(t.url, spec);
  await growStream(t.url, UPLOADING, COLD_HOT_BYTES, APPEND_BYTES);
  if (s.warmupS > 0) await withUploads(s, t, () => runAppends(t.urls, { ...spec, durationS: s.warmupS }));
}

/** Runs `measure` while the paced writer grows UPLOADING; answers its result and the cold tier's stats before and after. */
async function withUploads<T>(s: BenchSettings, t: Running, measure: () => Promise<T>): Promise<{ result: T; before: ColdStats | null; after: ColdStats | null }> {
  const stats = () => (t.name === 'rill-cold' ? coldStats(t.url) : Promise.resolve(null));
  const before = await stats();
  const writer = pacedWriter(t.url, UPLOADING, s.cold.uploadBytesPerS, APPEND_BYTES);
  let result: T;
  try {
    result = await measure();
  } finally {
    await writer.stop();
  }
  return { result, before, after: await stats() };
}

/** Figure 3: appends with the uploader busy (on the cold target) against the same load on rill. */
async function appendRound(s: BenchSettings, t: Running, spec: AppendSpec, r: ColdRows, ctx: BoundsContext, round: number): Promise<void> {
  const { result, before, after } = await withUploads(s, t, () => runAppends(t.urls, spec));
  if (result.non2xx + result.errors > 0) throw new Error(`${TARGET_LABELS[t.name]}: ${result.non2xx} appends answered non-2xx, ${result.errors} failed`);
  push(r.appends, t.name, result.appendsPerS);
  push(r.p99, t.name, result.p99Ms);
  let uploaded = '';
  if (before !== null && after !== null) {
    push(r.uploads, t.name, after.uploads - before.uploads);
    uploaded = `, ${after.uploads - before.uploads} segments uploaded (${after.uploadFailures - before.uploadFailures} failed passes), ${(after.uploadLagBytes / 1024).toFixed(0)} KiB awaiting upload`;
  }
  ctx.progress(`cold: appends round ${round + 1}/${s.appendRounds} ${TARGET_LABELS[t.name]}: ${Math.round(result.appendsPerS)}/s p99 ${result.p99Ms} ms${uploaded}`);
}
