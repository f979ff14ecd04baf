/**
 * Tools for multi-node tests (several rill nodes on one PostgreSQL database):
 *  - RillNode: a real `rill serve --store postgres` child process that can be SIGKILLed and
 *    restarted on the same port;
 *  - send(): one HTTP request with a time bound, telling "no answer" (outcome unknown) from
 *    "connection refused" (nothing was sent, safe to send elsewhere);
 *  - writers that spread their writes over the nodes round robin and fail over: plain appends
 *    (an unknown outcome is abandoned), idempotent producers (an unknown outcome is resent
 *    unchanged, to whichever node is next) and a Stream-Seq writer (a retry told
 *    STREAM_SEQ_CONFLICT with its own value as Stream-Last-Seq had landed the first time);
 *  - long-poll and SSE readers that resume from their last offset on another node when theirs
 *    dies, as a real client does with Stream-Next-Offset and the SSE control event;
 *  - checkLog(): holds the writers' records against the stream as finally stored;
 *  - listenerPortsOf() / terminateListeners(): find and cut one node's LISTEN connection.
 *
 * Every message is one JSON object {"w": writer, "n": number} on an application/json stream,
 * so each write is identifiable, and its stored form is the compact JSON plus "\n" (ndjson reads
 * return the stored bytes, so offsets are byte positions in them).
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import pg from 'pg';
import { offset as pad20, readAll } from './http.js';
import { blake3Hex } from './producer-client.js';
import { removeDir, startServer, type ServerProcess } from './server.js';
import { sseBlocks } from './sse.js';

export { pad20 };

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------
// Nodes

export class RillNode {
  /** Times this node was started after a kill. */
  restarts = 0;
  /** How long each restart took until /healthz answered. */
  readonly restartMs: number[] = [];

  private constructor(
    readonly name: string,
    readonly postgresUrl: string,
    readonly port: number,
    readonly args: string[],
    private server: ServerProcess | null,
  ) {}

  static async start(name: string, postgresUrl: string, args: string[] = [], port?: number): Promise<RillNode> {
    const server = await startServer({ postgresUrl, port, args });
    return new RillNode(name, postgresUrl, server.port, args, server);
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.server?.child.pid;
  }

  /** The process is running (started and not exited). */
  get alive(): boolean {
    const child = this.server?.child;
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  }

  output(): string {
    return this.server?.output() ?? '';
  }

  /** SIGKILL; resolves once the process is gone (its unused data dir is removed). */
  async kill(): Promise<void> {
    const server = this.server;
    this.server = null;
    await server?.kill();
    if (server) removeDir(server.dataDir);
  }

  /** Starts the node again on its port (a few tries: the port may be briefly taken). */
  async restart(): Promise<void> {
    if (this.server) throw new Error(`${this.name} is still running`);
    const started = Date.now();
    let lastError: unknown;
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        this.server = await startServer({ postgresUrl: this.postgresUrl, port: this.port, args: this.args });
        this.restarts += 1;
        this.restartMs.push(Date.now() - started);
        return;
      } catch (error) {
        lastError = error;
        await sleep(200);
      }
    }
    throw lastError;
  }

  /** For afterAll: SIGKILL whatever is running (the database is dropped with the run). */
  async dispose(): Promise<void> {
    await this.kill().catch(() => {});
  }
}

// ---------------------------------------------------------------------------------------------
// Requests

export interface Answer {
  status: number;
  headers: Headers;
  body: Buffer;
  text: string;
  /** The JSON error code, when the body is a JSON error. */
  code: string | undefined;
  message: string | undefined;
  sentAt: number;
  ms: number;
}

/** No answer: `refused` means nothing reached the server; otherwise the outcome is unknown. */
export class NoAnswer extends Error {
  constructor(
    readonly reason: string,
    readonly refused: boolean,
    readonly sentAt: number,
    readonly ms: number,
  ) {
    super(`no answer: ${reason}`);
  }
}

export interface SendInit {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** Past this, the request is abandoned (outcome unknown). */
  timeoutMs?: number;
  /** Drop the answer this soon, as a network losing it would: the server may or may not have applied the request. */
  loseAfterMs?: number;
}

