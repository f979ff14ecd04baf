/**
 * The reference model of seed 000 (exactly-once writes) that test/core/producer-model.test.ts
 * checks the engines against: written from the seed text, not from src/core. It forgets idle
 * producers eagerly, keeps whole records in a Map and renders answers itself, one sentence of
 * the seed at a time.
 */
import { blake3 } from '@noble/hashes/blake3.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import type { ProducerSettings } from '../../src/core/types.js';

export const MAX_NUMBER = 2 ** 53 - 1;
export const STREAM_TYPE = 'application/octet-stream';
export const OTHER_TYPE = 'text/plain';
export const SETTINGS: ProducerSettings = { maxProducers: 3, idleEvictMs: 1_000, forgetAfterMs: 5_000 };
/** More producers than the limit; ids whose UTF-16 and UTF-8 orders differ, for eviction ties. */
export const PRODUCER_IDS = ['writer-b', 'writer-a', 'ｚ-wide', '😀-astral', 'w'];
export const STREAM_NAMES = ['v1/model-0', 'v1/model-1'];

export const hex = (body: Buffer): string => bytesToHex(blake3(body));
export const offset = (position: number): string => String(position).padStart(20, '0');

// ---------------------------------------------------------------------------------------
// The reference model: one sentence of the seed at a time.
// ---------------------------------------------------------------------------------------

export interface Receipt {
  start: number;
  next: number;
  closed: boolean;
}

/** "one record per Producer-Id per stream: the current epoch, its highest applied sequence, and the receipt of the producer's newest write" */
export interface ModelProducer {
  epoch: number;
  seq: number;
  receipt: Receipt;
  digest: string | null;
  /** The current epoch's claim (its seq 0): what it closed, and its digest. */
  claimClosed: { epoch: number; seq: number } | null;
  claimDigest: string | null;
  lastWriteMs: number;
}

export interface ModelStream {
  parts: Buffer[];
  tail: number;
  closed: boolean;
  incarnation: string;
  producers: Map<string, ModelProducer>;
  floor: number | null;
}

export interface Write {
  stream: number;
  producer: string;
  epoch: number;
  seq: number;
  body: Buffer;
  digest: string | undefined;
  close: boolean;
  incarnation: 'none' | 'right' | 'wrong';
  contentType: string;
}

export interface Answer {
  status: number;
  code: string | null;
  headers: Record<string, string>;
}

export const refuse = (status: number, code: string, headers: Record<string, string> = {}): Answer => ({ status, code, headers });

export function receiptHeaders(r: Receipt): Record<string, string> {
  return { 'stream-offset': offset(r.start), 'stream-next-offset': offset(r.next), ...(r.closed ? { 'stream-closed': 'true' } : {}) };
}

export function closedHeaders(p: ModelProducer): Record<string, string> {
  if (p.claimClosed === null) return {};
  return { 'producer-closed-epoch': String(p.claimClosed.epoch), 'producer-closed-seq': String(p.claimClosed.seq) };
}

export class SeedModel {
  readonly streams: ModelStream[];

  constructor(incarnations: string[]) {
    this.streams = incarnations.map((incarnation) => ({
      parts: [],
      tail: 0,
      closed: false,
      incarnation,
      producers: new Map(),
      floor: null,
    }));
  }

  append(w: Write, nowMs: number): Answer {
    const s = this.streams[w.stream]!;
    // "The server checks it against the body (400 on a mismatch)"
    if (w.digest !== undefined && w.digest !== hex(w.body)) return refuse(400, 'DIGEST_MISMATCH');
    if (w.incarnation === 'wrong') return refuse(412, 'INCARNATION_MISMATCH', { 'stream-incarnation': s.incarnation });
    this.forgetIdle(s, nowMs);
    const known = s.producers.get(w.producer);
    const identity = known ? this.judgeKnown(s, known, w) : this.judgeUnknown(s, w);
    if (identity) return identity;
    if (s.closed) return refuse(409, 'STREAM_CLOSED', { 'stream-closed': 'true', 'stream-next-offset': offset(s.tail) });
    const order = this.judgeOrder(known, w);
    if (order) return order;
    if (w.body.length > 0 && w.contentType !== STREAM_TYPE) return refuse(409, 'CONTENT_TYPE_MISMATCH');
    if (!known) {
      const full = this.makeRoom(s, nowMs);
      if (full) return full;
    }
    return this.apply(s, known, w, nowMs);
  }

  /** "A producer that has not written to a stream for 7 days is forgotten." and "When the server forgets a producer, it raises the stream's epoch floor to that producer's epoch." */
  private forgetIdle(s: ModelStream, nowMs: number): void {
    for (const [id, p] of [...s.producers]) {
      if (nowMs - p.lastWriteMs >= SETTINGS.forgetAfterMs) this.forget(s, id);
    }
  }

  private forget(s: ModelStream, id: string): void {
    const p = s.producers.get(id)!;
    s.producers.delete(id);
    s.floor = s.floor === null ? p.epoch : Math.max(s.floor, p.epoch);
  }

  /** "A write that carries Stream-Incarnation never reaches an epoch at or below the floor that the stream may have forgotten" */
  private judgeUnknown(s: ModelStream, w: Write): Answer | null {
    if (w.incarnation === 'right' && s.floor !== null && w.epoch <= s.floor) {
      return refuse(403, 'PRODUCER_EXPIRED', { 'producer-epoch': String(s.floor), 'producer-outcome': 'producer-expired' });
    }
    return null; // "Without Stream-Incarnation, a forgotten producer is new"
  }

