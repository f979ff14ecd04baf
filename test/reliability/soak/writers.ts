/**
 * The soak's writers. Each loops until the run stops, recording in the ledger what it
 * sent and what it was told:
 *  - plain appends: an unknown outcome is abandoned (a blind retry could double it);
 *  - producers: an unknown outcome is retried unchanged until the server answers, as
 *    seed 000 says; now and then a producer restarts with a higher epoch;
 *  - an outbox producer: producer headers plus Stream-Seq = its fact number (seed 001);
 *  - prefix-count Stream-Seq writers racing on one JSON stream (seed 001);
 *  - JSON batches: one POSTed array, several messages, all or nothing;
 *  - a closer: streams created, written by a producer and closed by its last write.
 */
import { blake3 } from '@noble/hashes/blake3.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { jsonLine, receiptOf, textLine, type Ledger, type StreamSpec, type WriteRecord } from './ledger.js';
import { call, maybeLose, pad20, sleep, type Rng } from './support.js';

export interface SoakContext {
  /** The URL of the node the next request goes to: each call moves on to the next node. */
  nextBase: () => string;
  ledger: Ledger;
  stopping: () => boolean;
}

/** Longest a writer keeps retrying one write before reporting it. */
const GIVE_UP_MS = 120_000;

async function backoff(rng: Rng): Promise<void> {
  // pacing: a retry's back-off, not a wait for an outcome
  await sleep(rng.int(30, 200));
}

/** Sends the same request until the server answers it; null if it never does. */
async function untilAnswered(ctx: SoakContext, rng: Rng, url: string, init: RequestInit): Promise<Response | null> {
  const deadline = Date.now() + GIVE_UP_MS;
  while (Date.now() < deadline) {
    const out = await call(url, init, maybeLose(rng));
    if (out.kind === 'answer') return out.res;
    ctx.ledger.unknown(out.reason);
    await backoff(rng);
  }
  ctx.ledger.violation(`no answer in ${GIVE_UP_MS} ms to ${init.method} ${url}`);
  return null;
}

/** PUT until answered; records the stream's incarnation. */
export async function createStream(ctx: SoakContext, rng: Rng, spec: StreamSpec): Promise<boolean> {
  const res = await untilAnswered(ctx, rng, ctx.nextBase() + spec.path, { method: 'PUT', headers: { 'content-type': spec.contentType } });
  if (res === null) return false;
  if (res.status !== 201 && res.status !== 200) {
    ctx.ledger.violation(`create ${spec.path} answered ${res.status}`);
    return false;
  }
  spec.incarnation = res.headers.get('stream-incarnation');
  ctx.ledger.streams.set(spec.name, spec);
  return true;
}

export async function plainWriter(ctx: SoakContext, rng: Rng, spec: StreamSpec, id: string): Promise<void> {
  for (let n = 0; !ctx.stopping(); n++) {
    const key = `P.${id}.${n}`;
    const line = textLine(key, 0, rng.pad(8, 160));
    const record = ctx.ledger.sent({ key, stream: spec.name, lines: [line] });
    const out = await call(ctx.nextBase() + spec.path, { method: 'POST', headers: { 'content-type': spec.contentType }, body: `${line}\n` }, maybeLose(rng));
    if (out.kind === 'unknown') {
      record.state = 'maybe';
      ctx.ledger.unknown(out.reason);
      await backoff(rng);
      continue;
    }
    if (out.res.status === 204) ctx.ledger.ack(record, 'plain append', receiptOf(out.res));
    else {
      record.state = 'maybe';
      ctx.ledger.violation(`plain append ${key} answered ${out.res.status} ${out.body.toString().slice(0, 100)}`);
    }
    // pacing: the load's think time, not a wait for an outcome
    await sleep(rng.int(0, 15));
  }
}

export async function jsonBatchWriter(ctx: SoakContext, rng: Rng, spec: StreamSpec, id: string): Promise<void> {
  for (let n = 0; !ctx.stopping(); n++) {
    const key = `J.${id}.${n}`;
    const lines = Array.from({ length: rng.int(1, 5) }, (_, i) => jsonLine(key, i, rng.pad(0, 60)));
    const record = ctx.ledger.sent({ key, stream: spec.name, lines });
    const out = await call(ctx.nextBase() + spec.path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: `[${lines.join(',')}]` }, maybeLose(rng));
    if (out.kind === 'unknown') {
      record.state = 'maybe';
      ctx.ledger.unknown(out.reason);
      await backoff(rng);
      continue;
    }
    if (out.res.status === 204) ctx.ledger.ack(record, 'JSON batch', receiptOf(out.res));
    else {
      record.state = 'maybe';
      ctx.ledger.violation(`JSON batch ${key} answered ${out.res.status} ${out.body.toString().slice(0, 100)}`);
    }
    // pacing: the load's think time, not a wait for an outcome
    await sleep(rng.int(0, 20));
  }
}

export interface ProducerOptions {
  pid: string;
  /** Send Producer-Digest (BLAKE3 of the body). */
  digest: boolean;
  /** Send Stream-Seq = the fact number (the outbox recipe). */
  outbox: boolean;
  /** Chance that the producer restarts with a higher epoch after a write. */
  restartChance: number;
}

