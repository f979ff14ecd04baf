/**
 * The stalls workload: how long a server leaves an unrelated request waiting while it
 * stores a large append or serves a large catch-up read. A client polls `/healthz` (no
 * storage behind it) every 5 ms; the longest answer during the operation is the figure.
 * The append is sent by curl from a file, so that this process's own copying of 32 MiB
 * does not hold up its polls (see postWithCurl); reads are made by curl too.
 *
 * Then the stream is caught up from its start at the server's default window, following
 * Stream-Next-Offset: most responses start inside a large append, which a server that
 * loads whole appends loads again for each (twenty-second session). Its figures are the
 * longest wait and the catch-up's time.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { postWithCurl } from './probes.js';
import { sleep } from '../http.js';

export interface StallSpec {
  /** Bytes of each append and of the read. */
  bytes: number;
  /** Appends per round; the longest wait over all of them is the round's figure. */
  appends: number;
}

export interface StallResult {
  appendWaitMs: number;
  readWaitMs: number;
  catchUpWaitMs: number;
  catchUpMs: number;
}

/** The longest answer of `/healthz`, asked one after another 5 ms apart, until `during` settles. */
async function longestHealthMs(url: string, during: Promise<unknown>): Promise<number> {
  let settled = false;
  void during.finally(() => (settled = true)).catch(() => {});
  let longest = 0;
  while (!settled) {
    const started = performance.now();
    // Any answer will do (the reference server has no /healthz): it is the wait that counts.
    await (await fetch(`${url}/healthz`)).arrayBuffer();
    longest = Math.max(longest, performance.now() - started);
    await sleep(5);
  }
  await during;
  return longest;
}

/**
 * GETs `url` with curl (its bytes never reach this process), failing unless it answers 200
 * with a body; answers the body's size and the response's headers, names in lower case.
 */
async function getWithCurl(url: string): Promise<{ bytes: number; headers: Map<string, string> }> {
  const { stdout } = await promisify(execFile)('curl', ['-s', '-o', '/dev/null', '-D', '-', '-w', '\n%{http_code} %{size_download}', url]);
  const lines = stdout.trimEnd().split(/\r?\n/);
  const [status, bytes] = lines.pop()!.split(' ').map(Number);
  if (status !== 200 || !bytes) throw new Error(`GET ${url}: HTTP ${status}, ${bytes} bytes`);
  const headers = new Map<string, string>();
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers.set(line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim());
  }
  return { bytes: bytes!, headers };
}

/** Reads the stream at `target` from its start to its tail, one curl a response; answers the bytes read. */
async function catchUpWithCurl(target: string): Promise<number> {
  let read = 0;
  for (let offset = '-1'; ; ) {
    const { bytes, headers } = await getWithCurl(`${target}?offset=${offset}`);
    read += bytes;
    const next = headers.get('stream-next-offset');
    if (next === undefined) throw new Error(`GET ${target}: no Stream-Next-Offset`);
    if (headers.has('stream-up-to-date')) return read;
    offset = next;
  }
}

async function mustStatus(what: string, status: Promise<number>, ok: number[]): Promise<void> {
  const got = await status;
  if (!ok.includes(got)) throw new Error(`${what}: HTTP ${got}`);
}

/** Makes `stream` and measures the longest /healthz wait during `spec.appends` appends of `spec.bytes` to it, then during one read of them all. */
export async function runStalls(url: string, stream: string, spec: StallSpec): Promise<StallResult> {
  const target = `${url}/v1/stream/${stream}`;
  const created = await fetch(target, { method: 'PUT', headers: { 'content-type': 'application/octet-stream' } });
  if (created.status !== 201) throw new Error(`PUT ${target}: HTTP ${created.status}`);
  const body = Buffer.alloc(spec.bytes, 7);
  let appendWaitMs = 0;
  for (let i = 0; i < spec.appends; i++) {
    await sleep(50); // the polls start on a quiet server
    appendWaitMs = Math.max(appendWaitMs, await longestHealthMs(url, mustStatus(`POST ${target}`, postWithCurl(target, body, 'application/octet-stream'), [200, 204])));
  }
  const readWaitMs = await longestHealthMs(url, getWithCurl(`${target}?offset=-1&max_bytes=${spec.bytes}`));
  const started = performance.now();
  const catchingUp = catchUpWithCurl(target);
  const catchUpWaitMs = await longestHealthMs(url, catchingUp);
  const catchUpMs = performance.now() - started;
  if ((await catchingUp) !== spec.bytes * spec.appends) throw new Error(`catch-up of ${target} read ${await catchingUp} bytes`);
  return { appendWaitMs, readWaitMs, catchUpWaitMs, catchUpMs };
}
