/**
 * `npm run bench:instructions`: the instructions a server's event loop executes per
 * append, counted by valgrind's callgrind. Times move with whatever else the machine
 * does (a round of the floor here took 46 to 73 µs of CPU per request in one run);
 * instruction counts move far less: the floor's, and each part of a request's path,
 * count the same within a fraction of a percent. rill's totals move a few percent with
 * the machine's load (108,700-115,100 a plain append for one build in one session):
 * how many appends form a batch follows the fsync's pace (see DEFAULT_CONCURRENCY), and
 * work driven by the clock (sweeps, the access log's flush) is counted over a window
 * valgrind stretches. So judge a change to the append path by several runs against the
 * build before it, made alternately, or by the parts of the profile it touches; the
 * floor's count says what HTTP on Node costs in the same units.
 *
 *   node .bench/build/instructions.js [--only rill,rill-auth,rill-memory,floor] [--appends N]
 *                                     [--warmup N] [--streams N] [--producers] [--rill path/to/dist/bin/rill.js] [--out FILE]
 *                                     [--by-function N] [--concurrency N]
 *
 * Each server runs under callgrind with instrumentation off, gets `--streams` streams
 * (500 by default), takes `--warmup` appends spread over them
 * (so that V8 has compiled the hot path, as it has under load), and is counted over the
 * next `--appends`. With `--producers` every append carries Producer-Id/Epoch/Seq, one
 * producer per stream with its seqs in order (an answer from rill other than 200 stops
 * the run, so a duplicate is never counted as an append). The figure is the event loop's thread alone: V8's compiler threads
 * and libuv's fsync threads run beside it and do not hold it up. Kernel time is not
 * counted (callgrind sees user space only), nor is the load generator. Needs valgrind
 * (Debian's package), and takes about a minute per server. `rill-pg` is rill's node alone
 * under callgrind, on a PostgreSQL server of the bench's (not counted); `rill-pg-2`, two
 * nodes, is not counted here.
 *
 * `--by-function N` also prints, for each server, the N functions of the event loop with
 * the most instructions of their own per append: node runs with `--perf-basic-prof`, and
 * the addresses callgrind cannot name (V8's compiled JavaScript) are named from the map
 * node writes to /tmp/perf-PID.map (a function's code that V8 moved later keeps the
 * address it was compiled at, so a few may stay unnamed). The map is kept beside the
 * dumps in .bench/callgrind, for naming callers (`callgrind_annotate --tree=caller`).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { bodyOf, pooled } from './http.js';
import { addNodeFlags, freshDataDir, needsDataDir, startTarget, stopBenchPostgres, TARGET_LABELS, useRillBuild, type TargetName } from './targets.js';

const ROOT = resolve(import.meta.dirname, '../..');
/**
 * Appends in flight at once: enough that batches form, few enough for valgrind's pace.
 * How many form a batch then moves with the fsync's pace (runs of one build counted
 * 108,700-115,100 a plain append on a loaded machine, as batches of 3.1-4.5 appends);
 * `--concurrency 1` makes each append a batch of its own, which counts the same in every
 * run, for comparing two builds' request paths.
 */
const DEFAULT_CONCURRENCY = 10;
/** Valgrind runs node 30-50x slower; starting takes seconds, not milliseconds. */
const START_TIMEOUT_MS = 180_000;

interface Options {
  targets: TargetName[];
  streams: number;
  producers: boolean;
  appends: number;
  warmup: number;
  out: string;
  byFunction: number;
  concurrency: number;
}

