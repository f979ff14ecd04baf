/**
 * The two Stream-Seq recipes of seed 001.
 *
 * PrefixCountCommitter: several writers extend one JSON log; each commit carries the
 * number of events its writer had read (zero-padded), so a commit is accepted only by
 * a writer that saw the whole log. On a Stream-Seq 409 it reads on and tries again.
 *
 * OutboxPublisher: one logical publisher (possibly failing over between owners)
 * publishes facts numbered by their commit in a source of truth. Producer headers make
 * retries safe; the commit number as Stream-Seq makes a republished fact a 409 with
 * Stream-Last-Seq, which means "already published".
 */
import { StreamSeqConflictError, RillError } from './errors.js';
import { START, formatSeq, OFFSET_DIGITS } from './offsets.js';
import { IdempotentProducer, type ProducerOptions, type ProducerReceipt } from './producer.js';
import type { StreamHandle } from './stream.js';

export interface PrefixCountOptions<E> {
  /** Called for every event read, in log order, to keep the state commits are validated against. */
  apply?: (event: E, index: number) => void;
  /** Digits of the count (default 20). */
  width?: number;
  /** Commits tried before giving up when other writers keep winning (default 32). */
  maxAttempts?: number;
  signal?: AbortSignal;
}

export interface CommitContext<E> {
  /** Events in the log before this commit. */
  count: number;
  /** Events read since the previous attempt (or since the committer started). */
  newEvents: E[];
}

export type CommitOutcome<E> =
  | { committed: true; events: E[]; streamSeq: string; attempts: number }
  | { committed: false; attempts: number };

export class PrefixCountCommitter<E = unknown> {
  /** Events read so far: every event since the stream was created. */
  count = 0;
  /** Where the next read continues. */
  offset = START;
  /** @internal */ private readonly width: number;
  /** @internal */ private readonly maxAttempts: number;

  constructor(
    readonly stream: StreamHandle,
    /** @internal */ private readonly options: PrefixCountOptions<E> = {},
  ) {
    this.width = options.width ?? OFFSET_DIGITS;
    this.maxAttempts = options.maxAttempts ?? 32;
  }

  /** Reads to the tail with consistency=leader, counting (and applying) every event. */
  async catchUp(): Promise<E[]> {
    const read: E[] = [];
    const batches = this.stream.read({ offset: this.offset, consistency: 'leader', signal: this.options.signal });
    for await (const batch of batches) {
      if (!this.stream.isJson) throw new RillError({ code: 'UNEXPECTED_RESPONSE', message: 'prefix-count commits need a JSON stream' });
      for (const message of batch.messages) {
        const event = message.value as E;
        this.options.apply?.(event, this.count);
        this.count++;
        read.push(event);
      }
      this.offset = batch.nextOffset;
    }
    return read;
  }

  /**
   * Commits the events `build` returns (at least one; `undefined` declines). `build` sees
   * the log as read so far and runs again after every lost race. When an append's
   * answer is lost, `isOwn` recognises the commit's events (say, by an operation id) in
   * the log; without it, such a failure is thrown, since a blind retry could commit twice.
   */
  async commit(build: (context: CommitContext<E>) => E[] | undefined | Promise<E[] | undefined>, isOwn?: (event: E) => boolean): Promise<CommitOutcome<E>> {
    let newEvents = await this.catchUp();
    for (let attempt = 1; attempt <= this.maxAttempts; attempt++) {
      const events = await build({ count: this.count, newEvents });
      if (events === undefined) return { committed: false, attempts: attempt };
      if (events.length === 0) throw new RangeError('a commit needs at least one event');
      const streamSeq = formatSeq(this.count, this.width);
      try {
        await this.stream.appendMessages(events, { streamSeq, signal: this.options.signal });
        return { committed: true, events, streamSeq, attempts: attempt };
      } catch (error) {
        // A refused connection sent nothing: like a lost race, read on and try again.
        const lostRace = error instanceof StreamSeqConflictError || (error instanceof RillError && error.code === 'CONNECTION_FAILED');
        const lostAnswer = !lostRace && isOwn !== undefined && error instanceof RillError && error.outcomeUnknown;
        if (!lostRace && !lostAnswer) throw error;
        // Read on: the events that beat us, or our own commit if its answer was lost.
        newEvents = await this.catchUp();
        if (lostAnswer && newEvents.some(isOwn!)) return { committed: true, events, streamSeq, attempts: attempt };
      }
    }
    throw new RillError({ code: 'RETRIES_EXHAUSTED', message: `no commit won within ${this.maxAttempts} attempts` });
  }
}

export interface OutboxOptions extends Omit<ProducerOptions, 'contentType'> {
  /** Digits of the commit numbers (default 20). */
  width?: number;
}

export type PublishOutcome =
  | { published: true; streamSeq: string; receipt: ProducerReceipt }
  /** The stream already holds this fact or a later one: go on with the next fact. */
  | { published: false; streamSeq: string; lastSeq: string };

export class OutboxPublisher {
  readonly producer: IdempotentProducer;
  /** @internal */ private readonly width: number;
  /** @internal */ private lastSent: string | undefined;

  constructor(
    readonly stream: StreamHandle,
    options: OutboxOptions,
  ) {
    this.width = options.width ?? OFFSET_DIGITS;
    this.producer = new IdempotentProducer(stream, options);
  }

  /** The last commit number the stream accepted (HEAD Stream-Last-Seq), where a new owner resumes. */
  async lastPublished(): Promise<string | undefined> {
    return (await this.stream.head()).lastSeq;
  }

  /**
   * Publishes the fact with commit number `commit`, in commit order. Resolves with
   * `published: false` when the stream already holds it; any other refusal rejects.
   */
  async publish(commit: number | bigint | string, fact: unknown): Promise<PublishOutcome> {
    const streamSeq = formatSeq(commit, this.width);
    if (this.lastSent !== undefined && streamSeq <= this.lastSent) {
      throw new RangeError(`commit ${streamSeq} is not after ${this.lastSent}: publish in commit order`);
    }
    this.lastSent = streamSeq;
    try {
      const receipt = fact instanceof Uint8Array ? await this.producer.append(fact, { streamSeq }) : await this.producer.appendJson(fact, { streamSeq });
      return { published: true, streamSeq, receipt };
    } catch (error) {
      // Only the Stream-Seq 409 (the one that carries Stream-Last-Seq) means "already published".
      if (error instanceof StreamSeqConflictError && error.fields.lastSeq !== undefined) {
        return { published: false, streamSeq, lastSeq: error.fields.lastSeq };
      }
      throw error;
    }
  }

  flush(): Promise<void> {
    return this.producer.flush();
  }

  close(): Promise<void> {
    return this.producer.close();
  }
}
