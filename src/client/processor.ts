/**
 * Effectively-once stream processing (seed 003, mapped onto rill in DESIGN.md).
 *
 * A processor reads a source stream, groups its messages into windows, runs the
 * caller's step on each window and appends exactly one result per window to the target.
 * The result's Stream-Seq is the source offset after the window, so the result and the
 * resume point are one atomic write; no offset is stored anywhere else.
 *
 * - Start: HEAD the target for its last Stream-Seq and read the source from there.
 * - Producer headers (a stable producer id, a new epoch per start) make resends of a
 *   result safe; the first result of a start claims the epoch, which fences any older
 *   instance: its next write answers 403 and it stops.
 * - A 409 with Stream-Last-Seq means the window is already published: skip it, and jump
 *   the source ahead when the target is ahead of everything read so far.
 * - A partitioned target (several streams) gets one result at a time, and a start
 *   resumes from the highest Stream-Seq over the partitions.
 */
import { isJsonContentType } from '../protocol/content-type.js';
import { retryPolicy, type RetryPolicy } from './backoff.js';
import { NotFoundError, RillError, StreamSeqConflictError } from './errors.js';
import type { Message } from './frames.js';
import { START } from './offsets.js';
import { IdempotentProducer, type ProducerReceipt } from './producer.js';
import { afterFailure, type ReadBatch } from './read.js';
import type { StreamHandle, StreamInfo } from './stream.js';
import { splitBytes, validateSpec, WindowBuilder, type Window, type WindowSpec } from './windows.js';

export interface ProcessorOptions<In = unknown, Out = unknown> {
  source: StreamHandle;
  /** One target, or several partitions (then `partition` picks one per result). */
  target: StreamHandle | readonly StreamHandle[];
  /** Index of the partition a result goes to. */
  partition?: (result: Out, window: Window<In>) => number;
  /** Stable across restarts and unique per target: the producer name of seed 003. */
  producerId: string;
  window: WindowSpec;
  /** Computes a window's result. Keep it free of other side effects: it may run again after a crash. */
  step: (window: Window<In>) => Out | Promise<Out>;
  /** Results travelling at once on a single target with count/byte windows (default 4). */
  maxInFlight?: number;
  /** Close the target(s) once the source is closed and every result is published. */
  closeTargetOnEnd?: boolean;
  /**
   * Create each target that does not exist yet, with this content type (JSON results:
   * `application/json`). Without it, a missing target fails the run with a
   * `NotFoundError` naming the stream to create.
   */
  createTarget?: { contentType: string };
  /** How to follow the source once caught up (default long-poll). */
  live?: 'long-poll' | 'sse';
  /** Send Producer-Digest with each result (default true). */
  digest?: boolean;
  /** The epoch to claim; default the current time in ms, so a restart claims a higher one. */
  epoch?: number;
  signal?: AbortSignal;
  /** Told about every window's fate, in order. */
  onResult?: (event: ResultEvent<In, Out>) => void;
  retry?: Partial<RetryPolicy>;
}

export interface ResultEvent<In, Out> {
  window: Window<In>;
  result: Out;
  partition: number;
  /** `already-published`: the target held this window's result (or a later one) already. */
  outcome: 'published' | 'duplicate' | 'already-published';
  receipt: ProducerReceipt | undefined;
}

export interface ProcessorSummary {
  /** The source offset this run started from (the target's last Stream-Seq, or -1). */
  resumedFrom: string;
  published: number;
  alreadyPublished: number;
  /** Where the source was processed up to. */
  endOffset: string;
  /** The epoch each partition's producer ended in. */
  epochs: number[];
}

export interface ProcessorRun {
  /** Resolves when the source is closed and every result is published, or after `stop()`. */
  done: Promise<ProcessorSummary>;
  /** Stops reading, lets results on the way settle, and resolves `done`. */
  stop(): Promise<ProcessorSummary>;
}

const OFFSET = /^\d{20}$/;
const MAX_RESEEKS = 10_000;
const encoder = new TextEncoder();

type Consumed = { kind: 'closed' } | { kind: 'reseek'; offset: string } | { kind: 'stopped' };

export function runProcessor<In = unknown, Out = unknown>(options: ProcessorOptions<In, Out>): ProcessorRun {
  const processor = new Processor(options);
  const done = processor.run();
  done.catch(() => undefined);
  options.signal?.addEventListener('abort', () => processor.requestStop(), { once: true });
  return {
    done,
    stop: () => {
      processor.requestStop();
      return done;
    },
  };
}

