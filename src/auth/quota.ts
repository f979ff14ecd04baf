/**
 * Quotas per token subject: appends per second, bytes per second and live connections.
 * Rates are token buckets holding one second of the rate, refilled continuously, so a
 * subject may burst to its rate and then keeps to it. Time is passed in.
 *
 * A refusal says when to come back (Retry-After) and takes nothing: a request refused for
 * bytes takes no append either.
 */
import { protocolError, type ProtocolError } from '../protocol/errors.js';

export interface QuotaSettings {
  /** Append requests per second per subject (0: unlimited). */
  appendsPerSecond: number;
  /** Body bytes per second per subject, appends and creates (0: unlimited). */
  bytesPerSecond: number;
  /** Long-poll and SSE readers one subject holds at once (0: unlimited). */
  liveConnections: number;
}

export const NO_QUOTAS: QuotaSettings = { appendsPerSecond: 0, bytesPerSecond: 0, liveConnections: 0 };

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
  bytes: Bucket | null;
  live: number;
}

function rateLimited(what: string, waitMs: number): ProtocolError {
  const retryAfterSeconds = Math.max(1, Math.ceil(waitMs / 1000));
  return protocolError('RATE_LIMITED', `over this token's quota of ${what}; retry after ${retryAfterSeconds} s`, { retryAfterSeconds });
}

export class Quotas {
  private readonly subjects = new Map<string, SubjectUse>();

  constructor(private readonly settings: QuotaSettings) {}

  get enabled(): boolean {
    const s = this.settings;
    return s.appendsPerSecond > 0 || s.bytesPerSecond > 0 || s.liveConnections > 0;
  }

  get limitsBytes(): boolean {
    return this.settings.bytesPerSecond > 0;
  }

  private use(subject: string, nowMs: number): SubjectUse {
    let use = this.subjects.get(subject);
    if (use === undefined) {
      if (this.subjects.size >= MAX_SUBJECTS) this.forgetIdle(nowMs);
      const s = this.settings;
      use = { appends: s.appendsPerSecond > 0 ? new Bucket(s.appendsPerSecond, nowMs) : null, bytes: s.bytesPerSecond > 0 ? new Bucket(s.bytesPerSecond, nowMs) : null, live: 0 };
      this.subjects.set(subject, use);
    }
    return use;
  }

  private forgetIdle(nowMs: number): void {
    for (const [subject, use] of this.subjects) {
      if (use.live === 0 && (use.appends?.isFull(nowMs) ?? true) && (use.bytes?.isFull(nowMs) ?? true)) this.subjects.delete(subject);
    }
  }

  /** Takes `appends` appends and `bytes` bytes, or nothing and a refusal. */
  takeWrite(subject: string, appends: number, bytes: number, nowMs: number): ProtocolError | null {
    const use = this.use(subject, nowMs);
    const appendWait = appends > 0 ? (use.appends?.waitMs(appends, nowMs) ?? 0) : 0;
    if (appendWait > 0) return rateLimited(`${this.settings.appendsPerSecond} appends per second`, appendWait);
    const byteWait = bytes > 0 ? (use.bytes?.waitMs(bytes, nowMs) ?? 0) : 0;
    if (byteWait > 0) return rateLimited(`${this.settings.bytesPerSecond} bytes per second`, byteWait);
    if (appends > 0) use.appends?.take(appends);
    if (bytes > 0) use.bytes?.take(bytes);
    return null;
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