export async function send(url: string, init: SendInit = {}): Promise<Answer> {
  const abort = new AbortController();
  const timeoutMs = init.timeoutMs ?? 10_000;
  const lose = init.loseAfterMs !== undefined;
  const timer = setTimeout(() => abort.abort(), lose ? init.loseAfterMs : timeoutMs);
  const sentAt = Date.now();
  try {
    const res = await fetch(url, { method: init.method ?? 'GET', headers: init.headers, body: init.body, signal: abort.signal, redirect: 'manual' });
    const body = Buffer.from(await res.arrayBuffer());
    const text = body.toString('utf8');
    let code: string | undefined;
    let message: string | undefined;
    if ((res.headers.get('content-type') ?? '').startsWith('application/json') && res.status >= 400) {
      try {
        const parsed = JSON.parse(text) as { code?: unknown; message?: unknown };
        if (typeof parsed.code === 'string') code = parsed.code;
        if (typeof parsed.message === 'string') message = parsed.message;
      } catch {
        // not a JSON error body: code stays undefined
      }
    }
    return { status: res.status, headers: res.headers, body, text, code, message, sentAt, ms: Date.now() - sentAt };
  } catch (error) {
    const ms = Date.now() - sentAt;
    if (abort.signal.aborted) throw new NoAnswer(lose ? 'answer dropped' : `timeout after ${timeoutMs} ms`, false, sentAt, ms);
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    const reason = cause?.code ?? cause?.message ?? (error as Error).message;
    throw new NoAnswer(reason, cause?.code === 'ECONNREFUSED', sentAt, ms);
  } finally {
    clearTimeout(timer);
  }
}

// ---------------------------------------------------------------------------------------------
// Load: shared context

/** One request a writer or reader made, with what it got (for tests that judge answers by time). */
export interface Observation {
  who: string;
  method: string;
  url: string;
  sentAt: number;
  endAt: number;
  /** null: no answer. */
  status: number | null;
  retryAfter: string | null;
  code: string | undefined;
  message: string | undefined;
  contentType: string | null;
  reason?: string;
}

export interface LoadContext {
  /** Node base URLs; writers go round robin over them. */
  urls: string[];
  /** The stream's path, e.g. /v1/stream/name. */
  path: string;
  /** Writers finish the write in hand and stop once this is true. */
  stopping: () => boolean;
  /** Hard bound: no writer or reader runs past it. */
  deadline: number;
  /** Things a correct server never does. */
  violations: string[];
  /** Per-request time bound. */
  timeoutMs?: number;
  /** Pause after a 5xx answer before trying again. */
  pauseAfter5xxMs?: number;
  observe?: (o: Observation) => void;
  /** Share of write attempts whose answer the client drops on purpose (after 0-8 ms). */
  loseChance?: number;
}

/** A delay after which to drop the answer, for a share `loseChance` of writes. */
function maybeLose(ctx: LoadContext): number | undefined {
  return ctx.loseChance && Math.random() < ctx.loseChance ? Math.floor(Math.random() * 9) : undefined;
}

function violation(ctx: { violations: string[] }, message: string): void {
  if (ctx.violations.length < 200) ctx.violations.push(message);
}

/** Sends and records the observation with `ctx.observe`; rethrows NoAnswer. */
export async function observed(ctx: Pick<LoadContext, 'timeoutMs' | 'observe'>, who: string, url: string, init: SendInit): Promise<Answer> {
  const method = init.method ?? 'GET';
  try {
    const answer = await send(url, { timeoutMs: ctx.timeoutMs, ...init });
    ctx.observe?.({
      who,
      method,
      url,
      sentAt: answer.sentAt,
      endAt: answer.sentAt + answer.ms,
      status: answer.status,
      retryAfter: answer.headers.get('retry-after'),
      code: answer.code,
      message: answer.message,
      contentType: answer.headers.get('content-type'),
    });
    return answer;
  } catch (error) {
    if (error instanceof NoAnswer) {
      ctx.observe?.({ who, method, url, sentAt: error.sentAt, endAt: error.sentAt + error.ms, status: null, retryAfter: null, code: undefined, message: undefined, contentType: null, reason: error.reason });
    }
    throw error;
  }
}

const JSON_TYPE = { 'content-type': 'application/json' };

