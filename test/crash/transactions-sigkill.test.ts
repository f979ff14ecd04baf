/**
 * Group transactions under SIGKILL: clients send transactions over 2-4 JSON streams of one
 * affinity key, every operation carrying its client's producer fields, while other clients
 * append to the same streams with Stream-Record-Match; the server is killed at a seeded
 * moment under that load and restarted on the same data (its directory, or its PostgreSQL
 * database), several times. After each restart:
 *   - a transaction is in every one of its streams or in none of them;
 *   - an acknowledged transaction's (or append's) messages sit at the ordinals it was answered;
 *   - a record read finds what an offset read does, and HEAD's Stream-Record-Next is the
 *     number of messages read: no ordinal skipped or given twice;
 *   - an unacknowledged transaction resent unchanged (same producer fields) is answered as a
 *     duplicate exactly when it had been applied, and no message is ever stored twice;
 *   - the next append guarded by Stream-Record-Match N starts at N.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { seededRandom, testSeed, type Rng } from '../helpers/seed.js';
import { sharedDatabase } from '../helpers/postgres.js';
import { removeDir, startServer, tempDataDir, type ServerProcess } from '../helpers/server.js';
import { call, type Reply } from '../http/client.js';

const TX_CLIENTS = 4;
const RECORD_CLIENTS = 2;
const STREAMS = 4;
const ROUNDS = 4;
/** Acknowledgements (of any client) before the kill moment is drawn. */
const ACKS_BEFORE_KILL = 25;
const BUCKET = 'crashtx';
const KEY = 'group';
const JSON_TYPE = { 'content-type': 'application/json' };
const streamPath = (stream: number) => `/${BUCKET}/${KEY}/s${stream}`;
const TX_PATH = `/${BUCKET}/${KEY}/$transaction`;
/** Kill moments come from the file's seed: RILL_TEST_SEED replays them. */
const rng = seededRandom();

/** Messages one attempt sends to one stream, and the ordinals it was answered. */
interface Part {
  stream: number;
  messages: string[];
  start?: number;
  next?: number;
}

interface Attempt {
  kind: 'transaction' | 'append';
  parts: Part[];
  outcome: 'pending' | 'acked' | 'refused';
  /** A transaction's body, resent unchanged when it got no answer. */
  body?: string;
}

interface TransactionAck {
  stream: string;
  duplicate: boolean;
  stream_record_start?: number;
  stream_record_next?: number;
  producer_seq?: number;
}

/** A transaction client: its producer's next seq on each stream, and the attempt it must resend. */
interface TxClient {
  id: number;
  rng: Rng;
  seqs: number[];
  unanswered: Attempt | null;
  sent: number;
}

let server: ServerProcess | undefined;
const dataDirs: string[] = [];

afterAll(async () => {
  await server?.kill();
  dataDirs.forEach(removeDir);
});

