/**
 * Writers that spread their writes over the nodes round robin and fail over to the next node
 * when a connection is refused (nothing was sent). They differ in what they do when a write's
 * outcome is unknown (no answer, or a 5xx):
 *  - PlainWriter abandons it (a blind resend could store it twice);
 *  - ProducerWriter resends it unchanged, to whichever node is next (the server answers a
 *    resend that had applied 204, a duplicate);
 *  - StreamSeqWriter resends it too: a 409 STREAM_SEQ_CONFLICT with its own value as
 *    Stream-Last-Seq then means the first attempt landed (it is the stream's only Stream-Seq writer).
 */
import { offset as pad20 } from '../http.js';
import { blake3Hex } from '../producer-client.js';
import { seededRandom, testSeed, type Rng } from '../seed.js';
import { JSON_TYPE, messageOf, violation, type LoadContext } from './load.js';
import { NoAnswer, observed, sleep, type Answer } from './send.js';

// The pauses below are the clients' own behaviour, as a real client's backoff is: after no
// answer or a 5xx a writer waits before it tries again, and between writes it paces itself.
/** Pause after no answer before resending (a refused connection goes to the next node at once otherwise). */
const RESEND_PAUSE_MS = 10;
const DEFAULT_PAUSE_AFTER_5XX_MS = 50;

/** A delay after which to drop the answer, for a share `loseChance` of writes. */
function maybeLose(ctx: LoadContext, rng: Rng): number | undefined {
  return ctx.loseChance && rng.next() < ctx.loseChance ? rng.int(0, 8) : undefined;
}

/** A number of the writer's id, so that each writer draws from a seeded generator of its own. */
function seedOffsetOf(id: string): number {
  let hash = 0;
  for (const char of id) hash = (Math.imul(hash, 31) + char.charCodeAt(0)) >>> 0;
  return hash;
}

/** Round robin over the nodes. */
class RoundRobin {
  constructor(
    private readonly urls: string[],
    private at: number,
  ) {}
  next(): string {
    const url = this.urls[this.at % this.urls.length]!;
    this.at += 1;
    return url;
  }
}

/** What every writer has: its id, the context, the node it writes to next and its pause between writes. */
abstract class Writer {
  private readonly rr: RoundRobin;
  /** The writer's random choices (answers it drops, jitter), replayable from the file's seed. */
  protected readonly rng: Rng;

  constructor(
    readonly id: string,
    protected readonly ctx: LoadContext,
    start: number,
    private readonly pauseMs: number,
  ) {
    this.rr = new RoundRobin(ctx.urls, start);
    this.rng = seededRandom(testSeed() + seedOffsetOf(id));
  }

  abstract run(): Promise<void>;

  /** Whether to begin another write: not told to stop, and before the deadline. */
  protected goingOn(): boolean {
    return !this.ctx.stopping() && Date.now() < this.ctx.deadline;
  }

  protected async pause(): Promise<void> {
    if (this.pauseMs > 0) await sleep(this.pauseMs); // the writer's pace between writes
  }

  /** One append to the next node; the answer may be dropped on purpose (LoadContext.loseChance). */
  protected post(headers: Record<string, string>, body: string): Promise<Answer> {
    return observed(this.ctx, this.id, this.rr.next() + this.ctx.path, { method: 'POST', headers, body, loseAfterMs: maybeLose(this.ctx, this.rng) });
  }

  /**
   * One attempt of a write that is resent until answered: the answer, or after a pause
   * 'not-sent' (connection refused) or 'maybe-applied' (no answer, or a 5xx).
   */
  protected async attempt(headers: Record<string, string>, body: string): Promise<Answer | 'not-sent' | 'maybe-applied'> {
    let answer: Answer;
    try {
      answer = await this.post(headers, body);
    } catch (error) {
      if (!(error instanceof NoAnswer)) throw error;
      await sleep(RESEND_PAUSE_MS); // backoff before the resend
      return error.refused ? 'not-sent' : 'maybe-applied';
    }
    if (answer.status < 500) return answer;
    await sleep(this.ctx.pauseAfter5xxMs ?? DEFAULT_PAUSE_AFTER_5XX_MS); // backoff after a 5xx
    return 'maybe-applied';
  }
}

