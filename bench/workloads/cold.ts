/**
 * The cold tier's workload (issue 38), its parts: a stream grown to many hot windows in
 * 64 KiB appends, a wait for the uploader to catch up, what /stats says of the two tiers,
 * timed catch-up reads of that stream, and a paced writer that keeps one stream growing
 * past its window so that uploads run while the append workload is measured.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { append, catchUp, createStream, sleep } from '../http.js';
import { medianReadMs } from './catchup.js';

const OCTETS = 'application/octet-stream';

/** What /stats says of the cold tier (src/storage/store.ts, ColdTierStats); the fields the bench reads. */
export interface ColdStats {
  coldBytes: number;
  hotBytes: number;
  uploads: number;
  uploadLagBytes: number;
  uploadFailures: number;
  coldFetches: number;
}

export async function coldStats(base: string): Promise<ColdStats> {
  const res = await fetch(`${base}/stats`);
  const body = (await res.json()) as { cold?: ColdStats };
  if (res.status !== 200 || !body.cold) throw new Error(`/stats of ${base} has no cold tier (HTTP ${res.status})`);
  return body.cold;
}

/** Creates `name` and appends `totalBytes` to it in appends of `appendBytes`, one after another. */
export async function growStream(base: string, name: string, totalBytes: number, appendBytes: number): Promise<void> {
  await createStream(base, name, OCTETS);
  const block = Buffer.alloc(appendBytes, 'abcdefghijklmnopqrstuvwxyz');
  for (let written = 0; written < totalBytes; written += appendBytes) {
    await append(base, name, OCTETS, block.subarray(0, Math.min(appendBytes, totalBytes - written)));
  }
}

/** Uploader passes in a row with no upload (and the lag under a segment) that count as caught up. */
const QUIET_PASSES = 5;
const SETTLE_TIMEOUT_MS = 120_000;

/**
 * Waits until the uploader has caught up: less than a segment of sealed bytes awaits
 * upload (a shorter range waits for more, core/cold-tier.ts) and several passes in a row
 * uploaded nothing. Answers the stats then.
 */
export async function settleUploads(base: string, segmentBytes: number, intervalMs: number): Promise<ColdStats> {
  const deadline = Date.now() + SETTLE_TIMEOUT_MS;
  let last = await coldStats(base);
  let quiet = 0;
  while (quiet < QUIET_PASSES) {
    if (Date.now() > deadline) throw new Error(`the cold tier's uploads did not catch up within ${SETTLE_TIMEOUT_MS / 1000} s: ${JSON.stringify(last)}`);
    await sleep(intervalMs);
    const now = await coldStats(base);
    quiet = now.uploads === last.uploads && now.uploadLagBytes < segmentBytes ? quiet + 1 : 0;
    last = now;
  }
  return last;
}

/** Every file under `dir` (the SQLite database, its WAL and shared memory) and its bytes, by path from `dir`. */
export function fileBytes(dir: string, base = ''): Map<string, number> {
  const files = new Map<string, number>();
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) for (const [name, bytes] of fileBytes(path, `${base}${entry.name}/`)) files.set(name, bytes);
    else files.set(base + entry.name, statSync(path).size);
  }
  return files;
}

/**
 * `reads` catch-up reads of `name` from its start, after one not timed; the median time
 * in ms. Each read must return `expectedBytes`.
 */
export async function timedCatchUpMs(base: string, name: string, expectedBytes: number, reads: number): Promise<number> {
  const read = async () => {
    const got = await catchUp(base, name);
    if (got.bytes !== expectedBytes) throw new Error(`catch-up of ${name} read ${got.bytes} bytes, expected ${expectedBytes}`);
  };
  await read();
  return medianReadMs(read, reads);
}

export interface PacedWriter {
  /** Stops after the append in flight; answers the bytes appended. */
  stop(): Promise<number>;
}

/**
 * Appends of `appendBytes` to `name` at `bytesPerS`, one at a time, paced from the start
 * (a late append does not push back the ones after it), until stopped.
 */
export function pacedWriter(base: string, name: string, bytesPerS: number, appendBytes: number): PacedWriter {
  const block = Buffer.alloc(appendBytes, 'zyxwvutsrqponmlkjihgfedcba');
  const periodMs = (appendBytes / bytesPerS) * 1000;
  let stopped = false;
  let written = 0;
  let failure: unknown;
  const loop = (async () => {
    const start = performance.now();
    for (let i = 0; !stopped; i++) {
      const waitMs = start + i * periodMs - performance.now();
      if (waitMs > 0) await sleep(waitMs);
      if (stopped) break;
      await append(base, name, OCTETS, block);
      written += appendBytes;
    }
  })().catch((error: unknown) => {
    // Kept for stop(): a rejection nothing awaits yet would end the bench's process.
    failure = error;
  });
  return {
    async stop() {
      stopped = true;
      await loop;
      if (failure !== undefined) throw failure;
      return written;
    },
  };
}