function parseOptions(): Options {
  const { values } = parseArgs({
    options: {
      only: { type: 'string', default: 'rill,rill-memory,floor' },
      appends: { type: 'string', default: '3000' },
      warmup: { type: 'string', default: '9000' },
      streams: { type: 'string', default: '500' },
      producers: { type: 'boolean', default: false },
      rill: { type: 'string' },
      out: { type: 'string', default: join(ROOT, '.bench/instructions.json') },
      'by-function': { type: 'string', default: '0' },
      concurrency: { type: 'string', default: String(DEFAULT_CONCURRENCY) },
    },
  });
  if (values.rill) useRillBuild(values.rill);
  const targets = values.only.split(',').map((t) => t.trim()) as TargetName[];
  for (const t of targets) if (!(t in TARGET_LABELS)) throw new Error(`unknown server ${t}`);
  if (targets.includes('rill-pg-2')) throw new Error('rill-pg-2 is two processes: count one node, rill-pg');
  const appends = Number(values.appends);
  const warmup = Number(values.warmup);
  const streams = Number(values.streams);
  const whole = [appends, warmup, streams].every(Number.isInteger) && appends >= 1 && warmup >= 0 && streams >= 1;
  if (!whole) throw new Error('--appends, --warmup and --streams take whole numbers');
  // A stream's next producer append goes out only once its last is answered (see appendMany).
  const concurrency = Number(values.concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new Error('--concurrency takes a whole number from 1');
  if (values.producers && streams <= concurrency) throw new Error(`--producers needs more than ${concurrency} streams`);
  const byFunction = Number(values['by-function']);
  if (!Number.isInteger(byFunction) || byFunction < 0) throw new Error('--by-function takes a whole number');
  if (byFunction > 0) addNodeFlags(['--perf-basic-prof']);
  return { targets, streams, producers: values.producers, appends, warmup, out: resolve(values.out), byFunction, concurrency };
}

function send(agent: Agent, base: URL, method: string, path: string, body?: Buffer, extraHeaders: Record<string, string> = {}): Promise<number> {
  return new Promise((resolveStatus, reject) => {
    const headers = { 'content-type': 'text/plain', 'content-length': String(body?.length ?? 0), ...extraHeaders };
    const req = request({ host: base.hostname, port: base.port, method, path, agent, headers }, (res) => {
      res.resume();
      res.on('end', () => resolveStatus(res.statusCode!));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * Appends `from` to `from + count - 1` of the run, spread round-robin over the streams,
 * `--concurrency` at a time; throws on any refusal. With producers, append i is seq
 * floor(i / streams) of its stream's producer: with more streams than appends in flight,
 * a stream's next seq is sent only after its last was answered.
 */
async function appendMany(agent: Agent, base: URL, options: Options, from: number, count: number, mustBe200: boolean, headers: Record<string, string>): Promise<void> {
  const body = bodyOf();
  await pooled(count, options.concurrency, async (n) => {
    const i = from + n;
    const stream = i % options.streams;
    const producer = { 'producer-id': `ins-p${stream}`, 'producer-epoch': '0', 'producer-seq': String(Math.floor(i / options.streams)) };
    const status = await send(agent, base, 'POST', `/v1/stream/ins-${stream}`, body, options.producers ? { ...headers, ...producer } : headers);
    if (status >= 300 || (mustBe200 && status !== 200)) throw new Error(`append ${i}: HTTP ${status}`);
  });
}

/** The main thread's total from callgrind's dump: `{out}.{pid}.{part}-01` holds thread 1. */
function mainThreadInstructions(dir: string, pid: number): number {
  const dump = readdirSync(dir).find((f) => f === `callgrind.${pid}.1-01`);
  if (!dump) throw new Error(`callgrind wrote no dump of the event loop's thread for ${pid} in ${dir}`);
  const totals = /^totals: (\d+)$/m.exec(readFileSync(join(dir, dump), 'utf8'));
  if (!totals) throw new Error(`no totals line in ${dump}`);
  return Number(totals[1]);
}

/** V8's map of compiled code: start address, size and name of each function, one a line. */
function readPerfMap(pid: number): Array<{ start: number; end: number; name: string }> {
  let text: string;
  try {
    text = readFileSync(`/tmp/perf-${pid}.map`, 'utf8');
  } catch {
    return [];
  }
  const entries: Array<{ start: number; end: number; name: string }> = [];
  for (const line of text.split('\n')) {
    const match = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line);
    if (!match) continue;
    const start = parseInt(match[1]!, 16);
    entries.push({ start, end: start + parseInt(match[2]!, 16), name: match[3]! });
  }
  return entries.sort((a, b) => a.start - b.start);
}

/** The event loop's functions with the most instructions of their own, per append, named through the perf map. */
function printByFunction(dir: string, pid: number, appends: number, top: number): void {
  const dump = join(dir, `callgrind.${pid}.1-01`);
  const annotated = execFileSync('callgrind_annotate', ['--inclusive=no', '--threshold=100', dump], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
  const map = readPerfMap(pid);
  const nameAt = (address: number): string | null => {
    let lo = 0;
    let hi = map.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const entry = map[mid]!;
      if (address < entry.start) hi = mid - 1;
      else if (address >= entry.end) lo = mid + 1;
      else return entry.name;
    }
    return null;
  };
  const totals = new Map<string, number>();
  for (const line of annotated.split('\n')) {
    const match = /^\s*([\d,]+) \([\s\d.]+%\)\s+(.*)$/.exec(line);
    if (!match || match[2]!.startsWith('PROGRAM TOTALS')) continue;
    const count = Number(match[1]!.replace(/,/g, ''));
    const unnamed = /^\?\?\?:0x([0-9a-f]+) \[\?\?\?\]$/.exec(match[2]!);
    const name = unnamed ? (nameAt(parseInt(unnamed[1]!, 16)) ?? match[2]!) : match[2]!.replace(/ \[[^\]]*\]$/, '').replace(/^\?\?\?:/, '');
    totals.set(name, (totals.get(name) ?? 0) + count);
  }
  // Kept beside the dump, for reading callers with callgrind_annotate --tree=caller.
  if (map.length > 0) renameSync(`/tmp/perf-${pid}.map`, join(dir, `perf-${pid}.map`));
  const rows = [...totals].sort((a, b) => b[1] - a[1]).slice(0, top);
  for (const [name, n] of rows) process.stderr.write(`${Math.round(n / appends).toLocaleString('en-US').padStart(8)}  ${name.slice(0, 160)}\n`);
}

async function count(name: TargetName, options: Options, dir: string): Promise<number> {
  const valgrind = ['valgrind', '--tool=callgrind', '--instr-atstart=no', '--separate-threads=yes', '--smc-check=all-non-file', `--callgrind-out-file=${dir}/callgrind.%p`];
  const dataDir = needsDataDir(name) ? freshDataDir(join(ROOT, '.bench/data'), `instructions-${name}`) : null;
  const server = await startTarget(name, dataDir, [], START_TIMEOUT_MS, valgrind);
  const agent = new Agent({ keepAlive: true, maxSockets: options.concurrency });
  try {
    const base = new URL(server.url);
    for (let i = 0; i < options.streams; i++) await send(agent, base, 'PUT', `/v1/stream/ins-${i}`, undefined, server.headers);
    // rill answers a new producer append 200 with its receipt (204 would be a duplicate); the floors answer 204 to all.
    const mustBe200 = options.producers && name.startsWith('rill');
    await appendMany(agent, base, options, 0, options.warmup, mustBe200, server.headers);
    execFileSync('callgrind_control', ['--instr=on', String(server.pid)], { stdio: 'ignore' });
    await appendMany(agent, base, options, options.warmup, options.appends, mustBe200, server.headers);
    execFileSync('callgrind_control', ['--instr=off', String(server.pid)], { stdio: 'ignore' });
    execFileSync('callgrind_control', ['--dump', String(server.pid)], { stdio: 'ignore' });
  } finally {
    agent.destroy();
    await server.stop(30_000);
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }
  // Read once the server has exited: by then every dump it was asked for is written.
  if (options.byFunction > 0) printByFunction(dir, server.pid, options.appends, options.byFunction);
  return mainThreadInstructions(dir, server.pid) / options.appends;
}

async function main(): Promise<void> {
  const options = parseOptions();
  const dir = join(ROOT, '.bench/callgrind');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const perAppend: Partial<Record<TargetName, number>> = {};
  for (const name of options.targets) {
    const kind = options.producers ? 'producer appends' : 'appends';
    process.stderr.write(`[instructions] ${TARGET_LABELS[name]}: ${options.streams} streams, ${options.warmup} ${kind} to warm up, ${options.appends} counted\n`);
    perAppend[name] = await count(name, options, dir);
    process.stderr.write(`[instructions] ${TARGET_LABELS[name]}: ${Math.round(perAppend[name]!).toLocaleString('en-US')} per append\n`);
  }
  const floor = perAppend.floor;
  console.log('| server | instructions per append (event loop) | x floor |\n|---|---:|---:|');
  for (const [name, n] of Object.entries(perAppend)) {
    console.log(`| ${TARGET_LABELS[name as TargetName]} | ${Math.round(n).toLocaleString('en-US')} | ${floor ? (n / floor).toFixed(2) : '-'} |`);
  }
  writeFileSync(options.out, JSON.stringify({ at: new Date().toISOString(), ...options, perAppend }, null, 2));
}

try {
  await main();
} finally {
  await stopBenchPostgres();
}
