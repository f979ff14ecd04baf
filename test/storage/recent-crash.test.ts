/**
 * Recent appends under SIGKILL: a writer process on the SQLite engine, with appends sealed
 * and indexed every few commits (so a kill lands before, during and after indexing
 * slices) and its longer appends indexed by their own commit (past held ones of their
 * stream), is killed at random moments (after a random number of its acknowledgements).
 * Each reopening must find every acknowledged append exactly where it was written, the
 * bytes of at most the one unacknowledged append after it, no stream whose deletion was
 * acknowledged, and nothing a deleted stream wrote under another name.
 */
import { spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, expect, test } from 'vitest';
import { DEFAULT_PRODUCER_SETTINGS } from '../../src/core/types.js';
import { SqliteStore } from '../../src/storage/sqlite/engine.js';
import { removeDir, tempDataDir } from '../helpers/server.js';
import { seededRandom } from './fixtures.js';

const CHILD = resolve(import.meta.dirname, '../fixtures/recent-writer-child.mjs');
const SLOTS = 8;
const KILLS = 10;
/** The longest append the child makes. */
const MAX_APPEND = 20;

const dirs: string[] = [];
afterAll(() => dirs.forEach(removeDir));

function byteAt(name: string, position: number): number {
  let h = 0;
  for (const c of name) h = (h * 31 + c.charCodeAt(0)) & 0xff;
  return (h + position * 131) & 0xff;
}

/** What the writer's acknowledgements promise about each stream name. */
interface Expected {
  /** Acknowledged tail per live stream name. */
  tails: Map<string, number>;
  /** Names whose deletion was acknowledged. */
  deleted: Set<string>;
  /** Names whose deletion was sent but not yet acknowledged. */
  deleting: Set<string>;
  /** Per slot, the generation its next run continues with: never a deleted name's. */
  generations: number[];
}

function slotOf(name: string): { slot: number; generation: number } {
  const [base, generation] = name.slice(1).split('.');
  return { slot: Number(base), generation: Number(generation) };
}

function apply(expected: Expected, line: string): void {
  const [verb, name, start, length] = line.split(' ');
  if (verb === 'created' || verb === 'deleted') {
    const { slot, generation } = slotOf(name!);
    const next = verb === 'deleted' ? generation + 1 : generation;
    expected.generations[slot] = Math.max(expected.generations[slot]!, next);
  }
  if (verb === 'deleting') expected.deleting.add(name!);
  else if (verb === 'created') expected.tails.set(name!, expected.tails.get(name!) ?? 0);
  else if (verb === 'deleted') {
    expected.deleting.delete(name!);
    expected.tails.delete(name!);
    expected.deleted.add(name!);
  } else if (verb === 'appended') {
    // A stream unknown here was created by an operation the kill left unacknowledged.
    expect(Number(start)).toBe(expected.tails.get(name!) ?? 0);
    expected.tails.set(name!, Number(start) + Number(length));
  } else if (verb !== 'deleting' && line !== '') throw new Error(`unexpected line from the writer: ${line}`);
}

/**
 * Runs the writer until it has printed `ackLines` lines (acknowledgements), SIGKILLs it
 * then, wherever it is, and applies every acknowledgement it printed. Counted in work done,
 * not in time: on a loaded machine a run of a few hundred milliseconds could end before the
 * writer had started.
 */
async function runAndKill(dataDir: string, names: string[], seed: number, ackLines: number, expected: Expected): Promise<void> {
  const child = spawn(process.execPath, [CHILD, dataDir, JSON.stringify(names), String(seed)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  let printed = 0;
  // 'close', not 'exit': the lines the writer printed just before the kill may still be in
  // the pipe when it exits, and each is an acknowledgement the checks must hold it to.
  const exited = new Promise<void>((r) => child.once('close', () => r()));
  const enough = new Promise<void>((resolve) => {
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      for (const byte of d) if (byte === 10) printed++;
      if (printed >= ackLines) resolve();
    });
  });
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  await Promise.race([enough, exited]);
  child.kill('SIGKILL');
  await exited;
  expect(err).toBe('');
  const lines = out.split('\n');
  // The last line may be cut by the kill; a cut line was never a whole acknowledgement.
  if (!out.endsWith('\n')) lines.pop();
  for (const line of lines) apply(expected, line);
}

