/**
 * Helpers for the processor tests: a processor child process (test/fixtures/
 * processor-child.mjs, over dist/), a paced source writer, and checks of the aggregates
 * a target holds. Also the client tests' waits for an event (`until`, `within`): a test
 * waits for what it expects to happen, never for a guessed time.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { expect } from 'vitest';
import { IdempotentProducer, RillError, type RillClient, type StreamHandle } from '../../src/client/index.js';
import { until } from './waits.js';
import { extensionUrl } from '../../src/protocol/extensions.js';

export { EVENT_TIMEOUT_MS, until } from './waits.js';

const CHILD = resolve(import.meta.dirname, '../fixtures/processor-child.mjs');

export interface ChildConfig {
  url: string;
  source: string;
  targets: string[];
  producerId: string;
  windowCount: number;
  closeTargetOnEnd?: boolean;
}

export interface ProcessorChild {
  child: ChildProcess;
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  output(): string;
}

export function spawnProcessor(config: ChildConfig): ProcessorChild {
  const child = spawn(process.execPath, [CHILD, JSON.stringify(config)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  return { child, exited, output: () => output };
}

/** SIGKILL by pid and wait until the process is gone. */
export async function killChild(processor: ProcessorChild): Promise<void> {
  if (processor.child.exitCode === null && processor.child.signalCode === null) processor.child.kill('SIGKILL');
  await processor.exited;
}

/** A pause, for the places where time passing is itself the behaviour under test (each says so where it calls it). */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}


/**
 * Resolves once a live reader (a long-poll, or an SSE connection between events) waits on
 * the stream at `url`: the server counts it in the stream's /stats.
 */
export async function untilLiveReader(url: string): Promise<void> {
  const waiting = async () => ((await (await fetch(extensionUrl(url, 'stats'))).json()) as { liveReaders: number }).liveReaders > 0;
  await until(waiting, `a live reader on ${url}`);
}

/** What `promise` settles with, or a failure naming `what` if it has not settled within `timeoutMs`. */
export async function within<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not happen within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The child's exit code, or 'still running' if it has not exited within `timeoutMs` (a bound only a bug reaches). */
export function exitOf(processor: ProcessorChild, timeoutMs: number): Promise<number | null | 'still running'> {
  return within(processor.exited, timeoutMs, 'the exit').catch(() => 'still running' as const);
}

/** Runs a request that is safe to repeat until the server answers (it may be restarting). */
export async function retrying<T>(request: () => Promise<T>, attempts = 200): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await request();
    } catch (error) {
      if (i >= attempts || !(error instanceof RillError) || !error.retryable) throw error;
      await sleep(50); // a retry's pause while the server restarts; the next attempt is the check
    }
  }
}

/** The target's tail as a number, for progress checks. */
export async function tailOf(stream: StreamHandle): Promise<number> {
  return Number((await retrying(() => stream.head())).nextOffset);
}

/** Waits until `streams` grew past `before` in total, the child exited, or `timeoutMs` passed; answers the total. */
export async function waitForProgress(streams: StreamHandle[], before: number, child: ProcessorChild, timeoutMs: number): Promise<number> {
  let total = before;
  const progressed = async () => {
    let sum = 0;
    for (const s of streams) sum += await tailOf(s);
    total = sum;
    return total > before || child.child.exitCode !== null;
  };
  // No progress in time is the caller's to judge, from the total and the child's exit.
  await until(progressed, 'progress', timeoutMs).catch(() => undefined);
  return total;
}

/**
 * Writes {n: 1..} to a JSON source exactly once: `prefill` messages at once, then
 * batches of `batch` every `pauseMs` until `keepGoing()` answers false and at least
 * `minTotal` are written (bounded by `maxTotal`), then closes the source.
 */
export class SourceWriter {
  written = 0;
  readonly done: Promise<number>;
  private readonly abort = new AbortController();
  /** Writers not yet finished, so a failed test can stop them (see `stopWriters`). */
  static readonly running = new Set<SourceWriter>();

  constructor(
    private readonly source: StreamHandle,
    private readonly options: { prefill: number; batch: number; pauseMs: number; minTotal: number; maxTotal: number; keepGoing: () => boolean },
  ) {
    SourceWriter.running.add(this);
    this.done = this.run().finally(() => SourceWriter.running.delete(this));
    this.done.catch(() => undefined);
  }

  stop(): void {
    this.abort.abort();
  }

  private async run(): Promise<number> {
    const signal = this.abort.signal;
    const producer = new IdempotentProducer(this.source, { id: 'source-writer', maxInFlight: 4, retry: { maxAttempts: 200, maxDelayMs: 500 }, signal });
    await this.write(producer, this.options.prefill);
    while ((this.options.keepGoing() || this.written < this.options.minTotal) && this.written < this.options.maxTotal && !signal.aborted) {
      await this.write(producer, this.options.batch);
      await sleep(this.options.pauseMs); // the pause is the behaviour: a source that keeps growing while processors run
    }
    if (signal.aborted) return this.written;
    await producer.close();
    await retrying(() => this.source.close());
    return this.written;
  }

  private async write(producer: IdempotentProducer, count: number): Promise<void> {
    const values = Array.from({ length: count }, (_, i) => ({ n: this.written + i + 1 }));
    for (let i = 0; i < values.length; i += 500) await producer.appendMessages(values.slice(i, i + 500));
    this.written += count;
  }
}

/** Stops every source writer still running (after a failed test). */
export function stopWriters(): void {
  for (const writer of SourceWriter.running) writer.stop();
}

const startedChildren: ProcessorChild[] = [];

/** Spawns a processor child that `stopProcessing` will kill if the test leaves it running. */
export function startProcessor(config: ChildConfig): ProcessorChild {
  const child = spawnProcessor(config);
  startedChildren.push(child);
  return child;
}

/** After each processor test: stop source writers and kill every processor child it started. */
export async function stopProcessing(): Promise<void> {
  stopWriters();
  for (const child of startedChildren.splice(0)) await killChild(child);
}

export interface Aggregate {
  first: number;
  last: number;
  count: number;
  sum: number;
}

export async function readAll<T>(stream: StreamHandle): Promise<T[]> {
  const values: T[] = [];
  for await (const message of stream.messages<T>()) values.push(message.value);
  return values;
}

/** Exactly one aggregate per window of `size` over 1..total, in order: no gap, no duplicate. */
export function expectWindows(results: Aggregate[], total: number, size: number): void {
  expect(total % size).toBe(0);
  expect(results.length).toBe(total / size);
  results.forEach((result, i) => {
    const first = i * size + 1;
    const last = (i + 1) * size;
    expect(result).toEqual({ first, last, count: size, sum: ((first + last) * size) / 2 });
  });
  expect(results.reduce((sum, r) => sum + r.sum, 0)).toBe((total * (total + 1)) / 2);
}

/** The source holds 1..total exactly once, in order. */
export async function expectSource(source: StreamHandle, total: number): Promise<void> {
  const values = await readAll<{ n: number }>(source);
  expect(values.length).toBe(total);
  values.forEach((v, i) => expect(v.n).toBe(i + 1));
}

export async function makeJsonStreams(client: RillClient, bucket: string, ids: string[]): Promise<StreamHandle[]> {
  await client.bucket(bucket).create();
  const streams = ids.map((id) => client.stream(`${bucket}/${id}`));
  for (const s of streams) await s.create({ contentType: 'application/json' });
  return streams;
}
