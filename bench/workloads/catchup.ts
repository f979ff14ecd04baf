/**
 * Workload 4: catch-up reads. A 10 MB byte stream (written in 64 KiB appends) and a
 * JSON stream of 100,000 small messages (written as arrays of 1,000), each read from
 * the start to the tail by following Stream-Next-Offset. Each round reads each stream
 * once to warm up, then times five reads and keeps the median.
 */
import { append, catchUp, createStream } from '../http.js';

export interface CatchUpSpec {
  bytes: number;
  jsonMessages: number;
}

export interface CatchUpResult {
  bytesMBPerS: number;
  jsonMessagesPerS: number;
  jsonMBPerS: number;
}

const APPEND_BYTES = 64 * 1024;
const JSON_BATCH = 1000;
export const BYTES_STREAM = 'catchup-bytes';
export const JSON_STREAM = 'catchup-json';

export async function prepareCatchUp(base: string, spec: CatchUpSpec): Promise<void> {
  await createStream(base, BYTES_STREAM, 'application/octet-stream');
  const block = Buffer.alloc(APPEND_BYTES, 'abcdefghijklmnopqrstuvwxyz');
  for (let written = 0; written < spec.bytes; written += APPEND_BYTES) {
    await append(base, BYTES_STREAM, 'application/octet-stream', block.subarray(0, Math.min(APPEND_BYTES, spec.bytes - written)));
  }
  await createStream(base, JSON_STREAM, 'application/json');
  for (let sent = 0; sent < spec.jsonMessages; sent += JSON_BATCH) {
    const batch = [];
    for (let i = sent; i < Math.min(spec.jsonMessages, sent + JSON_BATCH); i++) batch.push({ n: i, kind: 'event', text: 'lorem ipsum dolor sit amet' });
    await append(base, JSON_STREAM, 'application/json', JSON.stringify(batch));
  }
}

/** Reads per round; the round reports the median, so one hiccup does not make the figure. */
const READS_PER_ROUND = 5;

async function timedMs(read: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < READS_PER_ROUND; i++) {
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
  const bytesMs = await timedMs(() => catchUp(base, BYTES_STREAM));
  const jsonMs = await timedMs(() => catchUp(base, JSON_STREAM));
  return {
    bytesMBPerS: bytes.bytes / 1e3 / bytesMs,
    jsonMessagesPerS: (spec.jsonMessages * 1000) / jsonMs,
    jsonMBPerS: json.bytes / 1e3 / jsonMs,
  };
}