/** Reopens the store (indexing what the crash left recent) and checks it against `expected`. */
async function check(dataDir: string, expected: Expected): Promise<number> {
  const store = new SqliteStore({ dataDir, producers: DEFAULT_PRODUCER_SETTINGS });
  try {
    for (const name of expected.deleted) expect(await store.getStream(name), `${name} was deleted`).toBeUndefined();
    let bytes = 0;
    for (const [name, tail] of expected.tails) {
      const stream = await store.getStream(name);
      if (!stream) {
        // Only a stream whose deletion the kill left unacknowledged may be missing: that
        // deletion committed, and the slot moves on to a new name.
        expect(expected.deleting.has(name), `${name} lost`).toBe(true);
        const { slot, generation } = slotOf(name);
        expected.deleting.delete(name);
        expected.tails.delete(name);
        expected.deleted.add(name);
        expected.generations[slot] = generation + 1;
        continue;
      }
      expect(stream.tail).toBeGreaterThanOrEqual(tail);
      expect(stream.tail).toBeLessThanOrEqual(tail + MAX_APPEND);
      const data = await store.readRange(stream, 0, stream.tail + 1);
      expect(data.length).toBe(stream.tail);
      for (let p = 0; p < data.length; p++) if (data[p] !== byteAt(name, p)) expect.fail(`${name} byte ${p}`);
      const chunks = await store.readChunks(stream, 0, stream.tail + 1);
      expect(chunks.reduce((n, c) => n + c.data.length, 0)).toBe(stream.tail);
      // Acknowledged tails stay acknowledged: later checks hold the stream to what it has now.
      expected.tails.set(name, stream.tail);
      bytes += stream.tail;
    }
    return bytes;
  } finally {
    await store.close();
    expectNothingLeftBehind(dataDir);
  }
}

/** After a clean close every append is indexed, and no stored byte belongs to a deleted stream. */
function expectNothingLeftBehind(dataDir: string): void {
  const db = new Database(join(dataDir, 'rill.db'), { readonly: true });
  try {
    expect(db.prepare('SELECT count(*) AS n FROM recent_batches').get()).toEqual({ n: 0 });
    expect(db.prepare('SELECT count(*) AS n FROM chunks WHERE stream_id NOT IN (SELECT id FROM streams)').get()).toEqual({ n: 0 });
  } finally {
    db.close();
  }
}

test('every acknowledged append survives SIGKILL at any point of sealing and indexing', async () => {
  const dataDir = tempDataDir('rill-recent-crash-');
  dirs.push(dataDir);
  const random = seededRandom(20261130);
  const expected: Expected = { tails: new Map(), deleted: new Set(), deleting: new Set(), generations: new Array<number>(SLOTS).fill(0) };
  // Bytes read back and compared over the ten reopenings: the test checked real data. Not
  // the last reopening's alone, which depends on where the kills land (944 once, under load).
  let checkedBytes = 0;
  for (let kill = 0; kill < KILLS; kill++) {
    // A slot continues with its newest name; one whose creation was not acknowledged may
    // or may not exist, and the writer creates it if not.
    const names = expected.generations.map((generation, slot) => `s${slot}.${generation}`);
    await runAndKill(dataDir, names, random(1_000_000), 60 + random(300), expected);
    checkedBytes += await check(dataDir, expected);
  }
  expect(expected.deleted.size).toBeGreaterThan(0);
  // About 26,000 in a run here.
  expect(checkedBytes).toBeGreaterThan(10_000);
}, 60_000);
