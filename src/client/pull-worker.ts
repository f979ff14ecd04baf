/**
 * A pull-wake worker: waits for a wake (tailing the subscription's wake stream, or
 * polling with backoff), claims it, reads each pending stream from its acknowledged
 * offset to the wake's snapshot tail, hands every batch to the application and acks it
 * once the handler resolved, then ends the wake with `done: true`.
 *
 * At-least-once: a crash (or a lost lease) loses nothing acknowledged and at worst hands
 * a batch that was not acknowledged to a handler again. A fenced wake (another worker
 * holds the subscription now) is dropped; a handler that throws releases the wake so
 * that it is claimed again.
 */
import { backoffDelayMs, sleep, type RetryPolicy } from './backoff.js';
import { GoneError, NotFoundError, RillError, WakeFencedError } from './errors.js';
import type { Message } from './frames.js';
import type { ReadBatch } from './read.js';
import type { Subscriptions, SubscriptionStreamInfo, Wake } from './subscriptions.js';

export interface PullBatchContext {
  /** Where the batch starts in its stream. */
  offset: string;
  /** Where it ends: the offset its ack moves the cursor to. */
  nextOffset: string;
  /** The batch's bytes as read (JSON streams: the messages as one JSON array). */
  data: Uint8Array;
  wake: Wake;
  /** Fires when the worker is stopped. */
  signal: AbortSignal;
}

export interface PullWorkerOptions {
  subscriptions: Subscriptions;
  /** The pull-wake subscription's id. */
  id: string;
  /** This worker's name, shown as the wake's holder. */
  worker: string;
  /** Processes one batch of a stream; its batch is acked only after it resolves. */
  handle: (stream: string, messages: Message[], context: PullBatchContext) => Promise<void> | void;
  /** Stops the worker; the wake it holds is released. */
  signal?: AbortSignal;
  /** Longest wait for a wake before claiming again. Default 20 s. */
  idleWaitMs?: number;
  /** The stream to tail for wake events; default the subscription's `wakeStream`; null polls only. */
  wakeStream?: string | null;
  /**
   * Resolve once there is no work left (a claim answers NO_PENDING_WORK) instead of
   * waiting for more: a job run by cron, or a test.
   */
  untilIdle?: boolean;
  /** Upper bound on one read answer's size, so a batch stays small. */
  maxBytes?: number;
  /**
   * Called when a handler threw (its wake was released); the worker then pauses and
   * goes on. Without it, a handler's error ends the worker (`run` rejects with it).
   */
  onError?: (error: unknown, wake: Wake) => void;
}

export interface PullWorkerSummary {
  /** Wakes claimed. */
  wakes: number;
  /** Batches handled and acknowledged. */
  batches: number;
  /** Wakes dropped because a newer one fenced them. */
  fenced: number;
  /** Wakes given back after a failure. */
  released: number;
}

export const DEFAULT_IDLE_WAIT_MS = 20_000;
/** Polling for work: 100 ms doubling up to the idle wait. */
const POLL: Omit<RetryPolicy, 'maxDelayMs'> = { maxAttempts: Infinity, baseDelayMs: 100 };

/** A handler's own failure, told apart from the worker's requests failing. */
class HandlerFailure {
  constructor(readonly cause: unknown) {}
}

/** Runs until `signal` fires (resolving with what it did) or a failure it cannot ride out. */
export async function runPullWorker(options: PullWorkerOptions): Promise<PullWorkerSummary> {
  const signal = options.signal ?? new AbortController().signal;
  const summary: PullWorkerSummary = { wakes: 0, batches: 0, fenced: 0, released: 0 };
  const waiter = await wakeWaiter(options, signal);
  try {
    for (;;) {
      const wake = await claimWhenWoken(options, waiter, signal);
      if (wake === undefined) return summary;
      summary.wakes += 1;
      await processWake(options, wake, summary, signal);
    }
  } catch (error) {
    // Stopped: whatever failed did so because of the stop (the held wake was released).
    if (signal.aborted) return summary;
    throw error;
  } finally {
    await waiter.close();
  }
}

/** Waits for a sign of work: a wake event, or, without a wake stream, the next poll. */
interface WakeWaiter {
  wait(): Promise<void>;
  /** A claim succeeded: polling starts over at its shortest delay. */
  reset(): void;
  close(): Promise<void>;
}

