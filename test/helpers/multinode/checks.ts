/**
 * The final state of a multi-node run held against what the clients were told: readLog() reads
 * the stream as finally stored, checkLog() compares it with the writers' records; median() sums
 * up the latencies tests log (their bounds are `npm run bench` figures).
 */
import { readAll } from '../http.js';
import type { PlainWriter, ProducerWriter, StreamSeqWriter } from './writers.js';

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
  const check = new LogCheck(log);
  for (const w of writers.plain ?? []) check.plain(w);
  for (const p of writers.producers ?? []) check.producer(p);
  for (const s of writers.seqs ?? []) check.streamSeq(s);
  check.unknownWriters();
  return check.problems;
}

/** Where one writer's writes are stored: its number n -> indexes of the messages carrying it. */
type Positions = Map<number, number[]>;

/** Enough to show what went wrong; a broken run could otherwise list every message. */
const MAX_PROBLEMS = 100;

class LogCheck {
  readonly problems: string[] = [];
  /** Writer id -> where its writes are stored. */
  private readonly positions = new Map<string, Positions>();
  /** Writers checked so far: messages of any other are a problem. */
  private readonly known = new Set<string>();

  constructor(private readonly log: FinalLog) {
    log.messages.forEach((text, index) => this.place(text, index));
  }

  plain(w: PlainWriter): void {
    const byN = this.positionsOf(w.id);
    for (const [n, at] of byN) {
      const outcome = w.outcomes.get(n);
      if (at.length > 1) this.problem(`${w.id} ${n} (${outcome}) is stored ${at.length} times`);
      if (outcome === undefined) this.problem(`${w.id} ${n} is stored but was never sent`);
      if (outcome === 'refused') this.problem(`${w.id} ${n} was answered 503 "not applied" but is stored`);
    }
    for (const n of w.acked) {
      const at = byN.get(n);
      if (!at) this.problem(`${w.id} ${n} was acknowledged but is not stored`);
      else this.receipt(w.id, n, w.receipts.get(n), at[0]!);
    }
    // Acknowledged writes in the order they were acknowledged (one at a time: their numbers'
    // order). A write whose answer was lost may land later than the next one, on another node.
    this.inOrder(w.id, byN, new Set(w.acked));
  }

  producer(p: ProducerWriter): void {
    const byN = this.positionsOf(p.id);
    for (const [n, at] of byN) {
      if (at.length > 1) this.problem(`${p.id} seq ${n} is stored ${at.length} times`);
      if (n >= p.sent) this.problem(`${p.id} seq ${n} is stored but was never sent`);
    }
    for (let seq = 0; seq < p.sent; seq++) {
      const ack = p.acks.get(seq);
      const at = byN.get(seq);
      if (!ack) this.problem(`${p.id} seq ${seq} was never acknowledged`);
      else if (!at) this.problem(`${p.id} seq ${seq} was acknowledged ${ack.status} but is not stored`);
      else this.receipt(`${p.id} seq`, seq, ack.next, at[0]!);
    }
    this.inOrder(p.id, byN);
  }

  streamSeq(s: StreamSeqWriter): void {
    const byN = this.positionsOf(s.id);
    for (const [n, at] of byN) {
      if (at.length > 1) this.problem(`${s.id} n ${n} is stored ${at.length} times`);
      if (!s.acks.has(n)) this.problem(`${s.id} n ${n} is stored but was not acknowledged`);
    }
    for (const [n, ack] of s.acks) {
      const at = byN.get(n);
      if (!at) this.problem(`${s.id} n ${n} was acknowledged (${ack.via}) but is not stored`);
      else this.receipt(s.id, n, ack.next, at[0]!);
    }
    this.inOrder(s.id, byN);
  }

  /** Messages of writers no check claimed. */
  unknownWriters(): void {
    for (const id of this.positions.keys()) if (!this.known.has(id)) this.problem(`messages of an unknown writer ${id}`);
  }

  private problem(message: string): void {
    if (this.problems.length < MAX_PROBLEMS) this.problems.push(message);
  }

  /** Records where message `index` is stored under its writer and number. */
  private place(text: string, index: number): void {
    let value: { w?: unknown; n?: unknown };
    try {
      value = JSON.parse(text) as { w?: unknown; n?: unknown };
    } catch {
      return this.problem(`message ${index} is not JSON: ${text.slice(0, 100)}`);
    }
    if (typeof value.w !== 'string' || typeof value.n !== 'number') return this.problem(`message ${index} was written by no writer: ${text.slice(0, 100)}`);
    let byN = this.positions.get(value.w);
    if (!byN) this.positions.set(value.w, (byN = new Map()));
    const list = byN.get(value.n);
    if (list) list.push(index);
    else byN.set(value.n, [index]);
  }

  /** The writer's stored positions (none stored: empty), marking it known. */
  private positionsOf(id: string): Positions {
    this.known.add(id);
    return this.positions.get(id) ?? new Map<number, number[]>();
  }

  /** The writes `only` (default: all) of a writer are stored in the order of their numbers. */
  private inOrder(id: string, byN: Positions, only?: Set<number>): void {
    const ns = [...byN.keys()].filter((n) => !only || only.has(n)).sort((a, b) => byN.get(a)![0]! - byN.get(b)![0]!);
    for (let i = 1; i < ns.length; i++) if (ns[i]! < ns[i - 1]!) return this.problem(`${id}: ${ns[i - 1]} is stored before ${ns[i]}`);
  }

  /** A receipt's Stream-Next-Offset, when there is one, is where the stored message ends. */
  private receipt(id: string, n: number, next: number | null | undefined, at: number): void {
    if (next !== null && next !== undefined && this.log.ends[at] !== next) this.problem(`${id} ${n}: receipt says it ends at ${next}, stored ending at ${this.log.ends[at]}`);
  }
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