/** 0..n-1 in a random order (Fisher-Yates). */
function shuffled(random: Rng, n: number): number[] {
  const items = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = random.int(0, i);
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

/** The next transaction of a client: distinct streams, 1-3 messages each, producer seqs counted per stream. */
function nextTransaction(client: TxClient): Attempt {
  const streams = shuffled(client.rng, STREAMS).slice(0, client.rng.int(2, STREAMS));
  const tag = `t${client.id}-${client.sent++}`;
  const parts: Part[] = streams.map((stream, op) => ({ stream, messages: Array.from({ length: client.rng.int(1, 3) }, (_, k) => JSON.stringify({ t: tag, op, k })) }));
  const operations = parts.map((part) => ({
    stream: `s${part.stream}`,
    content_type: 'application/json',
    payload_base64: Buffer.from(`[${part.messages.join(',')}]`).toString('base64'),
    producer: { producer_id: `tx-${client.id}`, producer_epoch: 0, producer_seq: client.seqs[part.stream]!++ },
  }));
  return { kind: 'transaction', parts, outcome: 'pending', body: JSON.stringify({ operations }) };
}

/** Records an answered transaction: 200 with one acknowledgement per operation, in request order. */
function acceptTransactionAnswer(attempt: Attempt, reply: Reply, expectDuplicate: boolean): void {
  expect(reply.status, reply.text()).toBe(200);
  const acks = reply.json() as TransactionAck[];
  expect(acks.map((a) => a.stream)).toEqual(attempt.parts.map((p) => `s${p.stream}`));
  expect(acks.map((a) => a.duplicate), 'a resent transaction is a duplicate exactly when it had been applied').toEqual(attempt.parts.map(() => expectDuplicate));
  attempt.parts.forEach((part, i) => {
    // A duplicate whose receipt was not kept answers without a range.
    if (acks[i]!.stream_record_start === undefined) return;
    part.start = acks[i]!.stream_record_start;
    part.next = acks[i]!.stream_record_next;
  });
  markAcked(attempt);
}

async function runTxClient(url: string, client: TxClient, attempts: Attempt[]): Promise<void> {
  for (let guard = 0; guard < 100_000; guard++) {
    const attempt = nextTransaction(client);
    attempts.push(attempt);
    let reply: Reply;
    try {
      reply = await call(url, 'POST', TX_PATH, { headers: JSON_TYPE, body: attempt.body, timeoutMs: 10_000 });
    } catch {
      client.unanswered = attempt; // the server is gone: resent after the restart
      return;
    }
    acceptTransactionAnswer(attempt, reply, false);
  }
}

/** A plain append client: arrays of 1-3 messages, every other one guarded by the record tail it last saw there. */
async function runRecordClient(url: string, client: number, round: number, attempts: Attempt[]): Promise<void> {
  const clientRng = seededRandom(testSeed() + 100 * round + client);
  const seen: Array<number | null> = Array.from({ length: STREAMS }, () => null);
  for (let seq = 0; seq < 100_000; seq++) {
    const stream = clientRng.int(0, STREAMS - 1);
    const messages = Array.from({ length: clientRng.int(1, 3) }, (_, k) => JSON.stringify({ a: `r${client}-${round}-${seq}`, k }));
    const attempt: Attempt = { kind: 'append', parts: [{ stream, messages }], outcome: 'pending' };
    attempts.push(attempt);
    const headers: Record<string, string> = { ...JSON_TYPE };
    if (seq % 2 === 1 && seen[stream] !== null) headers['stream-record-match'] = String(seen[stream]);
    let reply: Reply;
    try {
      reply = await call(url, 'POST', streamPath(stream), { headers, body: `[${messages.join(',')}]`, timeoutMs: 10_000 });
    } catch {
      return; // the server is gone: this append stays unacknowledged
    }
    seen[stream] = Number(reply.headers['stream-record-next']);
    if (reply.status !== 204) {
      expect(reply.status, reply.text()).toBe(412);
      attempt.outcome = 'refused';
      continue;
    }
    markAcked(attempt);
    Object.assign(attempt.parts[0]!, { start: Number(reply.headers['stream-record-start']), next: seen[stream] });
  }
}

/** Told of every acknowledgement while a round's load runs (loadAndKill waits on it). */
let ackListener: (() => void) | null = null;

function markAcked(attempt: Attempt): void {
  attempt.outcome = 'acked';
  ackListener?.();
}

/** Resolves once `count` more attempts are acknowledged, or every client has ended (the server is gone). */
function acksOrEnd(count: number, clients: Promise<unknown>): Promise<unknown> {
  let seen = 0;
  const reached = new Promise<void>((resolve) => {
    ackListener = () => {
      if (++seen >= count) resolve();
    };
  });
  return Promise.race([reached, clients]).finally(() => (ackListener = null));
}

async function loadAndKill(srv: ServerProcess, txClients: TxClient[], round: number, attempts: Attempt[]): Promise<number> {
  const clients = [
    ...txClients.map((c) => runTxClient(srv.url, c, attempts)),
    ...Array.from({ length: RECORD_CLIENTS }, (_, c) => runRecordClient(srv.url, c, round, attempts)),
  ];
  await acksOrEnd(ACKS_BEFORE_KILL, Promise.all(clients));
  const killAfterMs = rng.int(0, 199);
  // The crash moment under load: the pause is the behaviour under test, not a wait for an outcome.
  await new Promise((r) => setTimeout(r, killAfterMs));
  await srv.kill();
  await Promise.all(clients);
  return killAfterMs;
}

/** Every message of a stream by ordinal, read with record reads, and the same with offset reads. */
async function readStream(url: string, stream: number): Promise<{ byRecord: string[]; byOffset: string[]; recordNext: number }> {
  const path = streamPath(stream);
  const recordNext = Number((await call(url, 'HEAD', path)).headers['stream-record-next']);
  const byRecord: string[] = [];
  for (let record = 0, guard = 0; record < recordNext && guard < 10_000; guard++) {
    const page = await call(url, 'GET', `${path}?record=${record}&max_records=97`);
    expect(Number(page.headers['stream-record-start'])).toBe(record);
    byRecord.push(...page.text().split('\n').filter((l) => l !== ''));
    record = Number(page.headers['stream-record-next']);
  }
  const byOffset: string[] = [];
  let offset = '-1';
  for (let guard = 0; guard < 10_000; guard++) {
    const page = await call(url, 'GET', `${path}?offset=${offset}&max_bytes=65536`, { headers: { accept: 'application/x-ndjson' } });
    byOffset.push(...page.text().split('\n').filter((l) => l !== ''));
    offset = page.headers['stream-next-offset']!;
    if (page.headers['stream-up-to-date'] === 'true') break;
  }
  return { byRecord, byOffset, recordNext };
}

/** Reads every stream and checks its ordinals; answers where each message is: `stream:ordinal`. */
async function readAll(url: string, context: string): Promise<{ where: Map<string, string>; tails: number[] }> {
  const where = new Map<string, string>();
  const tails: number[] = [];
  for (let stream = 0; stream < STREAMS; stream++) {
    const { byRecord, byOffset, recordNext } = await readStream(url, stream);
    expect(byRecord, `${context}: s${stream}: record reads and offset reads disagree`).toEqual(byOffset);
    expect(byRecord.length, `${context}: s${stream}: Stream-Record-Next is not the number of messages`).toBe(recordNext);
    byRecord.forEach((message, ordinal) => {
      expect(where.has(message), `${context}: ${message} stored twice`).toBe(false);
      where.set(message, `${stream}:${ordinal}`);
    });
    tails.push(recordNext);
  }
  return { where, tails };
}

/** Checks every attempt against what is stored; answers the unacknowledged ones that were applied. */
function checkAttempts(attempts: Attempt[], where: Map<string, string>, context: string): Set<Attempt> {
  const applied = new Set<Attempt>();
  for (const attempt of attempts) {
    const messages = attempt.parts.flatMap((p) => p.messages);
    const present = messages.filter((m) => where.has(m)).length;
    if (attempt.outcome === 'refused') expect(present, `${context}: a refused append was applied`).toBe(0);
    if (attempt.outcome === 'pending') {
      expect([0, messages.length], `${context}: half a ${attempt.kind} survived: ${messages.join(' ')}`).toContain(present);
      if (present > 0) applied.add(attempt);
    }
    if (attempt.outcome !== 'acked') continue;
    expect(present, `${context}: an acknowledged ${attempt.kind} is missing`).toBe(messages.length);
    for (const part of attempt.parts.filter((p) => p.start !== undefined)) {
      expect(part.next! - part.start!).toBe(part.messages.length);
      const expected = part.messages.map((_, k) => `${part.stream}:${part.start! + k}`);
      expect(part.messages.map((m) => where.get(m)), `${context}: an acknowledged ${attempt.kind} moved`).toEqual(expected);
    }
  }
  return applied;
}

/** Resends each client's unanswered transaction unchanged: applied before the kill means a duplicate now. */
async function resendUnanswered(url: string, txClients: TxClient[], applied: Set<Attempt>): Promise<number> {
  let resent = 0;
  for (const client of txClients) {
    const attempt = client.unanswered;
    if (attempt === null) continue;
    client.unanswered = null;
    const reply = await call(url, 'POST', TX_PATH, { headers: JSON_TYPE, body: attempt.body });
    acceptTransactionAnswer(attempt, reply, applied.has(attempt));
    resent++;
  }
  return resent;
}

/** An append guarded by each stream's tail N starts at N. */
async function appendAtTails(url: string, tails: number[], round: number, attempts: Attempt[], context: string): Promise<void> {
  for (let stream = 0; stream < STREAMS; stream++) {
    const message = JSON.stringify({ round, stream });
    const reply = await call(url, 'POST', streamPath(stream), { headers: { ...JSON_TYPE, 'stream-record-match': String(tails[stream]) }, body: message });
    expect(reply.status, `${context}: ${reply.text()}`).toBe(204);
    expect(Number(reply.headers['stream-record-start']), context).toBe(tails[stream]);
    attempts.push({ kind: 'append', outcome: 'acked', parts: [{ stream, messages: [message], start: tails[stream], next: tails[stream]! + 1 }] });
  }
}

async function createStreams(url: string): Promise<void> {
  expect((await call(url, 'PUT', `/${BUCKET}`)).status).toBe(201);
  for (let stream = 0; stream < STREAMS; stream++) expect((await call(url, 'PUT', streamPath(stream), { headers: JSON_TYPE })).status).toBe(201);
}

describe('group transactions under SIGKILL', () => {
  for (const engine of ['sqlite', 'postgres'] as const) {
    it(`every transaction is whole or absent, acknowledged ones stay, resent ones apply once, ordinals stay contiguous (${engine})`, async () => {
      const dataDir = tempDataDir('rill-crash-tx-');
      dataDirs.push(dataDir);
      const postgresUrl = engine === 'postgres' ? await sharedDatabase() : undefined;
      const start = () => startServer({ process: true, dataDir, postgresUrl });
      server = await start();
      await createStreams(server.url);
      const attempts: Attempt[] = [];
      const txClients: TxClient[] = Array.from({ length: TX_CLIENTS }, (_, id) => ({ id, rng: seededRandom(testSeed() + 1 + id), seqs: Array<number>(STREAMS).fill(0), unanswered: null, sent: 0 }));
      let resent = 0;
      for (let round = 1; round <= ROUNDS; round++) {
        const killAfterMs = await loadAndKill(server, txClients, round, attempts);
        server = await start();
        const context = `${engine}, round ${round} (killed ${killAfterMs} ms after ${ACKS_BEFORE_KILL} acks)`;
        const applied = checkAttempts(attempts, (await readAll(server.url, context)).where, context);
        resent += await resendUnanswered(server.url, txClients, applied);
        const after = await readAll(server.url, `${context}, after resending`);
        checkAttempts(attempts, after.where, `${context}, after resending`);
        await appendAtTails(server.url, after.tails, round, attempts, context);
      }
      // Every kill cut each transaction client with a transaction sent and unanswered, so each was resent.
      expect(resent).toBe(TX_CLIENTS * ROUNDS);
      await server.kill();
      server = undefined;
    }, 60_000);
  }
});
