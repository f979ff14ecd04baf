/**
 * The soak's readers. Each keeps the bytes it has read and the offset after them; when
 * the server dies under it, it resumes from that offset. The checker later compares
 * what each read with the stream itself: every byte exactly once, in order.
 *  - catch-up readers page through with random max_bytes;
 *  - a long-poll reader waits at the tail;
 *  - SSE tails follow control events and keep a data event only once the control
 *    event after it arrived (a cut connection resends it).
 */
import type { Ledger, StreamSpec } from './ledger.js';
import { call, pad20, sleep, type Rng } from './support.js';

export interface Reader {
  label: string;
  stream: string;
  offset: number;
  chunks: Buffer[];
  /** Bytes already compared with the stream by the checker. */
  verified: number;
  /** Responses or events taken. */
  reads: number;
}

export interface ReaderContext {
  /** As SoakContext.nextBase. */
  nextBase: () => string;
  ledger: Ledger;
  /** Where the reader may stop: the stream's final tail, once the writers are done. */
  finalTail: (stream: string) => number | undefined;
  deadline: () => number;
}

function finished(ctx: ReaderContext, reader: Reader): boolean {
  const tail = ctx.finalTail(reader.stream);
  return (tail !== undefined && reader.offset >= tail) || Date.now() > ctx.deadline();
}

function take(ctx: ReaderContext, reader: Reader, from: number, next: number, data: Buffer): void {
  if (from !== reader.offset) ctx.ledger.violation(`${reader.label}: data from ${from} while at ${reader.offset}`);
  if (next - from !== data.length) ctx.ledger.violation(`${reader.label}: ${data.length} bytes from ${from} to ${next}`);
  if (data.length > 0) reader.chunks.push(data);
  reader.offset = next;
  reader.reads += 1;
}

export async function pagingReader(ctx: ReaderContext, rng: Rng, spec: StreamSpec, reader: Reader, longPoll: boolean): Promise<void> {
  let upToDate = false;
  while (!finished(ctx, reader)) {
    const live = longPoll && upToDate ? '&live=long-poll' : '';
    const from = reader.offset;
    const out = await call(`${ctx.nextBase()}${spec.path}?offset=${pad20(from)}&max_bytes=${rng.int(1, 65_536)}${live}`, { headers: { accept: 'application/x-ndjson' } });
    if (out.kind === 'unknown') {
      // pacing: a retry's back-off, not a wait for an outcome
      await sleep(rng.int(30, 200));
      continue;
    }
    const next = Number(out.res.headers.get('stream-next-offset'));
    if (out.res.status === 200) take(ctx, reader, from, next, out.body);
    else if (out.res.status !== 204 || next !== from) {
      ctx.ledger.violation(`${reader.label}: answered ${out.res.status} at ${from} (next ${next})`);
      // pacing: a retry's back-off, not a wait for an outcome
      await sleep(rng.int(200, 500));
    }
    upToDate = out.res.headers.get('stream-up-to-date') === 'true';
    // pacing: a caught-up reader's polling interval, not a wait for an outcome
    if (upToDate && !longPoll) await sleep(rng.int(20, 200));
  }
}

interface SseEvent {
  type: string;
  data: string;
}

/** Splits complete events off the front of `buffer`. */
function parseEvents(buffer: string): { events: SseEvent[]; rest: string } {
  const events: SseEvent[] = [];
  let rest = buffer;
  for (let end = rest.indexOf('\n\n'); end >= 0; end = rest.indexOf('\n\n')) {
    const block = rest.slice(0, end);
    rest = rest.slice(end + 2);
    let type = 'message';
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith('event:')) type = line.slice(6).trim();
      else if (line.startsWith('data:')) data.push(line.slice(5));
    }
    if (data.length > 0) events.push({ type, data: data.join('\n') });
  }
  return { events, rest };
}

/** One SSE connection, followed until it ends; resumes from the reader's offset. */
async function followOnce(ctx: ReaderContext, spec: StreamSpec, reader: Reader): Promise<void> {
  const abort = new AbortController();
  const watchdog = setInterval(() => finished(ctx, reader) && abort.abort(), 100);
  try {
    const res = await fetch(`${ctx.nextBase()}${spec.path}?offset=${pad20(reader.offset)}&live=sse`, { signal: abort.signal });
    if (res.status !== 200 || !res.body) {
      ctx.ledger.violation(`${reader.label}: SSE answered ${res.status}`);
      return;
    }
    const base64 = res.headers.get('stream-sse-data-encoding') === 'base64';
    const decoder = new TextDecoder();
    let buffer = '';
    let pending: Buffer | null = null;
    const body = res.body.getReader();
    for (;;) {
      const { done, value: chunk } = await body.read();
      if (done) break;
      const parsed = parseEvents(buffer + decoder.decode(chunk, { stream: true }));
      buffer = parsed.rest;
      for (const event of parsed.events) {
        if (event.type === 'data') pending = Buffer.from(event.data, base64 ? 'base64' : 'utf8');
        if (event.type !== 'control') continue;
        const next = Number((JSON.parse(event.data) as { streamNextOffset: string }).streamNextOffset);
        take(ctx, reader, reader.offset, next, pending ?? Buffer.alloc(0));
        pending = null;
      }
    }
  } catch {
    // Cut by a crash, by its lifetime or by the watchdog: resume from the offset.
  } finally {
    clearInterval(watchdog);
  }
}

export async function sseReader(ctx: ReaderContext, rng: Rng, spec: StreamSpec, reader: Reader): Promise<void> {
  while (!finished(ctx, reader)) {
    await followOnce(ctx, spec, reader);
    // pacing: the pause before the reader reconnects, not a wait for an outcome
    if (!finished(ctx, reader)) await sleep(rng.int(20, 200));
  }
}