interface ProducerCursor {
  epoch: number;
  seq: number;
  fact: number;
  /** Last applied seq of the previous epoch, for the claim's Producer-Closed-Seq. */
  previousLast: number | null;
}

function producerHeaders(spec: StreamSpec, opts: ProducerOptions, at: ProducerCursor, body: string, close: boolean): Record<string, string> {
  const headers: Record<string, string> = {
    'content-type': spec.contentType,
    'producer-id': opts.pid,
    'producer-epoch': String(at.epoch),
    'producer-seq': String(at.seq),
  };
  if (opts.digest) headers['producer-digest'] = bytesToHex(blake3(Buffer.from(body)));
  if (opts.outbox) headers['stream-seq'] = pad20(at.fact);
  if (close) headers['stream-closed'] = 'true';
  return headers;
}

/** What a 200 or 204 to a producer write must say (seed 000). */
function producerAnswerError(res: Response, at: ProducerCursor, close: boolean): string | null {
  if (res.status !== 200 && res.status !== 204) return `answered ${res.status}`;
  if (res.headers.get('producer-epoch') !== String(at.epoch)) return `Producer-Epoch ${res.headers.get('producer-epoch')}`;
  if (res.headers.get('producer-seq') !== String(at.seq)) return `Producer-Seq ${res.headers.get('producer-seq')}`;
  if (close && res.headers.get('stream-closed') !== 'true') return 'closing write without Stream-Closed: true';
  if (at.seq === 0 && at.previousLast !== null) {
    const closed = `${res.headers.get('producer-closed-epoch')}/${res.headers.get('producer-closed-seq')}`;
    if (closed !== `${at.epoch - 1}/${at.previousLast}`) return `claim closed ${closed}, expected ${at.epoch - 1}/${at.previousLast}`;
  }
  if (res.headers.get('stream-offset') === null) return 'no receipt on the newest write';
  return null;
}

/** One producer write, retried unchanged until answered. True when acknowledged. */
async function producerWrite(ctx: SoakContext, rng: Rng, spec: StreamSpec, opts: ProducerOptions, at: ProducerCursor, close = false): Promise<boolean> {
  const key = `Q.${opts.pid}.e${at.epoch}.s${at.seq}`;
  const line = textLine(key, 0, rng.pad(8, 120));
  const record = ctx.ledger.sent({ key, stream: spec.name, lines: [line] });
  const body = `${line}\n`;
  const res = await untilAnswered(ctx, rng, ctx.nextBase() + spec.path, { method: 'POST', headers: producerHeaders(spec, opts, at, body, close), body });
  if (res === null) return false;
  const error = producerAnswerError(res, at, close);
  if (error) {
    record.state = 'maybe';
    ctx.ledger.violation(`producer write ${key} on ${spec.name}: ${error}`);
    return false;
  }
  ctx.ledger.ack(record, opts.outbox ? 'outbox write' : close ? 'closing write' : 'producer write', receiptOf(res));
  return true;
}

export async function producerWriter(ctx: SoakContext, rng: Rng, spec: StreamSpec, opts: ProducerOptions): Promise<void> {
  const at: ProducerCursor = { epoch: 0, seq: 0, fact: 0, previousLast: null };
  while (!ctx.stopping()) {
    if (!(await producerWrite(ctx, rng, spec, opts, at))) {
      // The server said something a correct server never says: start a fresh epoch.
      at.previousLast = null;
      at.epoch += 1;
      at.seq = 0;
      if (opts.outbox) return;
      continue;
    }
    at.fact += 1;
    at.seq += 1;
    if (rng.chance(opts.restartChance)) {
      at.previousLast = at.seq - 1;
      at.epoch += 1;
      at.seq = 0;
    }
    // pacing: the load's think time, not a wait for an outcome
    await sleep(rng.int(0, 15));
  }
}

/** Creates streams, writes each with a producer, and closes it with the last write. */
export async function closer(ctx: SoakContext, rng: Rng, prefix: string, maxStreams: number): Promise<void> {
  for (let k = 0; k < maxStreams && !ctx.stopping(); k++) {
    const spec: StreamSpec = { name: `closed-${k}`, path: `${prefix}/closed-${k}`, contentType: 'text/plain', incarnation: null, closeAcked: false, closable: true };
    if (!(await createStream(ctx, rng, spec))) return;
    const opts: ProducerOptions = { pid: `closer${k}`, digest: false, outbox: false, restartChance: 0 };
    const writes = rng.int(1, 6);
    for (let seq = 0; seq < writes; seq++) {
      const last = seq === writes - 1;
      const at: ProducerCursor = { epoch: 0, seq, fact: seq, previousLast: null };
      if (!(await producerWrite(ctx, rng, spec, opts, at, last))) return;
      if (last) spec.closeAcked = true;
    }
    // pacing: the load's think time, not a wait for an outcome
    await sleep(rng.int(1_000, 4_000));
  }
}

export { casWriter } from './cas.js';
export type { WriteRecord };
