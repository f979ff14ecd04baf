/**
 * Quotas per token subject: messages written per second, creates per second, bytes per
 * second and live connections.
 * Rates are token buckets holding one second of the rate, refilled continuously, so a
 * subject may burst to its rate and then keeps to it. Time is passed in.
 *
 * A refusal says when to come back (Retry-After) and takes nothing: a request refused for
 * bytes takes no append either.
 *
 * The appends quota counts messages written, not requests: an append-batch of N frames, or
 * a JSON append whose body is an array of N values, costs N (see messagesOf). Counting
 * needs the body, so a write is charged twice: on arrival its bytes, with its appends
 * bucket only checked to hold at least one message (takeArrival); once its body is read
 * and framed, its messages (takeMessages). A request refused then writes nothing and
 * keeps its bytes charged: they were received, and giving them back would let a subject
 * send bodies without bound as long as each is refused.
 *
 * Creates (a stream, a fork, a subscription) are charged on arrival, one each, whether or
 * not the name is new: an idempotent PUT of an existing stream costs what a new one does,
 * since the server cannot tell them apart without the work the quota is there to bound.
 * A create refused after arrival (its bucket full, its initial messages over the quota)
 * keeps its create charged, as a write keeps its bytes.
 */
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import { messagesOfWrite } from '../core/records.js';

export interface QuotaSettings {
  /** Messages written per second per subject (0: unlimited). */
  appendsPerSecond: number;
  /** Stream creates (forks included) and subscription creates per second per subject (0: unlimited). */
  createsPerSecond: number;
  /** Body bytes per second per subject, appends and creates (0: unlimited). */
  bytesPerSecond: number;
  /** Long-poll and SSE readers one subject holds at once (0: unlimited). */
  liveConnections: number;
}

export const NO_QUOTAS: QuotaSettings = { appendsPerSecond: 0, createsPerSecond: 0, bytesPerSecond: 0, liveConnections: 0 };

/** Subjects tracked; past it idle subjects (full buckets, no live readers) are forgotten. */
const MAX_SUBJECTS = 100_000;

class Bucket {
  private level: number;
  private atMs: number;

  constructor(
    private readonly ratePerSecond: number,
    nowMs: number,
  ) {
    this.level = ratePerSecond;
    this.atMs = nowMs;
  }

  private refill(nowMs: number): void {
    const elapsed = Math.max(0, nowMs - this.atMs);
    this.level = Math.min(this.ratePerSecond, this.level + (elapsed * this.ratePerSecond) / 1000);
    this.atMs = Math.max(this.atMs, nowMs);
  }

  /** Milliseconds until `amount` fits (0: it fits now). An amount over the whole bucket fits once it is full. */
  waitMs(amount: number, nowMs: number): number {
    this.refill(nowMs);
    const needed = Math.min(amount, this.ratePerSecond);
    return this.level >= needed ? 0 : Math.ceil(((needed - this.level) * 1000) / this.ratePerSecond);
  }

  take(amount: number): void {
    this.level -= amount;
  }

  isFull(nowMs: number): boolean {
    this.refill(nowMs);
    return this.level >= this.ratePerSecond;
  }
}

interface SubjectUse {
  appends: Bucket | null;
  creates: Bucket | null;
  bytes: Bucket | null;
  live: number;
}

function rateLimited(what: string, waitMs: number): ProtocolError {
  const retryAfterSeconds = Math.max(1, Math.ceil(waitMs / 1000));
  return protocolError('RATE_LIMITED', `over this token's quota of ${what}; retry after ${retryAfterSeconds} s`, { retryAfterSeconds });
}

/** What a write is, as known from its route and headers before its body is read. */
export interface ArrivingWrite {
  /** An append, an append-batch or a transaction: it will be charged messages. */
  append: boolean;
  /** A stream create or fork, or a subscription create. */
  create: boolean;
  /** Its declared Content-Length (0 when it has none). */
  bytes: number;
}

function bucketOf(ratePerSecond: number, nowMs: number): Bucket | null {
  return ratePerSecond > 0 ? new Bucket(ratePerSecond, nowMs) : null;
}

export class Quotas {
  private readonly subjects = new Map<string, SubjectUse>();

  constructor(private readonly settings: QuotaSettings) {}

  get enabled(): boolean {
    const s = this.settings;
    return s.appendsPerSecond > 0 || s.createsPerSecond > 0 || s.bytesPerSecond > 0 || s.liveConnections > 0;
  }

