/**
 * What the workloads that carry former test bounds (floods, drain, subscriptions, cross-node
 * long-polls) measure a server with: the slowest of a run of HEADs, its live readers and its
 * peak memory from /proc, a write held in flight, and a body sent by another process.
 */
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request, type Agent, type ClientRequest, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { sleep } from '../http.js';

/**
 * HEADs `url` one after another, 5 ms apart, until `during` settles; the slowest answer's
 * time is how long the server left another request waiting meanwhile.
 */
export async function slowestHeadMs(url: string, during: Promise<unknown>): Promise<number> {
  let settled = false;
  void during.finally(() => (settled = true)).catch(() => {});
  let slowest = 0;
  while (!settled) {
    const started = performance.now();
    const res = await fetch(url, { method: 'HEAD' });
    if (res.status !== 200) throw new Error(`HEAD ${url}: HTTP ${res.status}`);
    slowest = Math.max(slowest, performance.now() - started);
    await sleep(5);
  }
  return slowest;
}

/** The slowest HEAD of an idle server over `forMs`, after 20 HEADs that warm its HEAD path. */
export async function idleSlowestHeadMs(url: string, forMs: number): Promise<number> {
  for (let i = 0; i < 20; i++) await fetch(url, { method: 'HEAD' });
  return slowestHeadMs(url, sleep(forMs));
}

/**
 * POSTs `body` with curl and answers the status. Sent by this process's fetch, a body of
 * 32 MB holds up this process's own HEADs by 20-30 ms, which is not the server's doing.
 * The body is on disk before this returns, so before any HEAD starts.
 */
export function postWithCurl(url: string, body: Buffer, contentType: string): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'rill-bench-flood-'));
  writeFileSync(join(dir, 'body'), body);
  const args = ['-s', '-o', '/dev/null', '-w', '%{http_code}', '-H', `content-type: ${contentType}`, '--data-binary', `@${join(dir, 'body')}`, url];
  return promisify(execFile)('curl', args)
    .then(({ stdout }) => Number(stdout))
    .finally(() => rmSync(dir, { recursive: true, force: true }));
}

function statusBytes(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const match = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!match) throw new Error(`no ${field} for ${pid}`);
  return Number(match[1]) * 1024;
}

/**
 * How far `run` raised the process's resident memory above where it stood: its peak
 * (VmHWM, reset first through /proc/PID/clear_refs) less its resident size before.
 */
export async function peakGrowthBytes(pid: number, run: () => Promise<void>): Promise<number> {
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
  const before = statusBytes(pid, 'VmRSS');
  await run();
  return statusBytes(pid, 'VmHWM') - before;
}

/** Live readers of `kind` the server holds now (its /metrics gauge rill_live_readers). */
export async function liveReaders(url: string, kind: 'sse' | 'long_poll'): Promise<number> {
  const metrics = await (await fetch(`${url}/metrics`)).text();
  const match = new RegExp(`^rill_live_readers\\{kind="${kind}"\\} (\\d+)$`, 'm').exec(metrics);
  if (!match) throw new Error(`${url}: no rill_live_readers{kind="${kind}"} in /metrics`);
  return Number(match[1]);
}

/** Until `check` holds (looked at every 10 ms), failing naming `what` after `timeoutMs`. The tests wait with it too (test/helpers/waits.ts). */
export async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`waited ${timeoutMs} ms for ${what}`);
    await sleep(10); // a poll's interval, not a wait for time to pass
  }
}

/**
 * A write whose head the server has read (it answered `Expect: 100-continue`) and whose
 * body has `first` of it sent: in flight until the caller ends it.
 */
export async function writeInFlight(url: string, headers: Record<string, string>, first: string, agent?: Agent): Promise<{ req: ClientRequest; response: Promise<IncomingMessage> }> {
  const req = request(url, { method: 'POST', headers: { ...headers, expect: '100-continue' }, agent });
  req.on('error', () => {});
  const response = new Promise<IncomingMessage>((resolve) => req.once('response', resolve));
  req.flushHeaders();
  await once(req, 'continue');
  req.write(first);
  return { req, response };
}

/** The p-th percentile (0-100) of `values`, nearest rank. */
export function percentileOf(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
}
