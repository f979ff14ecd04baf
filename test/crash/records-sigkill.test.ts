/**
 * Record ordinals under SIGKILL: clients append JSON arrays to one stream (some guarded
 * by Stream-Record-Match), the server is killed at a random moment under load and
 * restarted on the same data (its directory, or its PostgreSQL database), several times.
 * After each restart:
 *   - N is the number of stored messages: no ordinal was skipped or given twice;
 *   - every acknowledged append's messages sit at exactly the ordinals it was answered;
 *   - a record read from any acknowledged start finds the same messages an offset read does;
 *   - the next append continues at N.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { seededRandom } from '../helpers/seed.js';
import { sharedDatabase } from '../helpers/postgres.js';
import { removeDir, startServer, tempDataDir, type ServerProcess } from '../helpers/server.js';
import { call } from '../http/client.js';

const CLIENTS = 6;
const ROUNDS = 4;
const PATH = '/v1/stream/crash-records';
const JSON_TYPE = { 'content-type': 'application/json' };
/** Kill moments and batch sizes come from the file's seed: RILL_TEST_SEED replays them. */
const rng = seededRandom();

interface Attempt {
  messages: string[];
  outcome: 'pending' | 'acked' | 'refused';
  start?: number;
  next?: number;
}

let server: ServerProcess | undefined;
const dataDirs: string[] = [];

afterAll(async () => {
  await server?.kill();
  dataDirs.forEach(removeDir);
});

/** One client: arrays of 1-4 messages, every third guarded by the record tail it last saw. */
async function runClient(url: string, client: number, nextSeq: number[], attempts: Attempt[]): Promise<void> {
  let seen: number | null = null;
  for (let guard = 0; guard < 100_000; guard++) {
    const seq = nextSeq[client]!++;
    const messages = Array.from({ length: 1 + ((client + seq) % 4) }, (_, k) => JSON.stringify({ c: client, s: seq, k }));
    const attempt: Attempt = { messages, outcome: 'pending' };
    attempts.push(attempt);
    const headers: Record<string, string> = { ...JSON_TYPE };
    if (seq % 3 === 2 && seen !== null) headers['stream-record-match'] = String(seen);
    let reply;
    try {
      reply = await call(url, 'POST', PATH, { headers, body: `[${messages.join(',')}]`, timeoutMs: 10_000 });
    } catch {
      return; // the server is gone: this attempt stays unacknowledged
    }
    seen = Number(reply.headers['stream-record-next']);
    if (reply.status !== 204) {
      expect(reply.status).toBe(412);
      attempt.outcome = 'refused';
      continue;
    }
    attempt.outcome = 'acked';
    attempt.start = Number(reply.headers['stream-record-start']);
    attempt.next = seen;
  }
}

async function pollUntil(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !condition(); i++) await new Promise((r) => setTimeout(r, 5)); // poll interval
}

async function loadAndKill(srv: ServerProcess, nextSeq: number[], attempts: Attempt[]): Promise<number> {
  const acked = () => attempts.filter((a) => a.outcome === 'acked').length;
  const before = acked();
  const clients = Array.from({ length: CLIENTS }, (_, c) => runClient(srv.url, c, nextSeq, attempts));
  await pollUntil(() => acked() - before >= 30);
  const killAfterMs = rng.int(0, 299);
  // The crash moment under load: the pause is the behaviour under test, not a wait for an outcome.
  await new Promise((r) => setTimeout(r, killAfterMs));
  await srv.kill();
  await Promise.all(clients);
  return killAfterMs;
}

/** Every stored message by ordinal, read with record reads, and the same with offset reads. */
async function readBoth(url: string): Promise<{ byRecord: string[]; byOffset: string[]; recordNext: number }> {
  const head = await call(url, 'HEAD', PATH);
  const recordNext = Number(head.headers['stream-record-next']);
  const byRecord: string[] = [];
  for (let record = 0; record < recordNext; ) {
    const page = await call(url, 'GET', `${PATH}?record=${record}&max_records=97`);
    expect(Number(page.headers['stream-record-start'])).toBe(record);
    byRecord.push(...page.body.toString().split('\n').filter((l) => l !== ''));
    record = Number(page.headers['stream-record-next']);
  }
  const byOffset: string[] = [];
  let offset = '-1';
  for (let guard = 0; guard < 10_000; guard++) {
    const page = await call(url, 'GET', `${PATH}?offset=${offset}&max_bytes=65536`, { headers: { accept: 'application/x-ndjson' } });
    byOffset.push(...page.body.toString().split('\n').filter((l) => l !== ''));
    offset = page.headers['stream-next-offset']!;
    if (page.headers['stream-up-to-date'] === 'true') break;
  }
  return { byRecord, byOffset, recordNext };
}

function checkOrdinals(stored: string[], recordNext: number, attempts: Attempt[], context: string): void {
  expect(stored.length, `${context}: N is not the number of stored messages`).toBe(recordNext);
  const seen = new Set<string>();
  for (const message of stored) {
    expect(seen.has(message), `${context}: ${message} stored twice`).toBe(false);
    seen.add(message);
  }
  for (const attempt of attempts) {
    if (attempt.outcome === 'refused') for (const m of attempt.messages) expect(seen.has(m), `${context}: refused ${m} was applied`).toBe(false);
    if (attempt.outcome !== 'acked') continue;
    expect(attempt.next! - attempt.start!).toBe(attempt.messages.length);
    expect(stored.slice(attempt.start, attempt.next), `${context}: an acknowledged append moved`).toEqual(attempt.messages);
  }
  // An unacknowledged append is stored whole or not at all.
  for (const attempt of attempts.filter((a) => a.outcome === 'pending')) {
    const present = attempt.messages.filter((m) => seen.has(m)).length;
    expect([0, attempt.messages.length], `${context}: half an append survived`).toContain(present);
  }
}

describe('record ordinals under SIGKILL', () => {
  for (const engine of ['sqlite', 'postgres'] as const) {
    it(`no ordinal is lost, skipped or reused across restarts, and acknowledged ranges hold their messages (${engine})`, async () => {
      const dataDir = tempDataDir('rill-crash-records-');
      dataDirs.push(dataDir);
      const postgresUrl = engine === 'postgres' ? await sharedDatabase() : undefined;
      const start = () => startServer({ process: true, dataDir, postgresUrl });
      server = await start();
      expect((await call(server.url, 'PUT', PATH, { headers: JSON_TYPE })).status).toBe(201);
      const attempts: Attempt[] = [];
      const nextSeq = Array.from({ length: CLIENTS }, () => 0);
      for (let round = 1; round <= ROUNDS; round++) {
        const killAfterMs = await loadAndKill(server, nextSeq, attempts);
        server = await start();
        const context = `${engine}, round ${round} (killed ${killAfterMs} ms after 30 acks)`;
        const { byRecord, byOffset, recordNext } = await readBoth(server.url);
        expect(byRecord, `${context}: record reads and offset reads disagree`).toEqual(byOffset);
        checkOrdinals(byRecord, recordNext, attempts, context);
        const next = await call(server.url, 'POST', PATH, { headers: { ...JSON_TYPE, 'stream-record-match': String(recordNext) }, body: `{"round":${round}}` });
        expect(next.status, context).toBe(204);
        expect(Number(next.headers['stream-record-start']), context).toBe(recordNext);
        attempts.push({ messages: [`{"round":${round}}`], outcome: 'acked', start: recordNext, next: recordNext + 1 });
      }
      await server.kill();
      server = undefined;
    });
  }
});