class Processor<In, Out> {
  /** @internal */ private readonly targets: StreamHandle[];
  /** @internal */ private readonly producers: IdempotentProducer[] = [];
  /** @internal */ private readonly jsonTargets: boolean[] = [];
  /** @internal */ private readonly maxInFlight: number;
  /** @internal */ private readonly inflight: Promise<void>[] = [];
  /** @internal */ private readonly stopper = new AbortController();
  /** @internal */ private failure: unknown;
  /** @internal */ private reseekTo: string | undefined;
  /** End offset of the newest window handed to a producer. */
  /** @internal */ private producedUpTo = START;
  /** @internal */ private readonly summary: ProcessorSummary = { resumedFrom: START, published: 0, alreadyPublished: 0, endOffset: START, epochs: [] };

  constructor(/** @internal */ private readonly options: ProcessorOptions<In, Out>) {
    validateSpec(options.window);
    this.targets = Array.isArray(options.target) ? [...(options.target as StreamHandle[])] : [options.target as StreamHandle];
    if (this.targets.length === 0) throw new RangeError('a processor needs a target');
    if (this.targets.length > 1 && options.partition === undefined) throw new RangeError('several targets need a partition function');
    // Partitions and time windows get one result at a time (see the file comment and windows.ts).
    const serial = this.targets.length > 1 || options.window.timeMs !== undefined;
    this.maxInFlight = serial ? 1 : Math.max(1, options.maxInFlight ?? 4);
  }

  requestStop(): void {
    this.stopper.abort();
  }

  async run(): Promise<ProcessorSummary> {
    let offset: string;
    try {
      offset = await this.start();
    } catch (error) {
      if (this.stopper.signal.aborted) return { ...this.summary };
      throw error;
    }
    for (let reseeks = 0; ; reseeks++) {
      if (reseeks > MAX_RESEEKS) throw new RillError({ code: 'RETRIES_EXHAUSTED', message: 'the target kept moving ahead of the processor' });
      const consumed = await this.consume(offset);
      if (consumed.kind !== 'reseek') break;
      offset = consumed.offset;
      this.summary.endOffset = offset;
    }
    await this.drain();
    if (this.options.closeTargetOnEnd && !this.stopper.signal.aborted) {
      for (const target of this.targets) await this.retrying(() => target.close());
    }
    await Promise.all(this.producers.map((p) => p.close()));
    this.summary.epochs = this.producers.map((p) => p.epoch);
    return { ...this.summary };
  }

  /** Reads each target's last Stream-Seq and sets up one producer per target. */
  /** @internal */ private async start(): Promise<string> {
    const infos: StreamInfo[] = await Promise.all(this.targets.map((t) => this.retrying(() => this.headTarget(t))));
    let resume = START;
    for (const info of infos) {
      const last = info.lastSeq;
      if (last === undefined) continue;
      if (!OFFSET.test(last)) {
        throw new RillError({ code: 'UNEXPECTED_RESPONSE', message: `the target's Stream-Last-Seq ${JSON.stringify(last)} is not a source offset` });
      }
      if (resume === START || last > resume) resume = last;
    }
    const epoch = this.options.epoch ?? Date.now();
    infos.forEach((info, i) => {
      this.jsonTargets.push(isJsonContentType(info.contentType));
      const producer = new IdempotentProducer(this.targets[i]!, {
        id: this.options.producerId,
        epoch,
        autoClaim: true,
        digest: this.options.digest ?? true,
        maxInFlight: this.maxInFlight,
        contentType: info.contentType,
        ...(this.options.retry ? { retry: this.options.retry } : {}),
      });
      this.producers.push(producer);
    });
    this.summary.resumedFrom = resume;
    this.summary.endOffset = resume;
    this.producedUpTo = resume;
    return resume;
  }

  /** The target's state; a missing target is created when the options ask for it. */
  /** @internal */ private async headTarget(target: StreamHandle): Promise<StreamInfo> {
    const signal = this.stopper.signal;
    try {
      return await target.head({ signal });
    } catch (error) {
      if (!(error instanceof NotFoundError) || error.code !== 'STREAM_NOT_FOUND') throw error;
      const create = this.options.createTarget;
      if (create === undefined) {
        throw new NotFoundError({
          code: error.code,
          status: error.status,
          message: `the processor's target ${new URL(target.url).pathname} does not exist: create it, or pass createTarget: { contentType }`,
          cause: error,
        });
      }
      await target.create({ contentType: create.contentType, signal });
      return target.head({ signal });
    }
  }

  /** Repeats a request that is safe to repeat (HEAD, close), riding out a restarting server. */
  /** @internal */ private async retrying<T>(request: () => Promise<T>): Promise<T> {
    const policy = retryPolicy(this.options.retry);
    for (let failures = 0; ; ) {
      try {
        return await request();
      } catch (error) {
        failures = await afterFailure(error, failures, policy, this.stopper.signal);
      }
    }
  }

