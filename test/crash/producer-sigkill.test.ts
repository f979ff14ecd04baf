/**
 * Exactly-once across a crash: a producer pipelines writes to the real binary on SQLite,
 * the server is SIGKILLed while writes are in flight and restarted on the same data, and
 * the producer resends every write that got no answer, unchanged (same epoch, seq, body
 * and digest). Twice over. In the end the log holds each write exactly once, in seq
 * order, and every receipt the server gave points at the write's true position.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { sendPipelined, type HttpAnswer, type ProducerWrite } from '../helpers/producer-client.js';
import { removeDir, startServer, type ServerProcess } from '../helpers/server.js';

const WRITES = 600;
const IN_FLIGHT = 24;
/** The server is killed once this many more writes have been acknowledged (200 or 204). */
const KILL_AFTER_ANSWERS = [150, 200];
const off = (position: number): string => String(position).padStart(20, '0');

let server: ServerProcess | null = null;
let dataDir: string | null = null;

afterAll(async () => {
  await server?.kill();
  if (dataDir) removeDir(dataDir);
});

/** Writes of varied sizes, so a misplaced or doubled write shows in the bytes. */
function makeWrites(): ProducerWrite[] {
  return Array.from({ length: WRITES }, (_, seq) => ({ seq, body: Buffer.from(`<${seq}:${'x'.repeat(seq % 97)}>\n`) }));
}

async function readLog(url: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  let offset = '-1';
  for (let round = 0; round < 1_000; round++) {
    const res = await fetch(`${url}?offset=${offset}`);
    expect(res.status).toBe(200);
    parts.push(Buffer.from(await res.arrayBuffer()));
    const next = res.headers.get('stream-next-offset')!;
    if (res.headers.get('stream-up-to-date') === 'true') break;
    offset = next;
  }
  return Buffer.concat(parts);
}

/** Where each write must start: the bytes of every earlier write, once, in order. */
function positions(writes: ProducerWrite[]): number[] {
  const starts: number[] = [];
  let at = 0;
  for (const w of writes) {
    starts.push(at);
    at += w.body.length;
  }
  return starts;
}

function checkReceipt(seq: number, answer: HttpAnswer, starts: number[], writes: ProducerWrite[]): void {
  if (answer.headers['stream-offset'] === undefined) {
    // A repeat of an older write: deduplicated, its receipt no longer kept.
    expect([seq, answer.status, answer.headers['producer-outcome']]).toEqual([seq, 204, 'receipt-evicted']);
    return;
  }
  const expected = [off(starts[seq]!), off(starts[seq]! + writes[seq]!.body.length)];
  expect([seq, answer.headers['stream-offset'], answer.headers['stream-next-offset']]).toEqual([seq, ...expected]);
}

describe('SIGKILL while a producer pipelines', () => {
  it('every write ends in the log exactly once, in seq order, after resending the unanswered ones unchanged', async () => {
    const writes = makeWrites();
    const starts = positions(writes);
    server = await startServer({ process: true });
    dataDir = server.dataDir;
    const url = () => `${server!.url}/v1/stream/crash`;
    expect((await fetch(url(), { method: 'PUT', headers: { 'content-type': 'text/plain' } })).status).toBe(201);
    const options = { producerId: 'crash-writer', epoch: 0, contentType: 'text/plain', maxAttempts: 50_000 };
    const claim = await sendPipelined(url(), writes.slice(0, 1), { ...options, inFlight: 1 });
    expect(claim.answered.get(0)?.status).toBe(200);

    const answered = new Map<number, HttpAnswer>(claim.answered);
    let pending = writes.slice(1);
    const inFlightAtKill: number[] = [];
    for (const killAfter of [...KILL_AFTER_ANSWERS, null]) {
      let count = 0;
      let killed = false;
      // Kill at the first acknowledgement past the mark that leaves writes in flight.
      const onAnswer = (_seq: number, answer: HttpAnswer, inFlightNow: number) => {
        if (answer.status < 300) count++;
        if (killed || killAfter === null || count < killAfter || inFlightNow === 0) return;
        killed = true;
        inFlightAtKill.push(inFlightNow);
        server!.child.kill('SIGKILL');
      };
      const round = await sendPipelined(url(), pending, { ...options, inFlight: IN_FLIGHT, onAnswer });
      for (const [seq, answer] of round.answered) answered.set(seq, answer);
      pending = round.unanswered.map((seq) => writes[seq]!);
      if (killAfter === null) break;
      await server.kill();
      // The same data directory; the producer resends what was unanswered, unchanged.
      server = await startServer({ process: true, dataDir: server.dataDir });
    }

    expect(pending).toEqual([]);
    // Each round was cut by a kill with writes in flight.
    expect(inFlightAtKill).toHaveLength(KILL_AFTER_ANSWERS.length);
    for (const [seq, answer] of answered) checkReceipt(seq, answer, starts, writes);
    expect(answered.size).toBe(WRITES);
    const log = await readLog(url());
    expect(log.equals(Buffer.concat(writes.map((w) => w.body)))).toBe(true);
    // Three server starts and 600 writes: a bound only a hang reaches. Under other work
    // (load average 9) the test took more than 30 s.
  }, 120_000);
});
