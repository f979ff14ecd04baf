/**
 * The idempotent producer (seed 000): every write carries (Producer-Id, Producer-Epoch,
 * Producer-Seq), so resending it is always safe and the stream applies it once.
 *
 * - Writes keep their call order; seqs are assigned in that order when a write is
 *   first sent, and up to `maxInFlight` writes travel at once.
 * - Small JSON messages appended one by one are batched into one array append (one
 *   message per element), up to `maxBatchBytes`/`maxBatchMessages` or `lingerMs`.
 * - A write whose outcome is unknown (timeout, reset, 5xx) is resent unchanged; the
 *   server's answer to the repeat says what happened. 429 and 503 are retried too.
 * - Writes can overtake each other on the way; a 409 gap (or 400 "seq not zero") means
 *   an earlier seq has not landed yet, so the write waits for it and is resent.
 * - The first write of an epoch (its claim) travels alone: until the claim is known to
 *   have landed, nothing else of the epoch is sent, so no write can land in an epoch
 *   another instance claimed. With `autoClaim`, a claim refused with 403 (a newer epoch
 *   exists) or found already written by someone else moves to the next epoch itself.
 * - Once the epoch is established, a 403 means a newer instance took over: the producer
 *   stops for good and rejects everything pending, and every later write, with
 *   `FencedError`. A write the takeover reports as applied (seq <= Producer-Closed-Seq)
 *   resolves instead, but only if this instance sent it before that answer: the closed
 *   seq speaks for the epoch, and a restarted instance reusing an old epoch must not take
 *   another instance's write for its own.
 * - A 409 with Stream-Last-Seq rejects only that write (`StreamSeqConflictError`); the
 *   seq it would have used is free again, so the writes after it are renumbered once
 *   none of them can still land under its old number.
 * - Any other refusal stops the producer: writes are ordered, and skipping one would
 *   break that order.
 */
import { blake3 } from '@noble/hashes/blake3.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { MAX_SAFE_PRODUCER_NUMBER, PRODUCER_OUTCOME } from '../protocol/headers.js';
import { backoffDelayMs, retryPolicy, type RetryPolicy } from './backoff.js';
import { FencedError, RillError } from './errors.js';
import { encodeOffset, positionOf } from './offsets.js';
import type { AppendResult, ProducerAnswer, StreamHandle } from './stream.js';

export interface ProducerOptions {
  /** Stable identity of the writer, the same across restarts (a name, not a random id). */
  id: string;
  /** The epoch to write in; a restarted producer must use a higher one (or `autoClaim`). Default 0. */
  epoch?: number;
  /** Move to the next epoch by itself when the claim finds a newer or taken epoch. */
  autoClaim?: boolean;
  /** Send Producer-Digest (BLAKE3-256 of each body): a reused key with another body is refused. */
  digest?: boolean;
  /** Writes travelling at once (default 5). */
  maxInFlight?: number;
  /** How long a JSON batch waits for more messages (default 2 ms). */
  lingerMs?: number;
  /** Largest batched body (default 256 KiB). */
  maxBatchBytes?: number;
  /** Most messages in one batch (default 1000). */
  maxBatchMessages?: number;
  /** Bytes held (batching, queued, in flight) before appends wait (default 16 MiB). */
  maxBufferedBytes?: number;
  /** Content type of the writes; defaults to the stream's when known. */
  contentType?: string;
  /** Per-request timeout. */
  timeoutMs?: number;
  /** Bounds the resends of one write whose outcome stays unknown. */
  retry?: Partial<RetryPolicy>;
  /** Aborting stops the producer. */
  signal?: AbortSignal;
}

export interface WriteOptions {
  /** Stream-Seq compare-and-set value; such a write is never batched with others. */
  streamSeq?: string;
}

export interface ProducerReceipt {
  epoch: number;
  /** The Producer-Seq of the write that carried this append. */
  seq: number;
  /**
   * Where this append's bytes start and end: for a batched `appendJson`, this message's
   * own offsets within the write. Absent when a duplicate's receipt was evicted.
   */
  offset: string | undefined;
  nextOffset: string | undefined;
  /** The place of this append among the messages its write carried (0 when alone). */
  index: number;
  /** The write had been applied by an earlier attempt. */
  duplicate: boolean;
}