export type PlainOutcome =
  | 'acked'
  /** No answer, or a 503 that said the outcome is unknown: present once or absent. */
  | 'unknown'
  /** A 503 that said the write was not applied: must be absent. */
  | 'refused';

/** Plain appends, one at a time; an unknown outcome is abandoned (a blind resend could double it). */
export class PlainWriter extends Writer {
  readonly outcomes = new Map<number, PlainOutcome>();
  /** Acknowledged writes, in acknowledgement order. */
  readonly acked: number[] = [];
  /** Stream-Next-Offset of each acknowledged write. */
  readonly receipts = new Map<number, number>();
  failovers = 0;

  constructor(id: string, ctx: LoadContext, start = 0, pauseMs = 2) {
    super(id, ctx, start, pauseMs);
  }

  async run(): Promise<void> {
    for (let n = 0; this.goingOn(); n++) {
      this.outcomes.set(n, await this.deliver(n));
      await this.pause();
    }
  }

  private async deliver(n: number): Promise<PlainOutcome> {
    const body = messageOf(this.id, n);
    // Refused connections sent nothing: the same write goes to the next node.
    for (let tries = 0; Date.now() < this.ctx.deadline; tries++) {
      let answer: Answer;
      try {
        answer = await this.post(JSON_TYPE, body);
      } catch (error) {
        if (!(error instanceof NoAnswer)) throw error;
        if (!error.refused) return 'unknown';
        this.failovers += 1;
        // The first few at once (another node is up), then gently (all may be restarting).
        await sleep(tries < 3 ? 0 : 20); // backoff after a refused connection
        continue;
      }
      if (answer.status === 204) {
        this.acked.push(n);
        this.receipts.set(n, Number(answer.headers.get('stream-next-offset')));
        return 'acked';
      }
      if (answer.status >= 500) {
        const outcome = answer.status === 503 && /not applied/.test(answer.message ?? '') ? 'refused' : 'unknown';
        await sleep(this.ctx.pauseAfter5xxMs ?? DEFAULT_PAUSE_AFTER_5XX_MS); // backoff after a 5xx
        return outcome;
      }
      violation(this.ctx, `${this.id} write ${n}: answered ${answer.status} ${answer.text.slice(0, 200)}`);
      return 'unknown';
    }
    return 'unknown';
  }
}

interface ProducerAck {
  status: 200 | 204;
  /** Stream-Next-Offset of the receipt, when the answer carried one. */
  next: number | null;
  attempts: number;
}

/**
 * An idempotent producer (epoch 0, seq from 0, digest sent): up to `window` writes in flight;
 * each is sent until the server answers it 200 or 204, unchanged, to the next node each time.
 */
export class ProducerWriter extends Writer {
  readonly acks = new Map<number, ProducerAck>();
  /** 204 answers: a resend whose earlier attempt had applied. */
  duplicates = 0;
  /** Resends after no answer or a 5xx. */
  resends = 0;
  /** 409 answers (arrived ahead of an earlier seq). */
  gaps = 0;
  sent = 0;
  private nextSeq = 0;
  /** Set once a write is refused for good: the other workers stop too. */
  private failed = false;

  constructor(
    id: string,
    ctx: LoadContext,
    private readonly window: number,
    start = 0,
    pauseMs = 2,
  ) {
    super(id, ctx, start, pauseMs);
  }

  bodyOf(seq: number): string {
    return messageOf(this.id, seq);
  }

  async run(): Promise<void> {
    // The claim (seq 0) travels alone.
    if (!(await this.deliver(this.nextSeq++))) return;
    await Promise.all(Array.from({ length: this.window }, () => this.worker()));
  }

  private async worker(): Promise<void> {
    while (this.goingOn() && !this.failed) {
      if (!(await this.deliver(this.nextSeq++))) return;
      await this.pause();
    }
  }