  get limitsMessages(): boolean {
    return this.settings.appendsPerSecond > 0;
  }

  get limitsBytes(): boolean {
    return this.settings.bytesPerSecond > 0;
  }

  private use(subject: string, nowMs: number): SubjectUse {
    let use = this.subjects.get(subject);
    if (use === undefined) {
      if (this.subjects.size >= MAX_SUBJECTS) this.forgetIdle(nowMs);
      const s = this.settings;
      use = { appends: bucketOf(s.appendsPerSecond, nowMs), creates: bucketOf(s.createsPerSecond, nowMs), bytes: bucketOf(s.bytesPerSecond, nowMs), live: 0 };
      this.subjects.set(subject, use);
    }
    return use;
  }

  private forgetIdle(nowMs: number): void {
    for (const [subject, use] of this.subjects) {
      const idle = [use.appends, use.creates, use.bytes].every((bucket) => bucket?.isFull(nowMs) ?? true);
      if (use.live === 0 && idle) this.subjects.delete(subject);
    }
  }

  /**
   * A write arriving: takes its create (when it is one) and its `bytes`, or nothing and a
   * refusal. An append is refused here, before its body is read, when its subject has not
   * one message left; its messages are taken later (takeMessages).
   */
  takeArrival(subject: string, write: ArrivingWrite, nowMs: number): ProtocolError | null {
    const use = this.use(subject, nowMs);
    const appendWait = write.append ? (use.appends?.waitMs(1, nowMs) ?? 0) : 0;
    if (appendWait > 0) return this.overMessages(appendWait);
    const createWait = write.create ? (use.creates?.waitMs(1, nowMs) ?? 0) : 0;
    if (createWait > 0) return rateLimited(`${this.settings.createsPerSecond} creates per second`, createWait);
    const byteWait = write.bytes > 0 ? (use.bytes?.waitMs(write.bytes, nowMs) ?? 0) : 0;
    if (byteWait > 0) return rateLimited(`${this.settings.bytesPerSecond} bytes per second`, byteWait);
    if (write.create) use.creates?.take(1);
    if (write.bytes > 0) use.bytes?.take(write.bytes);
    return null;
  }

  /**
   * Takes `messages` from the subject's appends, or nothing and a refusal. More than a
   * whole second's worth would never fit, so it is refused for good (no Retry-After) rather
   * than let through as a debt: one request must not carry more than the quota.
   */
  takeMessages(subject: string, messages: number, nowMs: number): ProtocolError | null {
    const rate = this.settings.appendsPerSecond;
    if (rate === 0 || messages === 0) return null;
    if (messages > rate) {
      return protocolError('REQUEST_OVER_QUOTA', `this request writes ${messages} messages, more than this token's whole quota of ${rate} per second; send at most ${rate} at a time`);
    }
    const use = this.use(subject, nowMs);
    const wait = use.appends!.waitMs(messages, nowMs);
    if (wait > 0) return this.overMessages(wait);
    use.appends!.take(messages);
    return null;
  }

  private overMessages(waitMs: number): ProtocolError {
    return rateLimited(`${this.settings.appendsPerSecond} messages per second`, waitMs);
  }

  /** Takes a live-reader slot; the caller gives it back with `releaseLive`. */
  takeLive(subject: string, nowMs: number): ProtocolError | null {
    const limit = this.settings.liveConnections;
    const use = this.use(subject, nowMs);
    if (limit > 0 && use.live >= limit) return rateLimited(`${limit} live connections`, 1000);
    use.live++;
    return null;
  }

  releaseLive(subject: string): void {
    const use = this.subjects.get(subject);
    if (use !== undefined && use.live > 0) use.live--;
  }
}

/** What one write stores: its framed data, and whether that is JSON (one message per line). */
export interface WrittenPayload {
  json: boolean;
  data: Uint8Array;
}

/**
 * Messages a write costs against the appends quota: a JSON payload's framed messages,
 * any other payload one. An append that stores none (a close) still costs one: it is a
 * write all the same. An append-batch or a transaction passes one payload per frame or
 * operation.
 */
export function messagesOf(payloads: readonly WrittenPayload[]): number {
  let total = 0;
  for (const { json, data } of payloads) total += Math.max(1, messagesOfWrite(json, data));
  return total;
}