interface Waiter {
  resolve(receipt: ProducerReceipt): void;
  reject(error: unknown): void;
  /** Bytes of this waiter's message before it in the stored write, and its own (batched JSON). */
  at?: { index: number; before: number; size: number };
}

interface Write {
  body: Uint8Array;
  contentType: string;
  streamSeq: string | undefined;
  digest: string | undefined;
  waiters: Waiter[];
  /** Buffer bytes reserved for this write's appends, released when it settles. */
  reserved: number;
  /** -1 until first sent. */
  seq: number;
  /** Attempts at the current (epoch, seq). */
  attempts: number;
  /** Attempts at the current (epoch, seq) still unanswered or answered with an unknown outcome. */
  unanswered: number;
  /** Consecutive unknown outcomes. */
  failures: number;
  /** Gap answers at the current (epoch, seq). */
  gaps: number;
  inTransit: boolean;
  /** The last answer said this (epoch, seq) is not applied yet: wait for the seq before it. */
  parked: boolean;
  retryTimer: ReturnType<typeof setTimeout> | undefined;
}

interface OpenBatch {
  parts: Uint8Array[];
  /** Size of the array body so far. */
  bytes: number;
  /** Stored size of the messages so far: each is kept as its text plus a newline. */
  stored: number;
  reserved: number;
  waiters: Waiter[];
  contentType: string;
}

const MAX_RECLAIMS = 16;
const MAX_GAP_RESENDS = 64;
const MAX_WAITING_APPENDS = 10_000;
const encoder = new TextEncoder();

export class IdempotentProducer {
  readonly id: string;
  /** @internal */ private epochValue: number;
  /** @internal */ private nextSeq = 0;
  /** @internal */ private established = false;
  /** @internal */ private readonly options: Required<Pick<ProducerOptions, 'maxInFlight' | 'lingerMs' | 'maxBatchBytes' | 'maxBatchMessages' | 'maxBufferedBytes'>>;
  /** @internal */ private readonly policy: RetryPolicy;
  /** @internal */ private openBatch: OpenBatch | undefined;
  /** @internal */ private lingerTimer: ReturnType<typeof setTimeout> | undefined;
  /** @internal */ private readonly pending: Write[] = [];
  /** Sent and not yet settled, in seq order. */
  /** @internal */ private window: Write[] = [];
  /** The lowest seq freed by a Stream-Seq conflict, while writes after it wait to be renumbered. */
  /** @internal */ private hole: number | undefined;
  /** @internal */ private failure: RillError | undefined;
  /** @internal */ private closing = false;
  /** @internal */ private bufferedBytes = 0;
  /** @internal */ private readonly roomWaiters: Array<{ bytes: number; resolve(): void; reject(e: unknown): void }> = [];
  /** @internal */ private readonly idleWaiters: Array<{ resolve(): void; reject(e: unknown): void }> = [];
  /** @internal */ private reclaims = 0;
  /** The answer to this instance's claim: Producer-Closed-Epoch/-Seq tell what of the previous epoch applied. */
  claim: ProducerAnswer | undefined;

  constructor(
    readonly stream: StreamHandle,
    /** @internal */ private readonly config: ProducerOptions,
  ) {
    if (config.id.length === 0) throw new RangeError('a producer needs a non-empty id');
    this.id = config.id;
    this.epochValue = config.epoch ?? 0;
    if (!Number.isSafeInteger(this.epochValue) || this.epochValue < 0) throw new RangeError('epoch must be a non-negative safe integer');
    this.options = {
      maxInFlight: Math.max(1, config.maxInFlight ?? 5),
      lingerMs: config.lingerMs ?? 2,
      maxBatchBytes: config.maxBatchBytes ?? 256 * 1024,
      maxBatchMessages: config.maxBatchMessages ?? 1000,
      maxBufferedBytes: config.maxBufferedBytes ?? 16 * 1024 * 1024,
    };
    this.policy = retryPolicy(config.retry);
    config.signal?.addEventListener('abort', () => this.fail(new RillError({ code: 'ABORTED', message: 'the producer was aborted', cause: config.signal?.reason })), { once: true });
  }

  get epoch(): number {
    return this.epochValue;
  }

  /** The error that stopped the producer, if it stopped. */
  get stopped(): RillError | undefined {
    return this.failure;
  }

