/**
 * Tier 7: PostgreSQL itself SIGKILLed and restarted under load (twice), with two rill nodes on
 * it that are never restarted.
 *
 * While the database is down, every write and read (GET and HEAD) a node answers is
 * 503 STORAGE_UNAVAILABLE with Retry-After (and the JSON error body where there is a body):
 * never a 500, never a hang (no answer within three times the configured timeouts), and the
 * rill processes stay up.
 * Once PostgreSQL is back, the same processes serve writes and reads again within a bounded
 * time. In the end every acknowledged write is present exactly once, in order; plain writes
 * answered "not applied" are absent; producer writes (resent unchanged until answered, to either
 * node) are each stored once; the readers that lived through it all saw every message once; and
 * cross-node notifications work again (the nodes' LISTEN connections reconnected by themselves).
 *
 * Also: an SSE response that the outage ends cleanly (its last chunk sent, no Connection: close)
 * must leave its keep-alive connection usable, so that a client's next request on it is answered
 * (503) rather than lost.
 */
import type { Socket } from 'node:net';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { offset as pad20 } from '../helpers/http.js';
import { checkLog, median, readLog } from '../helpers/multinode/checks.js';
import type { LoadContext, ReaderContext } from '../helpers/multinode/load.js';
import { RillNode } from '../helpers/multinode/nodes.js';
import { LongPollReader, SseReader } from '../helpers/multinode/readers.js';
import { observed, send, sleep, type Observation } from '../helpers/multinode/send.js';
import { untilLiveReaders } from '../helpers/waits.js';
import { PlainWriter, ProducerWriter } from '../helpers/multinode/writers.js';
import { createDatabase, startPostgres, type PostgresServer } from '../helpers/postgres.js';
import { openSocket, parseHead } from '../reliability/net.js';

const CONNECT_TIMEOUT_MS = 1_000;
const STATEMENT_TIMEOUT_MS = 2_000;
const NODE_ARGS = ['--postgres-connect-timeout', '1s', '--postgres-statement-timeout', '2s', '--sse-lifetime', '5s'];
/**
 * How long the load's clients wait for an answer: three times a connection wait plus a
 * statement, the longest the server's own timeouts let a request take. No answer by then is
 * a hang, and a failure; how long answers do take is logged (the slowest), not bounded.
 */
const NO_ANSWER_MS = 3 * (CONNECT_TIMEOUT_MS + STATEMENT_TIMEOUT_MS);
/** How long PostgreSQL stays down each time: the outage under test. */
const DOWN_MS = 2_500;
/** A generous wait for each node to serve again once PostgreSQL is back: only a node that never recovers reaches it. */
const RECOVERY_LIMIT_MS = 15_000;
const JSON_TYPE = { 'content-type': 'application/json' };

let postgres: PostgresServer | undefined;
let databaseUrl: string | undefined;
const nodes: RillNode[] = [];

afterAll(async () => {
  await Promise.all(nodes.map((node) => node.dispose()));
  await postgres?.stop();
});

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const describeObservation = (o: Observation) =>
  `${o.who} ${o.method} ${o.url} after ${o.endAt - o.sentAt} ms: ${o.status ?? `no answer (${o.reason})`} ${o.code ?? ''} retry-after=${o.retryAfter}`;