  private judgeKnown(s: ModelStream, p: ModelProducer, w: Write): Answer | null {
    if (w.epoch < p.epoch) return this.fenced(p, w);
    if (w.epoch > p.epoch || w.seq > p.seq) return null;
    // "a different body under the key of the newest write, or of the current epoch's claim, answers 403"
    const keyDigest = w.seq === p.seq ? p.digest : w.seq === 0 ? p.claimDigest : null;
    if (w.digest !== undefined && keyDigest !== null && w.digest !== keyDigest) {
      return refuse(403, 'PRODUCER_KEY_CONFLICT', { 'producer-epoch': String(p.epoch), 'producer-seq': String(p.seq), 'producer-outcome': 'key-conflict' });
    }
    // "On 200 and 204, Producer-Seq is the highest applied sequence of the epoch"
    const ack = { 'producer-epoch': String(p.epoch), 'producer-seq': String(p.seq), ...(w.seq === 0 ? closedHeaders(p) : {}) };
    const incarnation = { 'stream-incarnation': s.incarnation };
    if (w.seq === p.seq) return { status: 204, code: null, headers: { ...receiptHeaders(p.receipt), ...ack, ...incarnation } };
    return { status: 204, code: null, headers: { ...ack, 'producer-outcome': 'receipt-evicted', ...incarnation } };
  }

  /** "Older epoch: rejected with 403 Forbidden, whether or not the write applied before." */
  private fenced(p: ModelProducer, w: Write): Answer {
    const headers: Record<string, string> = { 'producer-epoch': String(p.epoch) };
    if (p.claimClosed !== null && p.claimClosed.epoch === w.epoch) {
      Object.assign(headers, { 'producer-outcome': 'epoch-closed;by=claim', ...closedHeaders(p) });
    } else {
      headers['producer-outcome'] = 'stale-epoch';
    }
    return refuse(403, 'PRODUCER_FENCED', headers);
  }

  /**
   * "Starts at 0 for a new epoch and must increase by exactly 1 per append." A producer the
   * stream does not know skips ahead of 0 (409); "a seq above 0 of a later epoch that is
   * not claimed yet answers 400".
   */
  private judgeOrder(p: ModelProducer | undefined, w: Write): Answer | null {
    if (p === undefined) {
      if (w.seq === 0) return null;
      return refuse(409, 'PRODUCER_SEQ_GAP', { 'producer-expected-seq': '0', 'producer-received-seq': String(w.seq) });
    }
    if (w.epoch > p.epoch) {
      if (w.seq === 0) return null;
      return refuse(400, 'PRODUCER_SEQ_NOT_ZERO', { 'producer-expected-seq': '0', 'producer-received-seq': String(w.seq) });
    }
    if (w.seq === p.seq + 1) return null;
    return refuse(409, 'PRODUCER_SEQ_GAP', { 'producer-expected-seq': String(p.seq + 1), 'producer-received-seq': String(w.seq) });
  }

  /** "a new producer beyond that replaces the least recently seen producer idle for at least an hour" */
  private makeRoom(s: ModelStream, nowMs: number): Answer | null {
    if (s.producers.size < SETTINGS.maxProducers) return null;
    let oldest: [string, ModelProducer] | null = null;
    for (const entry of s.producers) {
      if (oldest === null || entry[1].lastWriteMs < oldest[1].lastWriteMs) oldest = entry;
      else if (entry[1].lastWriteMs === oldest[1].lastWriteMs && Buffer.compare(Buffer.from(entry[0]), Buffer.from(oldest[0])) < 0) oldest = entry;
    }
    const idleMs = nowMs - oldest![1].lastWriteMs;
    if (idleMs >= SETTINGS.idleEvictMs) {
      this.forget(s, oldest![0]);
      return null;
    }
    const waitSeconds = Math.max(1, Math.ceil((SETTINGS.idleEvictMs - idleMs) / 1000));
    return refuse(429, 'PRODUCER_LIMIT', { 'retry-after': String(waitSeconds) });
  }

  private apply(s: ModelStream, p: ModelProducer | undefined, w: Write, nowMs: number): Answer {
    const receipt = { start: s.tail, next: s.tail + w.body.length, closed: w.close };
    s.parts.push(w.body);
    s.tail = receipt.next;
    s.closed ||= w.close;
    const digest = w.digest ?? null;
    const next: ModelProducer =
      p !== undefined && w.epoch === p.epoch
        ? { ...p, seq: w.seq, receipt, digest, lastWriteMs: nowMs }
        : {
            epoch: w.epoch,
            seq: 0,
            receipt,
            digest,
            // "The write at seq 0 of a new epoch is its claim. When it closes an earlier epoch, its answer ... carries Producer-Closed-Epoch and Producer-Closed-Seq"
            claimClosed: p ? { epoch: p.epoch, seq: p.seq } : null,
            claimDigest: digest,
            lastWriteMs: nowMs,
          };
    s.producers.set(w.producer, next);
    const headers = { ...receiptHeaders(receipt), 'producer-epoch': String(w.epoch), 'producer-seq': String(w.seq) };
    if (w.seq === 0) Object.assign(headers, closedHeaders(next));
    // A close-only write has no bytes to place: 204, as the upstream suite requires.
    return { status: w.body.length > 0 ? 200 : 204, code: null, headers: { ...headers, 'stream-incarnation': s.incarnation } };
  }
}
