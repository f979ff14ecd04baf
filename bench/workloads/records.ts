/**
 * Record-aware catch-up reads against offset reads (issue 35): many JSON streams, each
 * read from its start to its tail by following Stream-Next-Offset, then by following
 * Stream-Record-Next, with the same concurrency; and reads of single records chosen at
 * random, which must find their place by counting messages.
 */
import { append, createStream, expectOk, pooled } from '../http.js';

export interface RecordsSpec {
  streams: number;
  messagesPerStream: number;
  /** Streams read at once. */
  concurrency: number;
  /** Single-record reads at random ordinals. */
  randomReads: number;
}

export interface RecordsResult {
  offsetMessagesPerS: number;
  recordMessagesPerS: number;
  randomReadsPerS: number;
}

const BATCH = 50;
const streamName = (i: number) => `records-${i}`;

export async function prepareRecords(base: string, spec: RecordsSpec): Promise<void> {
  await pooled(spec.streams, spec.concurrency, async (i) => {
    await createStream(base, streamName(i), 'application/json');
    for (let sent = 0; sent < spec.messagesPerStream; sent += BATCH) {
      const batch = Array.from({ length: Math.min(BATCH, spec.messagesPerStream - sent) }, (_, k) => ({ n: sent + k, kind: 'event', text: 'lorem ipsum dolor sit amet' }));
      await append(base, streamName(i), 'application/json', JSON.stringify(batch));
    }
  });
}

/** Reads one stream to its tail, following the continuation `next` names; answers the messages read. */
async function readToTail(base: string, first: string, next: (res: Response) => string): Promise<number> {
  let query = first;
  let messages = 0;
  for (let guard = 0; guard < 1_000_000; guard++) {
    const res = await fetch(`${base}${query}`, { headers: { accept: 'application/x-ndjson' } });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${query}: HTTP ${res.status}`);
    for (let at = text.indexOf('\n'); at >= 0; at = text.indexOf('\n', at + 1)) messages++;
    if (res.headers.get('stream-up-to-date') === 'true') return messages;
    query = next(res);
  }
  throw new Error(`${first}: no end`);
}

async function timedCatchUp(base: string, spec: RecordsSpec, byRecord: boolean): Promise<number> {
  let messages = 0;
  const started = performance.now();
  await pooled(spec.streams, spec.concurrency, async (i) => {
    const path = `/v1/stream/${streamName(i)}`;
    // Awaited before adding: `messages += await ...` would add to the value read before the wait.
    const read = byRecord
      ? await readToTail(base, `${path}?record=0`, (res) => `${path}?record=${res.headers.get('stream-record-next')}`)
      : await readToTail(base, `${path}?offset=-1`, (res) => `${path}?offset=${res.headers.get('stream-next-offset')}`);
    messages += read;
  });
  const expected = spec.streams * spec.messagesPerStream;
  if (messages !== expected) throw new Error(`read ${messages} messages, expected ${expected}`);
  return (messages * 1000) / (performance.now() - started);
}

/** Ordinals from a fixed sequence (the same in every round and on every server). */
function ordinalAt(i: number, messages: number): number {
  return (i * 7919) % messages;
}

async function timedRandomReads(base: string, spec: RecordsSpec): Promise<number> {
  const started = performance.now();
  await pooled(spec.randomReads, spec.concurrency, async (i) => {
    const res = await fetch(`${base}/v1/stream/${streamName(i % spec.streams)}?record=${ordinalAt(i, spec.messagesPerStream)}&max_records=1`);
    await expectOk(res, 'record read');
  });
  return (spec.randomReads * 1000) / (performance.now() - started);
}

export async function runRecords(base: string, spec: RecordsSpec): Promise<RecordsResult> {
  return {
    offsetMessagesPerS: await timedCatchUp(base, spec, false),
    recordMessagesPerS: await timedCatchUp(base, spec, true),
    randomReadsPerS: await timedRandomReads(base, spec),
  };
}