describe('PostgreSQL SIGKILLed and restarted under load', () => {
  it('503 + Retry-After while it is down, the same rill processes serve again once it is back, nothing acknowledged lost or doubled', async () => {
    postgres = await startPostgres();
    databaseUrl = await createDatabase(postgres);
    nodes.push(await RillNode.start('node-0', databaseUrl, NODE_ARGS));
    nodes.push(await RillNode.start('node-1', databaseUrl, NODE_ARGS));
    const pids = nodes.map((node) => node.pid!);
    const urls = nodes.map((node) => node.url);
    const path = '/v1/stream/pg-kill-load';
    const probePath = '/v1/stream/pg-kill-probe';
    for (const p of [path, probePath]) expect((await send(urls[0] + p, { method: 'PUT', headers: JSON_TYPE })).status).toBe(201);

    const observations: Observation[] = [];
    const observe = (o: Observation) => observations.push(o);
    const started = Date.now();
    let stopping = false;
    const violations: string[] = [];
    const ctx: LoadContext = {
      urls,
      path,
      stopping: () => stopping,
      deadline: started + 40_000,
      violations,
      timeoutMs: NO_ANSWER_MS,
      pauseAfter5xxMs: 100,
      observe,
    };
    let finalTail: number | undefined;
    const rctx: ReaderContext = { urls, path, violations, finalTail: () => finalTail, deadline: started + 50_000 };
    const readers = [new LongPollReader('long-poll-1', rctx, 1), new SseReader('sse-0', rctx, 0)];
    const plain = [new PlainWriter('plain-a', ctx, 0, 5), new PlainWriter('plain-b', ctx, 1, 5)];
    const producers = [new ProducerWriter('producer-1', ctx, 1, 1, 5), new ProducerWriter('producer-3', ctx, 3, 0, 5)];
    let probing = true;
    // However the test ends, the writers, readers and probes stop.
    onTestFinished(() => {
      stopping = true;
      probing = false;
      finalTail ??= 0;
    });
    const readerRuns = readers.map((r) => r.run());
    const writerRuns = [...plain, ...producers].map((w) => w.run());

    // Reads of both kinds against both nodes, all along.
    const probe = (async () => {
      for (let i = 0; probing && Date.now() < ctx.deadline; i++) {
        const url = urls[i % urls.length]!;
        await Promise.all([
          observed(ctx, 'probe', `${url}${path}?offset=-1&max_bytes=64`, {}).catch(() => {}),
          observed(ctx, 'probe', url + path, { method: 'HEAD' }).catch(() => {}),
        ]);
        await sleep(100); // the probes' pace: a client reading every 100 ms
      }
    })();

    // Twice: load, then PostgreSQL is SIGKILLed (kill() resolves once the postmaster and all
    // its children are gone and its port refuses connections), stays down, and is restarted;
    // each node (the same process) must serve a write and a read again.
    const cycles: Array<{ killMs: number; downFrom: number; downUntil: number; restartMs: number; upAt: number; recoveredAfter: number[] }> = [];
    for (let cycle = 0; cycle < 2; cycle++) {
      await sleep(2_000); // load on a healthy database first: the schedule under test
      const killAt = Date.now();
      await postgres.kill();
      const downFrom = Date.now();
      await sleep(DOWN_MS); // the outage under test
      const downUntil = Date.now();
      await postgres.restart();
      const upAt = Date.now();
      const recoveredAfter: number[] = [];
      for (const [i, url] of urls.entries()) {
        let recovered = false;
        for (let attempt = 0; !recovered && Date.now() < upAt + RECOVERY_LIMIT_MS; attempt++) {
          const body = JSON.stringify({ cycle, node: i, attempt });
          const write = await send(url + probePath, { method: 'POST', headers: JSON_TYPE, body, timeoutMs: 10_000 }).catch(() => null);
          const read = write?.status === 204 ? await send(`${url}${probePath}?offset=-1`, { timeoutMs: 10_000 }).catch(() => null) : null;
          if (write?.status === 204 && read?.status === 200 && read.text.includes(body)) recovered = true;
          else await sleep(100); // a client's backoff before it tries again
        }
        expect([cycle, nodes[i]!.name, recovered]).toEqual([cycle, nodes[i]!.name, true]);
        recoveredAfter.push(Date.now() - upAt);
      }
      cycles.push({ killMs: downFrom - killAt, downFrom, downUntil, restartMs: upAt - downUntil, upAt, recoveredAfter });
    }
    await sleep(2_000); // load after the last restart: the schedule under test
    stopping = true;
    probing = false;
    await Promise.all([...writerRuns, probe]);

    const log = await readLog(urls[0] + path);
    finalTail = log.tail;
    await Promise.all(readerRuns);

    // While PostgreSQL was down: the answers to requests sent and answered in that time.
    const down = observations.filter((o) => cycles.some((c) => o.sentAt >= c.downFrom && o.endAt <= c.downUntil));
    const downWrites = down.filter((o) => o.method === 'POST');
    const downGets = down.filter((o) => o.method === 'GET');
    const downHeads = down.filter((o) => o.method === 'HEAD');
    const slowest = observations.reduce((max, o) => Math.max(max, o.endAt - o.sentAt), 0);
    const statuses = new Map<string, number>();
    for (const o of observations) statuses.set(String(o.status), (statuses.get(String(o.status)) ?? 0) + 1);
    const plainStats = plain.map((w) => {
      const counts = { acked: 0, unknown: 0, refused: 0 };
      for (const outcome of w.outcomes.values()) counts[outcome] += 1;
      return `${w.id}: ${JSON.stringify(counts)}`;
    });
    console.log(
      [
        ...cycles.map(
          (c, i) =>
            `[postgres-kill] cycle ${i}: kill took ${c.killMs} ms; down ${c.downUntil - c.downFrom} ms; restart took ${c.restartMs} ms; nodes served again after ms: ${c.recoveredAfter.join(' ')}`,
        ),
        `  while down: ${downWrites.length} writes, ${downGets.length} GETs, ${downHeads.length} HEADs answered; all answers by status: ${JSON.stringify(Object.fromEntries(statuses))}; slowest answer ${slowest} ms`,
        `  ${log.messages.length} messages stored; ${plainStats.join('; ')}`,
        ...producers.map((p) => `  ${p.id}: ${p.acks.size} acked, ${p.resends} resends, ${p.duplicates} duplicates (204), ${p.gaps} 409 gaps`),
        ...readers.map((r) => `  ${r.id}: ${r.messages.length} messages, ${r.reads} reads, ${r.moves} moves`),
      ].join('\n'),
    );

    // The rill processes never went down.
    for (const [i, node] of nodes.entries()) {
      expect([node.name, node.pid, node.alive, node.restarts, processAlive(pids[i]!)]).toEqual([node.name, pids[i], true, 0, true]);
    }

    // The load itself went on after the last restart, on both nodes.
    const lastUp = cycles[cycles.length - 1]!.upAt;
    for (const url of urls) {
      const acked = observations.filter((o) => o.method === 'POST' && o.url.startsWith(`${url}/`) && o.sentAt > lastUp && (o.status === 200 || o.status === 204));
      expect([url, acked.length > 0]).toEqual([url, true]);
    }
    // Enough happened while PostgreSQL was down to judge.
    expect(downWrites.length).toBeGreaterThanOrEqual(20);
    expect(downGets.length).toBeGreaterThanOrEqual(10);
    expect(downHeads.length).toBeGreaterThanOrEqual(10);
    const wrongWhileDown = down.filter((o) => {
      if (o.status !== 503 || !/^\d+$/.test(o.retryAfter ?? '')) return true;
      if (o.method === 'HEAD') return false; // no body
      return !(o.contentType ?? '').startsWith('application/json') || o.code !== 'STORAGE_UNAVAILABLE' || typeof o.message !== 'string';
    });
    expect(wrongWhileDown.map(describeObservation)).toEqual([]);
    // Never a 500 (or any 5xx but 503), never without an answer (NO_ANSWER_MS).
    const wrongEver = observations.filter((o) => o.status === null || (o.status >= 500 && o.status !== 503));
    expect(wrongEver.map(describeObservation)).toEqual([]);
    for (const o of observations.filter((x) => x.status === 503)) {
      expect(/^\d+$/.test(o.retryAfter ?? ''), describeObservation(o)).toBe(true);
    }

    // Nothing acknowledged lost, nothing doubled, the readers saw it all once.
    expect(violations).toEqual([]);
    expect(checkLog(log, { plain, producers })).toEqual([]);
    for (const w of plain) expect(w.acked.length).toBeGreaterThan(20);
    for (const p of producers) expect(p.acks.size).toBeGreaterThan(20);
    for (const reader of readers) {
      expect([reader.id, reader.offset]).toEqual([reader.id, log.tail]);
      expect(reader.messages).toEqual(log.messages);
    }
    for (const url of urls) {
      const head = await send(url + path, { method: 'HEAD' });
      expect(head.status).toBe(200);
      expect(Number(head.headers.get('stream-next-offset'))).toBe(log.tail);
    }

    // Cross-node live reads work again: node 1's long-poll reader gets node 0's appends, the
    // listeners having reconnected by themselves (how soon, on healthy nodes, is the bench's
    // longpoll-cross-p50; the latencies here are logged).
    const notifyPath = '/v1/stream/pg-kill-notify';
    expect((await send(urls[0] + notifyPath, { method: 'PUT', headers: JSON_TYPE })).status).toBe(201);
    const latencies: number[] = [];
    let offset = 0;
    for (let i = 0; i < 10; i++) {
      let receivedAt = 0;
      const poll = send(`${urls[1]}${notifyPath}?offset=${pad20(offset)}&live=long-poll&timeout_ms=5000`, { timeoutMs: 10_000 }).then((answer) => {
        receivedAt = Date.now();
        return answer;
      });
      await untilLiveReaders(urls[1]!, 'long_poll', 1, { atLeast: true }); // the reader is waiting on node 1
      const appendedAt = Date.now();
      expect((await send(urls[0] + notifyPath, { method: 'POST', headers: JSON_TYPE, body: JSON.stringify({ i }) })).status).toBe(204);
      const answer = await poll;
      expect([i, answer.status]).toEqual([i, 200]);
      latencies.push(receivedAt - appendedAt);
      offset = Number(answer.headers.get('stream-next-offset'));
    }
    console.log(`[postgres-kill] after the restarts, node 0 append -> node 1 long-poll answer, ms: ${latencies.join(' ')} (median ${median(latencies)})`);
    expect(offset).toBe((await readLog(urls[0] + notifyPath)).tail);
  }, 60_000);

  it('an SSE response ended cleanly because the database went away leaves its keep-alive connection usable: the next request on it is answered', async () => {
    postgres ??= await startPostgres();
    if (!postgres.running()) await postgres.restart();
    databaseUrl ??= await createDatabase(postgres);
    // A short heartbeat, so that the SSE response looks at the stream (and meets the outage) soon.
    const node = await RillNode.start('sse-node', databaseUrl, [...NODE_ARGS, '--sse-heartbeat', '500ms']);
    nodes.push(node);
    const path = '/v1/stream/pg-kill-sse-keepalive';
    expect((await send(node.url + path, { method: 'PUT', headers: JSON_TYPE })).status).toBe(201);

    const socket: Socket = await openSocket(node.port);
    const host = `127.0.0.1:${node.port}`;
    let data = Buffer.alloc(0);
    let closed = false;
    /** Where the SSE response's last chunk ended, once it has. */
    let sseEnd: number | null = null;
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      if (sseEnd !== null) return;
      sseEnd = endOfChunkedBody(data);
      // The SSE response is complete (no Connection: close): reuse the connection at once, as
      // a keep-alive client with requests queued does.
      if (sseEnd !== null) socket.write(`HEAD ${path} HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
    });
    socket.on('close', () => (closed = true));
    socket.on('error', () => {});
    socket.write(`GET ${path}?offset=now&live=sse HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
    try {
      await until(() => parseHead(data) !== null || closed, 5_000);
      const head = parseHead(data)!;
      expect(head.status).toBe(200);
      expect(head.headers['transfer-encoding']).toBe('chunked');
      expect(head.headers.connection ?? '').not.toMatch(/close/i);

      await postgres.kill();
      await until(() => sseEnd !== null || closed, 10_000);
      // A response cut without its last chunk tells the client not to reuse the connection;
      // one ended cleanly must not be followed by the server closing the connection unasked.
      if (sseEnd !== null) {
        await until(() => parseHead(data.subarray(sseEnd!)) !== null || closed, 5_000);
        const next = parseHead(data.subarray(sseEnd));
        expect(
          next ? `answered ${next.status}` : `connection closed without an answer (${closed ? 'closed by the server' : 'no answer in 5 s'})`,
          'the HEAD sent on the connection right after the SSE response ended cleanly',
        ).toBe('answered 503');
      }
    } finally {
      socket.destroy();
      if (!postgres.running()) await postgres.restart();
    }
  }, 30_000);
});

/** The end of a chunked body that starts right after the response head in `data`, or null while incomplete. */
function endOfChunkedBody(data: Buffer): number | null {
  const headEnd = data.indexOf('\r\n\r\n');
  if (headEnd < 0) return null;
  let at = headEnd + 4;
  for (;;) {
    const lineEnd = data.indexOf('\r\n', at);
    if (lineEnd < 0) return null;
    const size = Number.parseInt(data.subarray(at, lineEnd).toString('latin1'), 16);
    if (!Number.isInteger(size)) throw new Error(`not a chunk size: ${data.subarray(at, lineEnd).toString('latin1')}`);
    if (size === 0) return data.length >= lineEnd + 4 ? lineEnd + 4 : null; // no trailers
    if (data.length < lineEnd + 2 + size + 2) return null;
    at = lineEnd + 2 + size + 2;
  }
}

/** Waits for `condition` (polled: a socket's bytes arrive in no particular chunks), or `timeoutMs`; the caller judges which. */
async function until(condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition() && Date.now() < deadline) await sleep(10); // a poll's interval
}
