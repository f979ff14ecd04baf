/**
 * A test producer that speaks seed 000 over plain `node:http`: it pipelines writes over
 * several keep-alive connections, retries the ones answered 409 (they arrived before
 * their predecessor), and reports which writes never got an answer (the server died).
 * Resending those unchanged is the caller's job: the protocol says what happened. Its
 * random choices (a shuffled send order, a retry's pause) come from the test file's seed.
 */
import { Agent, request, type IncomingHttpHeaders } from 'node:http';
import { blake3 } from '@noble/hashes/blake3.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { seededRandom, testSeed, type Rng } from './seed.js';

export interface HttpAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

export function blake3Hex(body: Buffer | string): string {
  return bytesToHex(blake3(typeof body === 'string' ? Buffer.from(body) : body));
}

/** One HTTP request; rejects on a network error (refused, reset, hang-up). */
export function httpRequest(url: string, method: string, headers: Record<string, string>, body: Buffer | string | null, agent: Agent | false): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers, agent }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(parts).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body ?? undefined);
  });
}

export interface ProducerWrite {
  seq: number;
  body: Buffer;
}

export interface PipelineOptions {
  producerId: string;
  epoch: number;
  contentType: string;
  /** Requests in flight at once, spread over this many connections. */
  inFlight: number;
  /** Send order of the first attempts. */
  order?: 'as-given' | 'shuffled';
  /** Called after each answered write, e.g. to kill the server mid-flight. */
  onAnswer?: (seq: number, answer: HttpAnswer, inFlightNow: number) => void;
  /** Bound on all attempts together, so a broken server cannot loop the test forever. */
  maxAttempts: number;
  /** Where the shuffle and the retry pauses draw from; the file's seed unless given. */
  rng?: Rng;
}

export interface PipelineResult {
  /** Final answer of each write that got a 200 or 204. */
  answered: Map<number, HttpAnswer>;
  /** Writes without a final answer: sent when the connection died, or never sent. */
  unanswered: number[];
  /** 409 answers seen (writes that arrived ahead of their predecessor). */
  conflicts: number;
  attempts: number;
}

/** Offset of the producer's draws from the file's seed: far from the small ones tests take for theirs. */
const PRODUCER_STREAM = 1_000;
let fileRng: Rng | undefined;

/** The test file's draws for the producer, apart from the test's own: made when first needed. */
function producerRng(): Rng {
  fileRng ??= seededRandom(testSeed() + PRODUCER_STREAM);
  return fileRng;
}

function shuffle<T>(items: T[], rng: Rng): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = rng.int(0, i);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Sends every write with its producer headers and a digest of its body, pipelined. A
 * 409 PRODUCER_SEQ_GAP is retried after a short pause; any other refusal throws. After
 * the first network error nothing more is sent and the call returns once the requests
 * in flight have settled.
 */
export async function sendPipelined(url: string, writes: ProducerWrite[], options: PipelineOptions): Promise<PipelineResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: options.inFlight });
  const rng = options.rng ?? producerRng();
  const queue = options.order === 'shuffled' ? shuffle(writes, rng) : [...writes];
  // Writes answered 409, lowest seq first. A retry goes out once its predecessor is
  // acknowledged (or nothing else is left to send), so the epoch advances instead of
  // the same early arrivals circling while the write they wait for sits in the queue.
  const retries: ProducerWrite[] = [];
  const next = (): ProducerWrite | undefined => {
    const first = retries[0];
    if (first !== undefined && (result.answered.has(first.seq - 1) || queue.length === 0)) return retries.shift();
    return queue.shift() ?? retries.shift();
  };
  const result: PipelineResult = { answered: new Map(), unanswered: [], conflicts: 0, attempts: 0 };
  let inFlight = 0;
  let dead = false;
  let lastExpected: string | undefined;
  const sendOne = async (w: ProducerWrite): Promise<void> => {
    const headers = {
      'content-type': options.contentType,
      'producer-id': options.producerId,
      'producer-epoch': String(options.epoch),
      'producer-seq': String(w.seq),
      'producer-digest': blake3Hex(w.body),
    };
    result.attempts++;
    if (result.attempts > options.maxAttempts) {
      throw new Error(`gave up after ${options.maxAttempts} attempts; the server last expected seq ${lastExpected}`);
    }
    inFlight++;
    let answer: HttpAnswer;
    try {
      answer = await httpRequest(url, 'POST', headers, w.body, agent);
    } catch {
      dead = true;
      result.unanswered.push(w.seq);
      return;
    } finally {
      inFlight--;
    }
    options.onAnswer?.(w.seq, answer, inFlight);
    if (answer.status === 200 || answer.status === 204) result.answered.set(w.seq, answer);
    else if (answer.status === 409 && answer.headers['producer-expected-seq'] !== undefined) {
      result.conflicts++;
      lastExpected = String(answer.headers['producer-expected-seq']);
      // pacing: a retry's back-off, not a wait for an outcome (next() holds it until its predecessor is in).
      await sleep(2 + rng.next() * 8);
      const at = retries.findIndex((r) => r.seq > w.seq);
      retries.splice(at < 0 ? retries.length : at, 0, w);
    } else throw new Error(`seq ${w.seq}: unexpected ${answer.status} ${answer.body}`);
  };
  const worker = async (): Promise<void> => {
    for (let w = next(); w !== undefined; w = next()) {
      if (dead) {
        result.unanswered.push(w.seq);
        continue;
      }
      await sendOne(w);
    }
  };
  try {
    // Each worker may finish while another still requeues a 409; loop until all settle.
    while (queue.length + retries.length > 0) await Promise.all(Array.from({ length: options.inFlight }, worker));
  } finally {
    agent.destroy();
  }
  result.unanswered.sort((a, b) => a - b);
  return result;
}