  /** Appends one JSON message; messages without `streamSeq` may share an append. */
  async appendJson(value: unknown, options: WriteOptions = {}): Promise<ProducerReceipt> {
    const text = JSON.stringify(value);
    if (text === undefined) throw new TypeError('the value has no JSON form');
    const bytes = encoder.encode(text);
    await this.admit(bytes.length);
    if (options.streamSeq === undefined) return this.addToBatch(bytes);
    this.closeBatch();
    return this.enqueue(wrapArray([bytes]), this.jsonType(), options.streamSeq, bytes.length);
  }

  /** Appends several JSON messages as one write: all of them land together or none. */
  async appendMessages(values: readonly unknown[], options: WriteOptions = {}): Promise<ProducerReceipt> {
    if (values.length === 0) throw new RangeError('appendMessages needs at least one message');
    const body = encoder.encode(JSON.stringify(values));
    await this.admit(body.length);
    this.closeBatch();
    return this.enqueue(body, this.jsonType(), options.streamSeq, body.length);
  }

  /** Appends raw bytes as one write (never batched). */
  async append(body: Uint8Array | string, options: WriteOptions = {}): Promise<ProducerReceipt> {
    const bytes = typeof body === 'string' ? encoder.encode(body) : body;
    if (bytes.length === 0) throw new RangeError('an append needs a body');
    await this.admit(bytes.length);
    this.closeBatch();
    const type = this.config.contentType ?? this.stream.contentType ?? 'application/octet-stream';
    return this.enqueue(bytes, type, options.streamSeq, bytes.length);
  }

  /** Sends what is batched and waits until every write so far is settled. */
  async flush(): Promise<void> {
    this.closeBatch();
    this.pump();
    if (this.failure) throw this.failure;
    if (this.isIdle()) return;
    await new Promise<void>((resolve, reject) => this.idleWaiters.push({ resolve, reject }));
  }

  /** Flushes, then takes no more appends. Does not close the stream. */
  async close(): Promise<void> {
    this.closing = true;
    await this.flush();
  }

  /** @internal */ private jsonType(): string {
    const known = this.config.contentType ?? this.stream.contentType;
    return known !== undefined && /^application\/json\b/i.test(known) ? known : 'application/json';
  }

  /** @internal */ private checkOpen(): void {
    const failure = this.failure;
    // Fenced stays fenced: later writes get the same class, code and fields.
    if (failure instanceof FencedError) throw new FencedError({ code: failure.code, status: failure.status, fields: failure.fields, message: `the producer was fenced: ${failure.message}`, cause: failure });
    if (failure) throw new RillError({ code: 'PRODUCER_STOPPED', message: `the producer stopped: ${failure.message}`, cause: failure });
    if (this.closing) throw new RillError({ code: 'PRODUCER_STOPPED', message: 'the producer is closed' });
  }

  /** Waits for buffer room for an append; refuses once the producer stopped or closed. */
  /** @internal */ private async admit(bytes: number): Promise<void> {
    this.checkOpen();
    await this.reserve(bytes);
    try {
      this.checkOpen();
    } catch (error) {
      this.release(bytes);
      throw error;
    }
  }

  /** @internal */ private async reserve(bytes: number): Promise<void> {
    const fits = this.bufferedBytes === 0 || this.bufferedBytes + bytes <= this.options.maxBufferedBytes;
    if (this.roomWaiters.length === 0 && fits) {
      this.bufferedBytes += bytes;
      return;
    }
    if (this.roomWaiters.length >= MAX_WAITING_APPENDS) {
      throw new RillError({ code: 'BUFFER_FULL', message: `more than ${MAX_WAITING_APPENDS} appends are waiting for buffer space` });
    }
    await new Promise<void>((resolve, reject) => this.roomWaiters.push({ bytes, resolve, reject }));
  }

  /** @internal */ private release(bytes: number): void {
    this.bufferedBytes -= bytes;
    for (;;) {
      const next = this.roomWaiters[0];
      if (!next) return;
      if (this.bufferedBytes > 0 && this.bufferedBytes + next.bytes > this.options.maxBufferedBytes) return;
      this.roomWaiters.shift();
      this.bufferedBytes += next.bytes;
      next.resolve();
    }
  }

