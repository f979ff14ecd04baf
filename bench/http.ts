/** Small helpers over Node's built-in fetch (undici) for setup and catch-up reads. */

export const BODY_BYTES = 100;

/** A body of `bytes` bytes, so every server stores the same amount. */
export function bodyOf(bytes = BODY_BYTES, fill = 'x'): Buffer {
  return Buffer.alloc(bytes, fill);
}

export async function expectOk(res: Response, what: string): Promise<void> {
  await res.arrayBuffer();
  if (res.status >= 300) throw new Error(`${what}: HTTP ${res.status}`);
}

export async function createStream(base: string, name: string, contentType: string, body?: Buffer, headers: Record<string, string> = {}): Promise<void> {
  const init: RequestInit = { method: 'PUT', headers: { 'content-type': contentType, ...headers } };
  if (body) init.body = new Uint8Array(body);
  await expectOk(await fetch(`${base}/v1/stream/${name}`, init), `create ${name}`);
}

export async function append(base: string, name: string, contentType: string, body: Buffer | string): Promise<void> {
  await expectOk(await fetch(`${base}/v1/stream/${name}`, { method: 'POST', headers: { 'content-type': contentType }, body: typeof body === 'string' ? body : new Uint8Array(body) }), `append ${name}`);
}

/** Runs `task(i)` for i in [0, count) with at most `concurrency` in flight. */
export async function pooled(count: number, concurrency: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
}

export interface CatchUp {
  bytes: number;
  responses: number;
}

/** Reads a stream from the start, following Stream-Next-Offset until it is up to date. */
export async function catchUp(base: string, name: string): Promise<CatchUp> {
  let offset = '-1';
  let bytes = 0;
  let responses = 0;
  for (;;) {
    const res = await fetch(`${base}/v1/stream/${name}?offset=${encodeURIComponent(offset)}`);
    const data = await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`catch-up read of ${name}: HTTP ${res.status}`);
    bytes += data.byteLength;
    responses++;
    const next = res.headers.get('stream-next-offset');
    if (next === null) throw new Error(`catch-up read of ${name}: no Stream-Next-Offset`);
    if (res.headers.get('stream-up-to-date') === 'true') return { bytes, responses };
    if (next === offset) throw new Error(`catch-up read of ${name}: offset did not advance`);
    offset = next;
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