async function wakeWaiter(options: PullWorkerOptions, signal: AbortSignal): Promise<WakeWaiter> {
  const idleWaitMs = options.idleWaitMs ?? DEFAULT_IDLE_WAIT_MS;
  let polls = 0;
  const poll: WakeWaiter = {
    wait: () => sleep(backoffDelayMs((polls += 1), { ...POLL, maxDelayMs: idleWaitMs }), signal),
    reset: () => (polls = 0),
    close: async () => undefined,
  };
  const path = options.wakeStream === undefined ? (await options.subscriptions.get(options.id, { signal })).wakeStream : options.wakeStream;
  if (path === undefined || path === null) return poll;
  const stream = options.subscriptions.stream(path);
  // Where the wake stream ends before the first claim: an event appended after it is seen.
  let start: string;
  try {
    start = (await stream.head({ signal })).nextOffset;
  } catch (error) {
    if (error instanceof NotFoundError) return poll;
    throw error;
  }
  const events = stream.read({ offset: start, live: 'long-poll', longPollTimeoutMs: idleWaitMs, heartbeats: true, maxBytes: 64 * 1024, signal })[Symbol.asyncIterator]();
  let tailing = true;
  return {
    // One answer of the wake stream: new events, or the end of a long-poll without any.
    async wait() {
      if (!tailing) return poll.wait();
      try {
        const next = await events.next();
        if (next.done) tailing = false;
      } catch (error) {
        if (signal.aborted) throw error;
        tailing = false; // the wake stream went away: poll from now on
      }
    },
    reset: poll.reset,
    close: async () => void (await events.return?.(undefined)),
  };
}

/** The next claimed wake; undefined when `untilIdle` and nothing is pending. */
async function claimWhenWoken(options: PullWorkerOptions, waiter: WakeWaiter, signal: AbortSignal): Promise<Wake | undefined> {
  let failures = 0;
  for (;;) {
    try {
      const wake = await options.subscriptions.claim(options.id, options.worker, { signal });
      waiter.reset();
      return wake;
    } catch (error) {
      if (!(error instanceof RillError)) throw error;
      if (error.code === 'NO_PENDING_WORK' && options.untilIdle) return undefined;
      // Nothing to do, or another worker holds the wake (its lease may expire): wait for a wake.
      if (error.code === 'NO_PENDING_WORK' || error.code === 'ALREADY_CLAIMED') {
        await waiter.wait();
        continue;
      }
      if (!error.retryable) throw error;
      failures += 1;
      await sleep(backoffDelayMs(failures, { maxAttempts: Infinity, baseDelayMs: 100, maxDelayMs: 5_000 }, error.fields.retryAfterSeconds), signal);
    }
  }
}

async function processWake(options: PullWorkerOptions, wake: Wake, summary: PullWorkerSummary, signal: AbortSignal): Promise<void> {
  try {
    for (const info of wake.streams) {
      if (info.hasPending) await processStream(options, wake, info, summary, signal);
    }
    await options.subscriptions.ack(options.id, wake, [], { done: true, signal });
  } catch (failure) {
    if (failure instanceof WakeFencedError) {
      summary.fenced += 1;
      return;
    }
    await releaseQuietly(options, wake, summary);
    const error = failure instanceof HandlerFailure ? failure.cause : failure;
    if (signal.aborted) throw error;
    if (failure instanceof HandlerFailure && options.onError) options.onError(error, wake);
    else if (!(error instanceof RillError && error.retryable)) throw error;
    // Released work is claimed again at once: pause first, so a failing handler does not spin.
    await sleep(Math.min(options.idleWaitMs ?? DEFAULT_IDLE_WAIT_MS, 1_000), signal);
  }
}

/** Reads one stream from its cursor to the wake's tail, acking each batch after its handler. */
async function processStream(options: PullWorkerOptions, wake: Wake, info: SubscriptionStreamInfo, summary: PullWorkerSummary, signal: AbortSignal): Promise<void> {
  const batches = options.subscriptions.stream(info.path).read({ offset: info.ackedOffset, signal, ...(options.maxBytes === undefined ? {} : { maxBytes: options.maxBytes }) });
  try {
    for await (const batch of batches) {
      await handleBatch(options, wake, info.path, batch, signal);
      await options.subscriptions.ack(options.id, wake, [{ stream: info.path, offset: batch.nextOffset }], { signal });
      summary.batches += 1;
      // Offsets of one server compare as strings; what came after the wake wakes again.
      if (batch.nextOffset >= info.tailOffset) return;
    }
  } catch (error) {
    // A stream deleted since the wake leaves the subscription: none of it is left to handle.
    if ((error instanceof NotFoundError && error.code === 'STREAM_NOT_FOUND') || (error instanceof GoneError && error.code === 'STREAM_GONE')) return;
    throw error;
  }
}

async function handleBatch(options: PullWorkerOptions, wake: Wake, path: string, batch: ReadBatch, signal: AbortSignal): Promise<void> {
  try {
    await options.handle(path, batch.messages, { offset: batch.offset, nextOffset: batch.nextOffset, data: batch.data, wake, signal });
  } catch (error) {
    throw new HandlerFailure(error);
  }
}

/** Gives the wake back so it can be claimed again; a wake already fenced or gone needs nothing. */
async function releaseQuietly(options: PullWorkerOptions, wake: Wake, summary: PullWorkerSummary): Promise<void> {
  try {
    await options.subscriptions.release(options.id, wake);
    summary.released += 1;
  } catch {
    // Fenced, expired or unreachable: the lease ends the wake by itself.
  }
}