export function messageOf(writer: string, n: number): string {
  return JSON.stringify({ w: writer, n });
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

// ---------------------------------------------------------------------------------------------
// Writers

export type PlainOutcome =
  | 'acked'
  /** No answer, or a 503 that said the outcome is unknown: present once or absent. */
  | 'unknown'
  /** A 503 that said the write was not applied: must be absent. */
  | 'refused';

/** Plain appends, one at a time; an unknown outcome is abandoned (a blind resend could double it). */
export class PlainWriter {
  readonly outcomes = new Map<number, PlainOutcome>();
  /** Acknowledged writes, in acknowledgement order. */
  readonly acked: number[] = [];
  /** Stream-Next-Offset of each acknowledged write. */
  readonly receipts = new Map<number, number>();
  failovers = 0;
  private readonly rr: RoundRobin;

  constructor(
    readonly id: string,
    private readonly ctx: LoadContext,
    start = 0,
    private readonly pauseMs = 2,
  ) {
    this.rr = new RoundRobin(ctx.urls, start);
  }

  async run(): Promise<void> {
    const ctx = this.ctx;
    for (let n = 0; !ctx.stopping() && Date.now() < ctx.deadline; n++) {
      const body = messageOf(this.id, n);
      let outcome: PlainOutcome | null = null;
      // Refused connections sent nothing: the same write goes to the next node.
      for (let tries = 0; outcome === null && Date.now() < ctx.deadline; tries++) {
        try {
          const answer = await observed(ctx, this.id, this.rr.next() + ctx.path, { method: 'POST', headers: JSON_TYPE, body, loseAfterMs: maybeLose(ctx) });
          if (answer.status === 204) {
            outcome = 'acked';
            this.acked.push(n);
            this.receipts.set(n, Number(answer.headers.get('stream-next-offset')));
          } else if (answer.status >= 500) {
            outcome = answer.status === 503 && /not applied/.test(answer.message ?? '') ? 'refused' : 'unknown';
            await sleep(ctx.pauseAfter5xxMs ?? 50);
          } else {
            outcome = 'unknown';
            violation(ctx, `${this.id} write ${n}: answered ${answer.status} ${answer.text.slice(0, 200)}`);
          }
        } catch (error) {
          if (!(error instanceof NoAnswer)) throw error;
          if (error.refused) {
            this.failovers += 1;
            await sleep(tries < 3 ? 0 : 20);
            continue;
          }
          outcome = 'unknown';
        }
      }
      this.outcomes.set(n, outcome ?? 'unknown');
      if (this.pauseMs > 0) await sleep(this.pauseMs);
    }
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
export class ProducerWriter {
  readonly acks = new Map<number, ProducerAck>();
  /** 204 answers: a resend whose earlier attempt had applied. */
  duplicates = 0;
  /** Resends after no answer or a 5xx. */
  resends = 0;
  /** 409 answers (arrived ahead of an earlier seq). */
  gaps = 0;
  sent = 0;
  private nextSeq = 0;
  private readonly rr: RoundRobin;

  constructor(
    readonly id: string,
    private readonly ctx: LoadContext,
    private readonly window: number,
    start = 0,
    private readonly pauseMs = 2,
  ) {
    this.rr = new RoundRobin(ctx.urls, start);
  }

  bodyOf(seq: number): string {
    return messageOf(this.id, seq);
  }

  async run(): Promise<void> {
    // The claim (seq 0) travels alone.
    if (!(await this.deliver(this.nextSeq++))) return;
    await Promise.all(Array.from({ length: this.window }, () => this.worker()));
  }

  private failed = false;

  private async worker(): Promise<void> {
    while (!this.ctx.stopping() && !this.failed && Date.now() < this.ctx.deadline) {
      if (!(await this.deliver(this.nextSeq++))) return;
      if (this.pauseMs > 0) await sleep(this.pauseMs);
    }
  }

  /** Sends one write until it is answered 200 or 204; false if the server refused it for good. */
  private async deliver(seq: number): Promise<boolean> {
    const ctx = this.ctx;
    const body = this.bodyOf(seq);
    const headers = {
      ...JSON_TYPE,
      'producer-id': this.id,
      'producer-epoch': '0',
      'producer-seq': String(seq),
      'producer-digest': blake3Hex(body),
    };
    this.sent = Math.max(this.sent, seq + 1);
    // Whether an earlier attempt may have applied (then a 204 is the expected answer).
    let uncertain = false;
    for (let attempts = 1; Date.now() < ctx.deadline; attempts++) {
      let answer: Answer;
      try {
        answer = await observed(ctx, this.id, this.rr.next() + ctx.path, { method: 'POST', headers, body, loseAfterMs: maybeLose(ctx) });
      } catch (error) {
        if (!(error instanceof NoAnswer)) throw error;
        if (!error.refused) {
          uncertain = true;
          this.resends += 1;
        }
        await sleep(10);
        continue;
      }
      if (answer.status === 200 || answer.status === 204) {
        if (answer.status === 204) {
          this.duplicates += 1;
          if (!uncertain) violation(ctx, `${this.id} seq ${seq}: 204 (duplicate) on its first delivery`);
        }
        const next = answer.headers.get('stream-next-offset');
        const offset = answer.headers.get('stream-offset');
        if (answer.status === 200 && (next === null || offset === null)) violation(ctx, `${this.id} seq ${seq}: 200 without a receipt`);
        this.acks.set(seq, { status: answer.status, next: next !== null && offset !== null ? Number(next) : null, attempts });
        return true;
      }
      if (answer.status === 409 && answer.headers.get('producer-expected-seq') !== null) {
        this.gaps += 1;
        await sleep(5 + Math.random() * 15);
        continue;
      }
      if (answer.status >= 500) {
        uncertain = true;
        this.resends += 1;
        await sleep(ctx.pauseAfter5xxMs ?? 50);
        continue;
      }
      violation(ctx, `${this.id} seq ${seq}: answered ${answer.status} ${answer.text.slice(0, 200)}`);
      this.failed = true;
      return false;
    }
    violation(ctx, `${this.id} seq ${seq}: never answered`);
    this.failed = true;
    return false;
  }
}

/**
 * Appends with Stream-Seq = its own counter (20 digits), one at a time; after no answer or a
 * 5xx it resends the same write to the next node: a 409 STREAM_SEQ_CONFLICT naming its own value
 * as Stream-Last-Seq then means that the earlier attempt landed (it is the stream's only
 * Stream-Seq writer).
 */
export class StreamSeqWriter {
  /** n -> how it was acknowledged: 204, or 409 after a retry (landed earlier). */
  readonly acks = new Map<number, { via: '204' | '409-own-seq'; next: number | null }>();
  retries = 0;
  conflictsOwnSeq = 0;
  private readonly rr: RoundRobin;

  constructor(
    readonly id: string,
    private readonly ctx: LoadContext,
    start = 0,
    private readonly pauseMs = 2,
  ) {
    this.rr = new RoundRobin(ctx.urls, start);
  }

  async run(): Promise<void> {
    const ctx = this.ctx;
    for (let n = 1; !ctx.stopping() && Date.now() < ctx.deadline; n++) {
      if (!(await this.deliver(n))) return;
      if (this.pauseMs > 0) await sleep(this.pauseMs);
    }
  }

  private async deliver(n: number): Promise<boolean> {
    const ctx = this.ctx;
    const seq = pad20(n);
    const body = messageOf(this.id, n);
    let uncertain = false;
    for (; Date.now() < ctx.deadline; ) {
      let answer: Answer;
      try {
        answer = await observed(ctx, this.id, this.rr.next() + ctx.path, { method: 'POST', headers: { ...JSON_TYPE, 'stream-seq': seq }, body, loseAfterMs: maybeLose(ctx) });
      } catch (error) {
        if (!(error instanceof NoAnswer)) throw error;
        if (!error.refused) {
          uncertain = true;
          this.retries += 1;
        }
        await sleep(10);
        continue;
      }
      if (answer.status === 204) {
        this.acks.set(n, { via: '204', next: Number(answer.headers.get('stream-next-offset')) });
        return true;
      }
      if (answer.status >= 500) {
        uncertain = true;
        this.retries += 1;
        await sleep(ctx.pauseAfter5xxMs ?? 50);
        continue;
      }
      const lastSeq = answer.headers.get('stream-last-seq');
      if (answer.status === 409 && answer.code === 'STREAM_SEQ_CONFLICT' && uncertain && lastSeq === seq) {
        this.conflictsOwnSeq += 1;
        this.acks.set(n, { via: '409-own-seq', next: null });
        return true;
      }
      violation(ctx, `${this.id} n ${n}: answered ${answer.status} (Stream-Last-Seq ${lastSeq}, retried: ${uncertain}) ${answer.text.slice(0, 200)}`);
      return false;
    }
    violation(ctx, `${this.id} n ${n}: never answered`);
    return false;
  }
}

// ---------------------------------------------------------------------------------------------
// Readers

export interface ReaderContext {
  urls: string[];
  path: string;
  violations: string[];
  /** The stream's final tail, once known: readers stop on reaching it. */
  finalTail: () => number | undefined;
  deadline: number;
}

abstract class Reader {
  /** Messages received, compact JSON, in order. */
  readonly messages: string[] = [];
  offset = 0;
  /** Connections lost (error or refused) that made the reader move to another node. */
  moves = 0;
  /** Responses (long-poll) or control events (SSE) taken. */
  reads = 0;
  protected at: number;

  constructor(
    readonly id: string,
    protected readonly ctx: ReaderContext,
    home: number,
  ) {
    this.at = home;
  }

  get url(): string {
    return this.ctx.urls[this.at % this.ctx.urls.length]! + this.ctx.path;
  }

  protected moveOn(): void {
    this.at += 1;
    this.moves += 1;
  }

  protected finished(): boolean {
    const tail = this.ctx.finalTail();
    return (tail !== undefined && this.offset >= tail) || Date.now() > this.ctx.deadline;
  }

  /** Takes messages covering [offset, next). */
  protected take(messages: string[], next: number): void {
    const bytes = messages.reduce((sum, m) => sum + Buffer.byteLength(m) + 1, 0);
    if (next - this.offset !== bytes) {
      violation(this.ctx, `${this.id}: ${messages.length} messages (${bytes} bytes) from ${this.offset} to ${next}`);
    }
    this.messages.push(...messages);
    this.offset = next;
    this.reads += 1;
  }

  abstract run(): Promise<void>;
}

/** Long-poll reads (ndjson) from its offset; on a lost connection it asks the next node. */
export class LongPollReader extends Reader {
  async run(): Promise<void> {
    while (!this.finished()) {
      let answer: Answer;
      try {
        answer = await send(`${this.url}?offset=${pad20(this.offset)}&live=long-poll&timeout_ms=2000`, { headers: { accept: 'application/x-ndjson' }, timeoutMs: 15_000 });
      } catch (error) {
        if (!(error instanceof NoAnswer)) throw error;
        this.moveOn();
        await sleep(20);
        continue;
      }
      const next = Number(answer.headers.get('stream-next-offset'));
      if (answer.status === 200) {
        this.take(answer.text.split('\n').slice(0, -1), next);
      } else if (answer.status === 204) {
        if (next !== this.offset) violation(this.ctx, `${this.id}: 204 at ${this.offset} with Stream-Next-Offset ${next}`);
      } else if (answer.status === 503) {
        await sleep(100);
      } else {
        violation(this.ctx, `${this.id}: long-poll at ${this.offset} answered ${answer.status} ${answer.text.slice(0, 200)}`);
        await sleep(200);
      }
    }
  }
}

/**
 * SSE: keeps a data event's messages only once the control event after it has arrived (a cut
 * connection resends them), and resumes from the last control event's streamNextOffset; a
 * connection ended by the server (its lifetime) resumes on the same node, a lost one on the next.
 */
export class SseReader extends Reader {
  /** Connections the server ended on its own (lifetime), resumed on the same node. */
  ends = 0;

  async run(): Promise<void> {
    while (!this.finished()) {
      const outcome = await this.follow();
      if (outcome === 'lost') {
        this.moveOn();
        await sleep(20);
      } else if (outcome === 'ended') this.ends += 1;
      else if (outcome === 'unavailable') await sleep(100);
    }
  }

  private async follow(): Promise<'ended' | 'lost' | 'unavailable' | 'done'> {
    const abort = new AbortController();
    const watchdog = setInterval(() => this.finished() && abort.abort(), 50);
    try {
      const res = await fetch(`${this.url}?offset=${pad20(this.offset)}&live=sse`, { signal: abort.signal });
      if (res.status !== 200 || !res.body) {
        await res.arrayBuffer().catch(() => {});
        if (res.status === 503) return 'unavailable';
        violation(this.ctx, `${this.id}: SSE at ${this.offset} answered ${res.status}`);
        return 'unavailable';
      }
      let pending: string[] | null = null;
      for await (const block of sseBlocks(res)) {
        let type = 'message';
        const data: string[] = [];
        for (const line of block.split('\n')) {
          if (line.startsWith('event:')) type = line.slice(6).trim();
          else if (line.startsWith('data:')) data.push(line.slice(5));
        }
        if (type === 'data') {
          const values = JSON.parse(data.join('\n')) as unknown[];
          pending = values.map((v) => JSON.stringify(v));
        } else if (type === 'control') {
          const control = JSON.parse(data.join('\n')) as { streamNextOffset: string };
          this.take(pending ?? [], Number(control.streamNextOffset));
          pending = null;
        }
      }
      return this.finished() ? 'done' : 'ended';
    } catch {
      return this.finished() ? 'done' : 'lost';
    } finally {
      clearInterval(watchdog);
      abort.abort();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Final state and checks

export interface FinalLog {
  /** Compact JSON messages, in order. */
  messages: string[];
  /** Stream-Next-Offset after each message. */
  ends: number[];
  tail: number;
}

/** Catch-up read of the whole stream (ndjson) from one node. */
export async function readLog(url: string): Promise<FinalLog> {
  const { body, next } = await readAll(url);
  const text = body.toString('utf8');
  const messages = text.length === 0 ? [] : text.split('\n').slice(0, -1);
  const ends: number[] = [];
  let at = 0;
  for (const m of messages) {
    at += Buffer.byteLength(m) + 1;
    ends.push(at);
  }
  if (at !== Number(next)) throw new Error(`readLog: ${at} bytes of messages, but Stream-Next-Offset ${next}`);
  return { messages, ends, tail: Number(next) };
}

interface Writers {
  plain?: PlainWriter[];
  producers?: ProducerWriter[];
  seqs?: StreamSeqWriter[];
}

/**
 * Every acknowledged write present exactly once, where its receipt said; unknown plain writes
 * at most once, refused ones never; acknowledged writes in acknowledgement order; producer and
 * Stream-Seq writes each exactly once with no gap. Returns the problems found.
 */
export function checkLog(log: FinalLog, writers: Writers): string[] {
  const problems: string[] = [];
  const problem = (message: string) => problems.length < 100 && problems.push(message);
  const positions = new Map<string, Map<number, number[]>>();
  log.messages.forEach((text, index) => {
    let value: { w?: unknown; n?: unknown };
    try {
      value = JSON.parse(text) as { w?: unknown; n?: unknown };
    } catch {
      return problem(`message ${index} is not JSON: ${text.slice(0, 100)}`);
    }
    if (typeof value.w !== 'string' || typeof value.n !== 'number') return problem(`message ${index} was written by no writer: ${text.slice(0, 100)}`);
    let byN = positions.get(value.w);
    if (!byN) positions.set(value.w, (byN = new Map()));
    const list = byN.get(value.n);
    if (list) list.push(index);
    else byN.set(value.n, [index]);
  });
  const known = new Set<string>();
  /** The writes `only` (default: all) of a writer are stored in the order of their numbers. */
  const inOrder = (id: string, byN: Map<number, number[]>, only?: Set<number>) => {
    const ns = [...byN.keys()].filter((n) => !only || only.has(n)).sort((a, b) => byN.get(a)![0]! - byN.get(b)![0]!);
    for (let i = 1; i < ns.length; i++) if (ns[i]! < ns[i - 1]!) return problem(`${id}: ${ns[i - 1]} is stored before ${ns[i]}`);
  };
  const receipt = (id: string, n: number, next: number | null | undefined, at: number) => {
    if (next !== null && next !== undefined && log.ends[at] !== next) problem(`${id} ${n}: receipt says it ends at ${next}, stored ending at ${log.ends[at]}`);
  };

  for (const w of writers.plain ?? []) {
    known.add(w.id);
    const byN = positions.get(w.id) ?? new Map<number, number[]>();
    for (const [n, at] of byN) {
      const outcome = w.outcomes.get(n);
      if (at.length > 1) problem(`${w.id} ${n} (${outcome}) is stored ${at.length} times`);
      if (outcome === undefined) problem(`${w.id} ${n} is stored but was never sent`);
      if (outcome === 'refused') problem(`${w.id} ${n} was answered 503 "not applied" but is stored`);
    }
    for (const n of w.acked) {
      const at = byN.get(n);
      if (!at) problem(`${w.id} ${n} was acknowledged but is not stored`);
      else receipt(w.id, n, w.receipts.get(n), at[0]!);
    }
    // Acknowledged writes in the order they were acknowledged (one at a time: their numbers'
    // order). A write whose answer was lost may land later than the next one, on another node.
    inOrder(w.id, byN, new Set(w.acked));
  }
  for (const p of writers.producers ?? []) {
    known.add(p.id);
    const byN = positions.get(p.id) ?? new Map<number, number[]>();
    for (const [n, at] of byN) {
      if (at.length > 1) problem(`${p.id} seq ${n} is stored ${at.length} times`);
      if (n >= p.sent) problem(`${p.id} seq ${n} is stored but was never sent`);
    }
    for (let seq = 0; seq < p.sent; seq++) {
      const ack = p.acks.get(seq);
      const at = byN.get(seq);
      if (!ack) problem(`${p.id} seq ${seq} was never acknowledged`);
      else if (!at) problem(`${p.id} seq ${seq} was acknowledged ${ack.status} but is not stored`);
      else receipt(`${p.id} seq`, seq, ack.next, at[0]!);
    }
    inOrder(p.id, byN);
  }
  for (const s of writers.seqs ?? []) {
    known.add(s.id);
    const byN = positions.get(s.id) ?? new Map<number, number[]>();
    for (const [n, at] of byN) {
      if (at.length > 1) problem(`${s.id} n ${n} is stored ${at.length} times`);
      if (!s.acks.has(n)) problem(`${s.id} n ${n} is stored but was not acknowledged`);
    }
    for (const [n, ack] of s.acks) {
      const at = byN.get(n);
      if (!at) problem(`${s.id} n ${n} was acknowledged (${ack.via}) but is not stored`);
      else receipt(s.id, n, ack.next, at[0]!);
    }
    inOrder(s.id, byN);
  }
  for (const id of positions.keys()) if (!known.has(id)) problem(`messages of an unknown writer ${id}`);
  return problems;
}

// ---------------------------------------------------------------------------------------------
// One node's LISTEN connection

/** Local ports of the TCP connections process `pid` holds to `remotePort` (Linux /proc). */
export function connectionPortsOf(pid: number, remotePort: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match) inodes.add(match[1]!);
    } catch {
      // closed meanwhile
    }
  }
  const ports: number[] = [];
  for (const table of ['tcp', 'tcp6']) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue;
    }
    for (const row of text.split('\n').slice(1)) {
      const cols = row.trim().split(/\s+/);
      if (cols.length < 10) continue;
      const local = Number.parseInt(cols[1]!.split(':')[1]!, 16);
      const remote = Number.parseInt(cols[2]!.split(':')[1]!, 16);
      if (remote === remotePort && inodes.has(cols[9]!)) ports.push(local);
    }
  }
  return ports;
}

/**
 * Terminates, from SQL, the LISTEN connections of the database at `databaseUrl` whose client
 * port is one of `clientPorts` (one node's); returns how many were terminated.
 */
export async function terminateListeners(databaseUrl: string, clientPorts: number[]): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5_000 });
  client.on('error', () => {});
  await client.connect();
  try {
    const { rows } = await client.query<{ ok: boolean }>(
      `SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
        WHERE datname = current_database() AND query ILIKE 'LISTEN%' AND pid <> pg_backend_pid() AND client_port = ANY($1::int[])`,
      [clientPorts],
    );
    return rows.filter((r) => r.ok).length;
  } finally {
    await client.end().catch(() => {});
  }
}

/** Client ports of the LISTEN connections on the database (any node's). */
export async function listenerPorts(databaseUrl: string): Promise<number[]> {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5_000 });
  client.on('error', () => {});
  await client.connect();
  try {
    const { rows } = await client.query<{ port: number }>(
      `SELECT client_port AS port FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%' AND pid <> pg_backend_pid()`,
    );
    return rows.map((r) => r.port);
  } finally {
    await client.end().catch(() => {});
  }
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