  /** Reads the source from `offset`, publishing each closed window, until it ends or must jump ahead. */
  /** @internal */ private async consume(offset: string): Promise<Consumed> {
    const window = new WindowBuilder<In>(this.options.window);
    const timeMs = this.options.window.timeMs;
    const batches = this.options.source.read({
      offset,
      live: timeMs === undefined ? (this.options.live ?? 'long-poll') : 'long-poll',
      heartbeats: true,
      longPollTimeoutMs: timeMs === undefined ? undefined : Math.min(Math.max(timeMs, 50), 20_000),
      signal: this.stopper.signal,
      retry: this.options.retry,
    });
    try {
      for await (const batch of batches) {
        const end = await this.consumeBatch(batch, window);
        if (end) return end;
      }
    } catch (error) {
      if (this.stopper.signal.aborted && error instanceof RillError && error.code === 'ABORTED') return { kind: 'stopped' };
      throw error;
    }
    return { kind: 'closed' };
  }

  /** @internal */ private async consumeBatch(batch: ReadBatch, window: WindowBuilder<In>): Promise<Consumed | undefined> {
    for (const message of batch.messages) {
      let rest: Message | undefined = message;
      while (rest !== undefined) {
        const [part, after]: [Message, Message | undefined] = this.jsonSource ? [rest, undefined] : splitBytes(rest as Message<Uint8Array>, window.roomBytes);
        window.add(part as Message<In>, Date.now());
        rest = after;
        if (window.isFull && (await this.publish(window.take()))) return this.reseek();
      }
    }
    if (window.isDue(Date.now()) && (await this.publish(window.take()))) return this.reseek();
    if (batch.closed) {
      if (!window.isEmpty && (await this.publish(window.take()))) return this.reseek();
      this.summary.endOffset = batch.nextOffset;
      return { kind: 'closed' };
    }
    return undefined;
  }

  /** @internal */ private get jsonSource(): boolean {
    return this.options.source.isJson;
  }

  /** @internal */ private reseek(): Consumed {
    const offset = this.reseekTo!;
    this.reseekTo = undefined;
    return { kind: 'reseek', offset };
  }

  /** Hands a window's result to its producer; answers true when the source must jump ahead. */
  /** @internal */ private async publish(window: Window<In>): Promise<boolean> {
    const result = await this.options.step(window);
    const index = this.partitionOf(result, window);
    this.producedUpTo = window.endOffset;
    this.inflight.push(this.send(index, window, result));
    while (this.inflight.length >= this.maxInFlight) await this.inflight.shift();
    if (this.failure !== undefined) throw this.failure;
    this.summary.endOffset = window.endOffset;
    return this.reseekTo !== undefined;
  }

  /** @internal */ private partitionOf(result: Out, window: Window<In>): number {
    if (this.targets.length === 1) return 0;
    const index = this.options.partition!(result, window);
    if (!Number.isInteger(index) || index < 0 || index >= this.targets.length) {
      throw new RangeError(`partition() answered ${index}; expected 0 to ${this.targets.length - 1}`);
    }
    return index;
  }

  /** Publishes one result; settles without throwing (a failure is kept for `publish`). */
  /** @internal */ private async send(index: number, window: Window<In>, result: Out): Promise<void> {
    const producer = this.producers[index]!;
    const streamSeq = window.endOffset;
    try {
      const receipt = this.jsonTargets[index]
        ? await producer.appendJson(result, { streamSeq })
        : await producer.append(asBytes(result), { streamSeq });
      this.summary.published += receipt.duplicate ? 0 : 1;
      this.options.onResult?.({ window, result, partition: index, outcome: receipt.duplicate ? 'duplicate' : 'published', receipt });
    } catch (error) {
      if (!(error instanceof StreamSeqConflictError) || error.fields.lastSeq === undefined) {
        this.failure ??= error;
        return;
      }
      this.alreadyPublished(error.lastSeq, window, result, index);
    }
  }

  /** @internal */ private alreadyPublished(lastSeq: string, window: Window<In>, result: Out, index: number): void {
    if (!OFFSET.test(lastSeq)) {
      this.failure ??= new RillError({ code: 'UNEXPECTED_RESPONSE', message: `Stream-Last-Seq ${JSON.stringify(lastSeq)} is not a source offset` });
      return;
    }
    this.summary.alreadyPublished++;
    // The target holds results past everything read so far: continue the source there.
    if (lastSeq > this.producedUpTo && (this.reseekTo === undefined || lastSeq > this.reseekTo)) this.reseekTo = lastSeq;
    this.options.onResult?.({ window, result, partition: index, outcome: 'already-published', receipt: undefined });
  }

  /** @internal */ private async drain(): Promise<void> {
    while (this.inflight.length > 0) await this.inflight.shift();
    if (this.failure !== undefined) throw this.failure;
  }
}

function asBytes(result: unknown): Uint8Array {
  if (result instanceof Uint8Array) return result;
  if (typeof result === 'string') return encoder.encode(result);
  throw new TypeError('results for a non-JSON target must be bytes or strings');
}