  /** @internal */ private addToBatch(message: Uint8Array): Promise<ProducerReceipt> {
    const type = this.jsonType();
    const batch = this.openBatch;
    const fits =
      batch !== undefined &&
      batch.contentType === type &&
      batch.parts.length < this.options.maxBatchMessages &&
      batch.bytes + message.length + 1 <= this.options.maxBatchBytes;
    if (!fits) this.closeBatch();
    const open = (this.openBatch ??= { parts: [], bytes: 1, stored: 0, reserved: 0, waiters: [], contentType: type });
    const at = { index: open.parts.length, before: open.stored, size: message.length + 1 };
    open.parts.push(message);
    open.bytes += message.length + 1;
    open.stored += message.length + 1;
    open.reserved += message.length;
    const done = new Promise<ProducerReceipt>((resolve, reject) => open.waiters.push({ resolve, reject, at }));
    if (open.parts.length >= this.options.maxBatchMessages || open.bytes >= this.options.maxBatchBytes) this.closeBatch();
    else this.lingerTimer ??= setTimeout(() => this.closeBatch(), this.options.lingerMs);
    return done;
  }

  /** Turns the batch being built into a write. */
  /** @internal */ private closeBatch(): void {
    if (this.lingerTimer !== undefined) clearTimeout(this.lingerTimer);
    this.lingerTimer = undefined;
    const batch = this.openBatch;
    this.openBatch = undefined;
    if (!batch || batch.parts.length === 0) return;
    this.pending.push(this.newWrite(wrapArray(batch.parts), batch.contentType, undefined, batch.waiters, batch.reserved));
    this.pump();
  }

  /** @internal */ private enqueue(body: Uint8Array, contentType: string, streamSeq: string | undefined, reserved: number): Promise<ProducerReceipt> {
    return new Promise<ProducerReceipt>((resolve, reject) => {
      this.pending.push(this.newWrite(body, contentType, streamSeq, [{ resolve, reject }], reserved));
      this.pump();
    });
  }

  /** @internal */ private newWrite(body: Uint8Array, contentType: string, streamSeq: string | undefined, waiters: Waiter[], reserved: number): Write {
    const digest = this.config.digest ? bytesToHex(blake3(body)) : undefined;
    return { body, contentType, streamSeq, digest, waiters, reserved, seq: -1, attempts: 0, unanswered: 0, failures: 0, gaps: 0, inTransit: false, parked: false, retryTimer: undefined };
  }

  /** Starts as many queued writes as the window allows; the claim of an epoch goes alone. */
  /** @internal */ private pump(): void {
    if (this.failure || this.hole !== undefined) return;
    const limit = this.established ? this.options.maxInFlight : 1;
    while (this.window.length < limit && this.pending.length > 0) {
      if (this.nextSeq > MAX_SAFE_PRODUCER_NUMBER) return this.fail(new RillError({ code: 'PRODUCER_STOPPED', message: 'Producer-Seq reached 2^53-1; use a new epoch' }));
      const write = this.pending.shift()!;
      write.seq = this.nextSeq++;
      this.window.push(write);
      this.attempt(write);
    }
    this.checkIdle();
  }

  /** Sends the write as it is: same epoch, same seq, same body. */
  /** @internal */ private attempt(write: Write): void {
    write.inTransit = true;
    write.parked = false;
    write.attempts++;
    write.unanswered++;
    const { id, epochValue: epoch } = this;
    const producer = { id, epoch, seq: write.seq, ...(write.digest === undefined ? {} : { digest: write.digest }) };
    this.stream
      .append(write.body, { contentType: write.contentType, streamSeq: write.streamSeq, producer, timeoutMs: this.config.timeoutMs })
      .then(
        (result) => this.onAnswer(write, result),
        (error: unknown) => this.onFailure(write, error),
      );
  }

  /** @internal */ private onAnswer(write: Write, result: AppendResult): void {
    write.inTransit = false;
    write.unanswered = Math.max(0, write.unanswered - 1);
    if (this.failure) return;
    // A duplicate answered to the very first send of a key: someone else wrote it.
    if (result.duplicate && write.attempts === 1) return this.collision(write, result);
    this.settle(write, { epoch: this.epochValue, seq: write.seq, offset: result.offset, nextOffset: result.nextOffset, index: 0, duplicate: result.duplicate });
    this.established = true;
    if (write.seq === 0) this.claim ??= result.producer;
    this.afterChange();
  }

