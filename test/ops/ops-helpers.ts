/** What the tests of test/ops share: an in-process server on a free port, and /metrics parsed. */
import { Writable } from 'node:stream';
import type { Logger } from 'pino';
import { createLogger } from '../../src/ops/logger.js';
import { openRillServer, type RillServer } from '../../src/http/server.js';
import type { ServerSettings } from '../../src/http/settings.js';
import type { Store } from '../../src/storage/store.js';
import { removeDir, tempDataDir } from '../helpers/server.js';

export interface Running {
  rill: RillServer;
  url: string;
  dataDir: string;
  /** Every log line written, parsed. */
  lines: Array<Record<string, unknown>>;
  /** Everything the logger wrote, as text (to look for secrets anywhere in it). */
  text(): string;
  stop(): Promise<void>;
}

/** A logger whose lines are kept in memory. */
export function memoryLogger(level: 'info' | 'warn' = 'info'): { log: Logger; lines: Array<Record<string, unknown>>; text: () => string } {
  const lines: Array<Record<string, unknown>> = [];
  let all = '';
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      all += chunk.toString();
      for (const line of chunk.toString().split('\n')) if (line.trim() !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { log: createLogger({ level, destination }), lines, text: () => all };
}

/** A server in this process on 127.0.0.1 and a free port; no expiry sweep (its batches would move the storage metrics). */
export async function startInProcess(settings: Partial<ServerSettings> = {}, store?: Store): Promise<Running> {
  const dataDir = tempDataDir('rill-ops-');
  const { log, lines, text } = memoryLogger();
  const rill = await openRillServer({
    settings: { host: '127.0.0.1', port: 0, dataDir, sweepIntervalMs: 3_600_000, ...settings },
    logger: log,
    ...(store ? { store } : {}),
  });
  await rill.listen();
  return {
    rill,
    url: rill.url(),
    dataDir,
    lines,
    text,
    async stop() {
      await rill.close();
      removeDir(dataDir);
    },
  };
}

export type Samples = Map<string, number>;

/** Parses the Prometheus text format: `name{a="x",b="y"} value` -> key `name{a="x",b="y"}` (labels sorted). */
export function parseMetrics(text: string): Samples {
  const samples: Samples = new Map();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][\w:]*)(\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`not a sample line: ${line}`);
    const labels = match[3] ? [...match[3].matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => `${m[1]}="${m[2]}"`).sort() : [];
    samples.set(labels.length > 0 ? `${match[1]}{${labels.join(',')}}` : match[1]!, Number(match[4]));
  }
  return samples;
}

export async function scrape(url: string): Promise<Samples> {
  const res = await fetch(`${url}/metrics`);
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  return parseMetrics(await res.text());
}

/** How much each named sample moved between two scrapes (a sample absent before counts from 0). */
export function moved(before: Samples, after: Samples, keys: string[]): Record<string, number> {
  return Object.fromEntries(keys.map((k) => [k, Math.round(((after.get(k) ?? 0) - (before.get(k) ?? 0)) * 1e9) / 1e9]));
}
