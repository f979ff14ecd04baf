/**
 * Workload 4: catch-up reads. A 10 MB byte stream (written in 64 KiB appends), a JSON
 * stream of 100,000 small messages (written as arrays of 1,000) and a large byte stream
 * (100 MiB written as 1 MiB appends, the shape of issue 41), each read from the start to
 * the tail by following Stream-Next-Offset. Each round reads each stream once to warm
 * up, then times five reads and keeps the median.
 */
import { append, catchUp, createStream } from '../http.js';

export interface CatchUpSpec {
  bytes: number;
  jsonMessages: number;
  largeBytes: number;
}

export interface CatchUpResult {
  bytesMBPerS: number;
  largeMBPerS: number;
  jsonMessagesPerS: number;
  jsonMBPerS: number;
}

const APPEND_BYTES = 64 * 1024;
const LARGE_APPEND_BYTES = 1024 * 1024;
const JSON_BATCH = 1000;
export const BYTES_STREAM = 'catchup-bytes';
export const JSON_STREAM = 'catchup-json';
export const LARGE_STREAM = 'catchup-large';

async function writeBytes(base: string, name: string, total: number, appendBytes: number): Promise<void> {
  await createStream(base, name, 'application/octet-stream');
  const block = Buffer.alloc(appendBytes, 'abcdefghijklmnopqrstuvwxyz');
  for (let written = 0; written < total; written += appendBytes) {
    await append(base, name, 'application/octet-stream', block.subarray(0, Math.min(appendBytes, total - written)));
  }
}

export async function prepareCatchUp(base: string, spec: CatchUpSpec): Promise<void> {
  await writeBytes(base, BYTES_STREAM, spec.bytes, APPEND_BYTES);
  await writeBytes(base, LARGE_STREAM, spec.largeBytes, LARGE_APPEND_BYTES);
  await createStream(base, JSON_STREAM, 'application/json');
  for (let sent = 0; sent < spec.jsonMessages; sent += JSON_BATCH) {
    const batch = [];
    for (let i = sent; i < Math.min(spec.jsonMessages, sent + JSON_BATCH); i++) batch.push({ n: i, kind: 'event', text: 'lorem ipsum dolor sit amet' });
    await append(base, JSON_STREAM, 'application/json', JSON.stringify(batch));
  }
}

/** Reads per round; the round reports the median, so one hiccup does not make the figure. */
const READS_PER_ROUND = 5;

/** The median time of `reads` calls of `read`, one after another. */
export async function medianReadMs(read: () => Promise<unknown>, reads = READS_PER_ROUND): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < reads; i++) {
    const t = performance.now();
    await read();
    times.push(performance.now() - t);
  }
  return times.sort((a, b) => a - b)[times.length >> 1]!;
}

export async function runCatchUp(base: string, spec: CatchUpSpec): Promise<CatchUpResult> {
  const bytes = await catchUp(base, BYTES_STREAM);
  if (bytes.bytes !== spec.bytes) throw new Error(`catch-up read ${bytes.bytes} bytes, expected ${spec.bytes}`);
  const json = await catchUp(base, JSON_STREAM);
  const large = await catchUp(base, LARGE_STREAM);
  if (large.bytes !== spec.largeBytes) throw new Error(`catch-up read ${large.bytes} bytes, expected ${spec.largeBytes}`);
  const bytesMs = await medianReadMs(() => catchUp(base, BYTES_STREAM));
  const jsonMs = await medianReadMs(() => catchUp(base, JSON_STREAM));
  const largeMs = await medianReadMs(() => catchUp(base, LARGE_STREAM));
  return {
    bytesMBPerS: bytes.bytes / 1e3 / bytesMs,
    largeMBPerS: large.bytes / 1e3 / largeMs,
    jsonMessagesPerS: (spec.jsonMessages * 1000) / jsonMs,
    jsonMBPerS: json.bytes / 1e3 / jsonMs,
  };
}