  /** @internal */ private collision(write: Write, result: AppendResult): void {
    const current = result.producer?.epoch ?? this.epochValue;
    if (this.config.autoClaim && !this.established) return this.reclaim(current);
    this.fail(
      new FencedError({
        code: 'PRODUCER_KEY_CONFLICT',
        message: `producer ${this.id} epoch ${this.epochValue} seq ${write.seq} was already written by another instance`,
        fields: { producerEpoch: current },
      }),
    );
  }

  /** @internal */ private onFailure(write: Write, error: unknown): void {
    write.inTransit = false;
    if (this.failure) return;
    if (!(error instanceof RillError)) {
      return this.fail(new RillError({ code: 'UNEXPECTED_RESPONSE', message: String(error), cause: error }));
    }
    // An unknown outcome leaves the attempt possibly applied; any other answer says it was not.
    if (!error.outcomeUnknown) write.unanswered = Math.max(0, write.unanswered - 1);
    if (error.retryable) return this.retryLater(write, error);
    if (error.code === 'PRODUCER_SEQ_GAP' || error.code === 'PRODUCER_SEQ_NOT_ZERO') return this.onGap(write, error);
    if (error.code === 'STREAM_SEQ_CONFLICT') return this.onSeqConflict(write, error);
    if (error instanceof FencedError) return this.onFenced(error);
    this.fail(error);
  }

  /** @internal */ private retryLater(write: Write, error: RillError): void {
    write.failures++;
    if (write.failures >= this.policy.maxAttempts) {
      return this.fail(new RillError({ code: 'RETRIES_EXHAUSTED', message: `gave up resending seq ${write.seq}: ${error.message}`, cause: error, fields: error.fields }));
    }
    const delay = backoffDelayMs(write.failures, this.policy, error.fields.retryAfterSeconds);
    write.retryTimer = setTimeout(() => {
      write.retryTimer = undefined;
      if (!this.failure) this.attempt(write);
    }, delay);
  }

  /** @internal */ private onGap(write: Write, error: RillError): void {
    write.failures = 0;
    write.parked = true;
    if (++write.gaps > MAX_GAP_RESENDS) {
      return this.fail(new RillError({ code: 'UNEXPECTED_RESPONSE', message: `seq ${write.seq} keeps answering ${error.code}`, cause: error, fields: error.fields }));
    }
    this.afterChange();
  }

  /** The write's Stream-Seq was not greater than the stream's: it is not applied, its seq is free. */
  /** @internal */ private onSeqConflict(write: Write, error: RillError): void {
    this.window = this.window.filter((w) => w !== write);
    this.release(write.reserved);
    for (const waiter of write.waiters) waiter.reject(error);
    this.hole = Math.min(this.hole ?? write.seq, write.seq);
    this.afterChange();
  }

  /** @internal */ private onFenced(error: FencedError): void {
    // Only the claim travels before the epoch is established, so moving it is safe.
    if (this.config.autoClaim && !this.established) return this.reclaim(error.currentEpoch ?? this.epochValue);
    // The takeover's claim says every seq of the epoch up to Producer-Closed-Seq applied.
    // That covers this instance's writes only where one of its sends may have landed
    // (unanswered, or answered with an unknown outcome): a write whose every send was
    // refused never landed, whoever else wrote under its key.
    const closedSeq = error.outcome === PRODUCER_OUTCOME.epochClosedByClaim ? error.fields.closedSeq : undefined;
    if (closedSeq !== undefined && error.fields.closedEpoch === this.epochValue) {
      for (const write of this.window.filter((w) => w.seq <= closedSeq && w.unanswered > 0)) {
        this.settle(write, { epoch: this.epochValue, seq: write.seq, offset: undefined, nextOffset: undefined, index: 0, duplicate: true });
      }
    }
    this.fail(error);
  }

  /** Moves the (unestablished) claim to the epoch after `current`. */
  /** @internal */ private reclaim(current: number): void {
    if (++this.reclaims > MAX_RECLAIMS) {
      return this.fail(new FencedError({ code: 'PRODUCER_FENCED', message: `gave up claiming an epoch after ${MAX_RECLAIMS} tries`, fields: { producerEpoch: current } }));
    }
    this.epochValue = Math.max(this.epochValue, current) + 1;
    if (this.epochValue > MAX_SAFE_PRODUCER_NUMBER) return this.fail(new RillError({ code: 'PRODUCER_STOPPED', message: 'Producer-Epoch reached 2^53-1' }));
    this.window.forEach((write, i) => renumber(write, i));
    this.nextSeq = this.window.length;
    for (const write of this.window) this.attempt(write);
  }