  /** Sends one write until it is answered 200 or 204; false if the server refused it for good. */
  private async deliver(seq: number): Promise<boolean> {
    const body = this.bodyOf(seq);
    const headers = { ...JSON_TYPE, 'producer-id': this.id, 'producer-epoch': '0', 'producer-seq': String(seq), 'producer-digest': blake3Hex(body) };
    this.sent = Math.max(this.sent, seq + 1);
    // Whether an earlier attempt may have applied (then a 204 is the expected answer).
    let uncertain = false;
    for (let attempts = 1; Date.now() < this.ctx.deadline; attempts++) {
      const answer = await this.attempt(headers, body);
      if (answer === 'not-sent') continue;
      if (answer === 'maybe-applied') {
        uncertain = true;
        this.resends += 1;
        continue;
      }
      if (answer.status === 200 || answer.status === 204) {
        this.acknowledge(seq, answer, uncertain, attempts);
        return true;
      }
      if (answer.status === 409 && answer.headers.get('producer-expected-seq') !== null) {
        this.gaps += 1;
        await sleep(5 + this.rng.next() * 15); // jittered backoff: an earlier seq is still on its way
        continue;
      }
      violation(this.ctx, `${this.id} seq ${seq}: answered ${answer.status} ${answer.text.slice(0, 200)}`);
      this.failed = true;
      return false;
    }
    violation(this.ctx, `${this.id} seq ${seq}: never answered`);
    this.failed = true;
    return false;
  }

  private acknowledge(seq: number, answer: Answer, uncertain: boolean, attempts: number): void {
    if (answer.status === 204) {
      this.duplicates += 1;
      if (!uncertain) violation(this.ctx, `${this.id} seq ${seq}: 204 (duplicate) on its first delivery`);
    }
    const next = answer.headers.get('stream-next-offset');
    const offset = answer.headers.get('stream-offset');
    if (answer.status === 200 && (next === null || offset === null)) violation(this.ctx, `${this.id} seq ${seq}: 200 without a receipt`);
    this.acks.set(seq, { status: answer.status as 200 | 204, next: next !== null && offset !== null ? Number(next) : null, attempts });
  }
}

/**
 * Appends with Stream-Seq = its own counter (20 digits), one at a time; after no answer or a
 * 5xx it resends the same write to the next node: a 409 STREAM_SEQ_CONFLICT naming its own value
 * as Stream-Last-Seq then means that the earlier attempt landed (it is the stream's only
 * Stream-Seq writer).
 */
export class StreamSeqWriter extends Writer {
  /** n -> how it was acknowledged: 204, or 409 after a retry (landed earlier). */
  readonly acks = new Map<number, { via: '204' | '409-own-seq'; next: number | null }>();
  retries = 0;
  conflictsOwnSeq = 0;

  constructor(id: string, ctx: LoadContext, start = 0, pauseMs = 2) {
    super(id, ctx, start, pauseMs);
  }

  async run(): Promise<void> {
    for (let n = 1; this.goingOn(); n++) {
      if (!(await this.deliver(n))) return;
      await this.pause();
    }
  }

  private async deliver(n: number): Promise<boolean> {
    const seq = pad20(n);
    const headers = { ...JSON_TYPE, 'stream-seq': seq };
    const body = messageOf(this.id, n);
    let uncertain = false;
    while (Date.now() < this.ctx.deadline) {
      const answer = await this.attempt(headers, body);
      if (answer === 'not-sent') continue;
      if (answer === 'maybe-applied') {
        uncertain = true;
        this.retries += 1;
        continue;
      }
      if (answer.status === 204) {
        this.acks.set(n, { via: '204', next: Number(answer.headers.get('stream-next-offset')) });
        return true;
      }
      const lastSeq = answer.headers.get('stream-last-seq');
      if (answer.status === 409 && answer.code === 'STREAM_SEQ_CONFLICT' && uncertain && lastSeq === seq) {
        this.conflictsOwnSeq += 1;
        this.acks.set(n, { via: '409-own-seq', next: null });
        return true;
      }
      violation(this.ctx, `${this.id} n ${n}: answered ${answer.status} (Stream-Last-Seq ${lastSeq}, retried: ${uncertain}) ${answer.text.slice(0, 200)}`);
      return false;
    }
    violation(this.ctx, `${this.id} n ${n}: never answered`);
    return false;
  }
}