  /** @internal */ private settle(write: Write, receipt: ProducerReceipt): void {
    this.window = this.window.filter((w) => w !== write);
    if (write.retryTimer !== undefined) clearTimeout(write.retryTimer);
    this.release(write.reserved);
    for (const waiter of write.waiters) waiter.resolve(waiter.at ? messageReceipt(receipt, waiter.at) : receipt);
  }

  /** After any settled answer: resend writes whose predecessor landed, renumber after a hole, send more. */
  /** @internal */ private afterChange(): void {
    if (this.failure) return;
    for (const write of this.window) {
      if (!write.parked || (this.hole !== undefined && write.seq > this.hole)) continue;
      if (!this.window.some((w) => w.seq === write.seq - 1)) this.attempt(write);
    }
    this.renumberAfterHole();
    this.pump();
  }

  /**
   * Writes after a freed seq cannot land under their numbers. Once none of them is on
   * the way or waiting to learn its outcome, they move down to fill the hole.
   */
  /** @internal */ private renumberAfterHole(): void {
    const hole = this.hole;
    if (hole === undefined) return;
    const doomed = this.window.filter((w) => w.seq > hole);
    if (doomed.some((w) => w.inTransit || w.retryTimer !== undefined || !w.parked)) return;
    doomed.forEach((write, i) => renumber(write, hole + i));
    this.window.sort((a, b) => a.seq - b.seq);
    this.nextSeq = hole + doomed.length;
    this.hole = undefined;
    for (const write of doomed) this.attempt(write);
  }

  /** @internal */ private isIdle(): boolean {
    return this.openBatch === undefined && this.pending.length === 0 && this.window.length === 0;
  }

  /** @internal */ private checkIdle(): void {
    if (!this.isIdle()) return;
    for (const waiter of this.idleWaiters.splice(0)) waiter.resolve();
  }

  /** Stops for good: everything not settled is rejected with `error`. */
  /** @internal */ private fail(error: RillError): void {
    if (this.failure) return;
    this.failure = error;
    if (this.lingerTimer !== undefined) clearTimeout(this.lingerTimer);
    const writes = [...this.window, ...this.pending];
    this.window = [];
    this.pending.length = 0;
    for (const write of writes) {
      if (write.retryTimer !== undefined) clearTimeout(write.retryTimer);
      for (const waiter of write.waiters) waiter.reject(error);
    }
    for (const waiter of this.openBatch?.waiters ?? []) waiter.reject(error);
    this.openBatch = undefined;
    for (const waiter of this.roomWaiters.splice(0)) waiter.reject(error);
    for (const waiter of this.idleWaiters.splice(0)) waiter.reject(error);
  }
}

/**
 * One batched message's receipt: rill stores a JSON message as its compact text plus a
 * newline, so its offsets follow from the write's start and the messages before it.
 * Offsets in another form (another server) stay the write's.
 */
function messageReceipt(receipt: ProducerReceipt, at: { index: number; before: number; size: number }): ProducerReceipt {
  const start = receipt.offset === undefined ? undefined : positionOf(receipt.offset);
  if (start === undefined) return { ...receipt, index: at.index };
  const offset = start + at.before;
  return { ...receipt, index: at.index, offset: encodeOffset(offset), nextOffset: encodeOffset(offset + at.size) };
}

function renumber(write: Write, seq: number): void {
  write.seq = seq;
  write.attempts = 0;
  write.unanswered = 0;
  write.gaps = 0;
  write.parked = false;
}

/** Messages as one JSON array body: each element becomes one message of the stream. */
function wrapArray(parts: Uint8Array[]): Uint8Array {
  const size = parts.reduce((n, p) => n + p.length, 0) + parts.length + 1;
  const out = new Uint8Array(Math.max(size, 2));
  out[0] = 0x5b;
  let at = 1;
  parts.forEach((part, i) => {
    if (i > 0) out[at++] = 0x2c;
    out.set(part, at);
    at += part.length;
  });
  out[at] = 0x5d;
  return out;
}
