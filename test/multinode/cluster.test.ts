/**
 * Tier 7: several rill nodes on one PostgreSQL database (the run's shared server).
 *
 *  - A producer's write repeated unchanged on another node is a duplicate (204), stored once,
 *    also when both copies arrive at once;
 *    two Stream-Seq writers racing on two nodes with the same value: one wins, the other is told
 *    409 STREAM_SEQ_CONFLICT.
 *  - A long-poll reader on node B gets each append acknowledged by node A, once and in order
 *    (how soon, through the commit notification rather than the 1 s re-check, is the bench's
 *    `longpoll-cross-p50` on two nodes: docs/performance.md).
 *  - A lost notification (node B's LISTEN connection terminated from SQL) only makes B's reader
 *    late: it still gets the append, once, in order.
 *  - Three nodes under load (plain, producer and Stream-Seq writers spread over the nodes round
 *    robin, failing over on refused connections; SSE and long-poll readers that move to another
 *    node when theirs dies) while nodes are SIGKILLed and restarted on their port, four times, not
 *    always the same one; besides the kills, the clients drop 5% of the answers to writes, so
 *    that resends of writes that did apply happen on every run. Every acknowledged write is
 *    present once, where its receipt said, in acknowledgement order; unknown plain writes at most
 *    once; no producer write applied twice; every reader saw every message once, in order.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { offset as pad20 } from '../helpers/http.js';
import { checkLog, median, readLog } from '../helpers/multinode/checks.js';
import { connectionPortsOf, listenerPorts, terminateListeners } from '../helpers/multinode/listeners.js';
import { messageOf, type LoadContext, type ReaderContext } from '../helpers/multinode/load.js';
import { RillNode } from '../helpers/multinode/nodes.js';
import { LongPollReader, SseReader } from '../helpers/multinode/readers.js';
import { send, sleep, type Observation } from '../helpers/multinode/send.js';
import { until, untilLiveReaders } from '../helpers/waits.js';
import { PlainWriter, ProducerWriter, StreamSeqWriter } from '../helpers/multinode/writers.js';
import { blake3Hex } from '../helpers/producer-client.js';
import { sharedDatabase } from '../helpers/postgres.js';
import { seededRandom, testSeed } from '../helpers/seed.js';

/** Short SSE lifetime, so SSE readers also resume from control events without any kill. */
const NODE_ARGS = ['--sse-lifetime', '5s'];
const JSON_TYPE = { 'content-type': 'application/json' };
const NDJSON = { accept: 'application/x-ndjson' };
/** Share of write attempts under load whose answer the client drops (as a network would), besides those the kills cut. */
const LOSE_CHANCE = 0.05;

let databaseUrl: string;
let nodes: RillNode[] = [];

const tag = () => randomBytes(4).toString('hex');

async function createStream(node: RillNode, path: string): Promise<void> {
  const res = await send(node.url + path, { method: 'PUT', headers: JSON_TYPE });
  expect(res.status).toBe(201);
}

beforeAll(async () => {
  databaseUrl = await sharedDatabase();
  // One first, so the schema is created by one node; then the others.
  nodes.push(await RillNode.start('node-0', databaseUrl, NODE_ARGS));
  nodes.push(...(await Promise.all([1, 2].map((i) => RillNode.start(`node-${i}`, databaseUrl, NODE_ARGS)))));
});

afterAll(async () => {
  await Promise.all(nodes.map((node) => node.dispose()));
  nodes = [];
});

describe('rill nodes on one PostgreSQL database', () => {
  it('a producer write resent unchanged to another node, or sent to two nodes at once, is applied once; the other answer is the duplicate 204', async () => {
    const [a, b] = [nodes[0]!, nodes[1]!];
    const path = `/v1/stream/mn-dup-${tag()}`;
    await createStream(a, path);
    const bodies: string[] = [];
    for (let seq = 0; seq < 6; seq++) {
      const body = messageOf('dup-producer', seq);
      bodies.push(body);
      const headers = { ...JSON_TYPE, 'producer-id': 'dup-producer', 'producer-epoch': '0', 'producer-seq': String(seq), 'producer-digest': blake3Hex(body) };
      // Even seqs go to A first, odd ones to B first.
      const [first, second] = seq % 2 === 0 ? [a, b] : [b, a];
      const applied = await send(first.url + path, { method: 'POST', headers, body });
      expect([seq, applied.status]).toEqual([seq, 200]);
      const again = await send(second.url + path, { method: 'POST', headers, body });
      expect([seq, again.status]).toEqual([seq, 204]);
      // The duplicate carries the original receipt.
      expect(again.headers.get('stream-offset')).toBe(applied.headers.get('stream-offset'));
      expect(again.headers.get('stream-next-offset')).toBe(applied.headers.get('stream-next-offset'));
    }
    // The same write sent to both nodes at once: one applies it (200), the other finds it applied (204).
    for (let seq = 6; seq < 16; seq++) {
      const body = messageOf('dup-producer', seq);
      bodies.push(body);
      const headers = { ...JSON_TYPE, 'producer-id': 'dup-producer', 'producer-epoch': '0', 'producer-seq': String(seq), 'producer-digest': blake3Hex(body) };
      const answers = await Promise.all([a, b].map((node) => send(node.url + path, { method: 'POST', headers, body })));
      expect([seq, answers.map((x) => x.status).sort()]).toEqual([seq, [200, 204]]);
    }
    for (const node of [a, b, nodes[2]!]) expect((await readLog(node.url + path)).messages).toEqual(bodies);
  });

  it('two Stream-Seq writers on two nodes racing with the same value: exactly one wins, the other gets 409 STREAM_SEQ_CONFLICT', async () => {
    const [a, b] = [nodes[0]!, nodes[1]!];
    const path = `/v1/stream/mn-race-${tag()}`;
    await createStream(a, path);
    const winners: string[] = [];
    const wins = { 'racer-a': 0, 'racer-b': 0 };
    for (let round = 1; round <= 20; round++) {
      const seq = pad20(round);
      const racers = [
        { id: 'racer-a' as const, node: a },
        { id: 'racer-b' as const, node: b },
      ];
      const answers = await Promise.all(
        racers.map((r) => send(r.node.url + path, { method: 'POST', headers: { ...JSON_TYPE, 'stream-seq': seq }, body: messageOf(r.id, round) })),
      );
      const statuses = answers.map((x) => x.status);
      expect([round, [...statuses].sort()]).toEqual([round, [204, 409]]);
      const winner = statuses.indexOf(204);
      const loser = answers[1 - winner]!;
      expect(loser.code).toBe('STREAM_SEQ_CONFLICT');
      expect(loser.headers.get('stream-last-seq')).toBe(seq);
      winners.push(messageOf(racers[winner]!.id, round));
      wins[racers[winner]!.id] += 1;
    }
    const log = await readLog(b.url + path);
    expect(log.messages).toEqual(winners);
    const headB = await send(b.url + path, { method: 'HEAD' });
    expect(headB.headers.get('stream-last-seq')).toBe(pad20(20));
    console.log(`[multinode] Stream-Seq race: wins ${JSON.stringify(wins)}`);
  });

  it('a long-poll reader on node B gets each of 20 appends acknowledged by node A, once and in order', async () => {
    const [a, b] = [nodes[0]!, nodes[1]!];
    const path = `/v1/stream/mn-notify-${tag()}`;
    await createStream(a, path);
    const latencies: number[] = [];
    let offset = 0;
    for (let i = 0; i < 20; i++) {
      let receivedAt = 0;
      const poll = send(`${b.url}${path}?offset=${pad20(offset)}&live=long-poll&timeout_ms=5000`, { headers: NDJSON, timeoutMs: 10_000 }).then((answer) => {
        receivedAt = Date.now();
        return answer;
      });
      await untilLiveReaders(b.url, 'long_poll', 1, { atLeast: true }); // the reader is waiting on B
      const body = messageOf('notify', i);
      const appendedAt = Date.now();
      const ack = await send(a.url + path, { method: 'POST', headers: JSON_TYPE, body });
      expect(ack.status).toBe(204);
      const answer = await poll;
      expect([i, answer.status, answer.text]).toEqual([i, 200, `${body}\n`]);
      latencies.push(receivedAt - appendedAt);
      offset = Number(answer.headers.get('stream-next-offset'));
    }
    // For the record; the bench holds the figure (longpoll-cross-p50).
    console.log(`[multinode] A append -> B long-poll answer, ms: ${latencies.join(' ')} (median ${median(latencies)})`);
    expect(offset).toBe((await readLog(a.url + path)).tail);
  });

  it("a lost notification (node B's LISTEN connection terminated from SQL) is repaired: B's long-poll reader still gets A's appends, once, in order", async () => {
    const [a, b] = [nodes[0]!, nodes[1]!];
    const path = `/v1/stream/mn-lost-${tag()}`;
    await createStream(a, path);
    const pgPort = Number(new URL(databaseUrl).port);
    const received: string[] = [];
    const latencies: number[] = [];
    let offset = 0;
    for (let round = 0; round < 3; round++) {
      // B's LISTEN connection: B's connections to PostgreSQL that pg_stat_activity shows listening.
      let bListener: number[] = [];
      // After a round's termination, B listens again once it has reconnected.
      await until(async () => {
        const listening = new Set(await listenerPorts(databaseUrl));
        bListener = connectionPortsOf(b.pid!, pgPort).filter((port) => listening.has(port));
        return bListener.length === 1;
      }, 'node B listening on exactly one connection');

      let receivedAt = 0;
      const poll = send(`${b.url}${path}?offset=${pad20(offset)}&live=long-poll&timeout_ms=10000`, { headers: NDJSON, timeoutMs: 15_000 }).then((answer) => {
        receivedAt = Date.now();
        return answer;
      });
      await untilLiveReaders(b.url, 'long_poll', 1, { atLeast: true }); // the reader is waiting on B
      expect(await terminateListeners(databaseUrl, bListener)).toBe(1);
      const body = messageOf('lost', round);
      const appendedAt = Date.now();
      const ack = await send(a.url + path, { method: 'POST', headers: JSON_TYPE, body });
      expect(ack.status).toBe(204);
      const answer = await poll;
      expect([round, answer.status]).toEqual([round, 200]);
      // Repaired before the long-poll's own 10 s wait ran out (it would have answered 204).
      latencies.push(receivedAt - appendedAt);
      received.push(...answer.text.split('\n').slice(0, -1));
      offset = Number(answer.headers.get('stream-next-offset'));
    }
    const log = await readLog(a.url + path);
    expect(received).toEqual([0, 1, 2].map((round) => messageOf('lost', round)));
    expect(received).toEqual(log.messages);
    expect(offset).toBe(log.tail);
    console.log(`[multinode] lost notification repaired after, ms: ${latencies.join(' ')}`);
  });

  it('after a key rotation on node A, a wake token A issues is accepted at once by node B, which had not read the rotation', async () => {
    const [a, b] = [nodes[0]!, nodes[1]!];
    const root = `mn-rot-${tag()}`;
    const subscription = (node: RillNode, rest = '') => `${node.url}/v1/stream/__ds/subscriptions/${root}${rest}`;
    await createStream(a, `/v1/stream/${root}-wake`);
    const created = await send(subscription(a), { method: 'PUT', headers: JSON_TYPE, body: JSON.stringify({ type: 'pull-wake', pattern: `${root}/*`, wake_stream: `${root}-wake` }) });
    expect(created.status).toBe(201);
    expect((await send(`${a.url}/v1/stream/__ds/jwks/rotate`, { method: 'POST' })).status).toBe(200);
    const put = await send(`${a.url}/v1/stream/${root}/s`, { method: 'PUT', headers: JSON_TYPE, body: '[1]' });
    expect(put.status).toBe(201);
    const tail = put.headers.get('stream-next-offset')!;
    // The work is there once the wake stream says so.
    const woke = await send(`${a.url}/v1/stream/${root}-wake?offset=-1&live=long-poll&timeout_ms=10000`, { timeoutMs: 15_000 });
    expect(woke.status).toBe(200);
    const claim = await send(subscription(a, '/claim'), { method: 'POST', headers: JSON_TYPE, body: '{"worker":"w"}' });
    expect(claim.status).toBe(200);
    const claimed = JSON.parse(claim.text) as { wake_id: string; generation: number; token: string };
    const ack = { wake_id: claimed.wake_id, generation: claimed.generation, acks: [{ stream: `${root}/s`, offset: tail }], done: true };
    const acked = await send(subscription(b, '/ack'), { method: 'POST', headers: { ...JSON_TYPE, authorization: `Bearer ${claimed.token}` }, body: JSON.stringify(ack) });
    expect([acked.status, acked.code]).toEqual([200, undefined]);
    // A token nobody issued is still refused there (a MAC character changed in its used bits).
    const altered = (token: string) => token.slice(0, -2) + (token.at(-2) === 'A' ? 'B' : 'A') + token.at(-1);
    const forged = await send(subscription(b, '/ack'), { method: 'POST', headers: { ...JSON_TYPE, authorization: `Bearer ${altered(claimed.token)}` }, body: JSON.stringify(ack) });
    expect([forged.status, forged.code]).toEqual([401, 'TOKEN_INVALID']);
  });

  it('nodes SIGKILLed and restarted under load: acknowledged writes once and in order, no producer write twice, every reader saw every message once', async () => {
    const path = `/v1/stream/mn-load-${tag()}`;
    await createStream(nodes[0]!, path);
    const urls = nodes.map((node) => node.url);
    const LOAD_MS = 20_000;
    const started = Date.now();
    let stopping = false;
    const violations: string[] = [];
    /** Answers by status ('none': no answer: a kill, or an answer dropped on purpose). */
    const statuses = new Map<string, number>();
    const serverErrors: string[] = [];
    const observe = (o: Observation) => {
      const key = o.status === null ? 'none' : String(o.status);
      statuses.set(key, (statuses.get(key) ?? 0) + 1);
      if (o.status !== null && o.status >= 500) serverErrors.push(`${o.who} ${o.method} ${o.url}: ${o.status} ${o.code} ${o.message}`);
    };
    // How long after the load a write still in flight is resent, and a reader reads on, before
    // the test calls it never answered: bounds only a cluster that stopped answering reaches. A
    // machine loaded by other work (load average 9) restarted nodes in 4-7 s and its writers
    // were done 8.3 s after the stop, which a 5 s bound here failed as "never answered".
    const WRITE_GRACE_MS = 40_000;
    const READ_GRACE_MS = 55_000;
    const ctx: LoadContext = { urls, path, stopping: () => stopping, deadline: started + LOAD_MS + WRITE_GRACE_MS, violations, timeoutMs: 10_000, loseChance: LOSE_CHANCE, observe };
    let finalTail: number | undefined;
    const rctx: ReaderContext = { urls, path, violations, finalTail: () => finalTail, deadline: started + LOAD_MS + READ_GRACE_MS };

    // Readers start on nodes 1 and 2 (SSE) and 2 and 0 (long-poll); writers go round robin.
    const readers = [new SseReader('sse-1', rctx, 1), new SseReader('sse-2', rctx, 2), new LongPollReader('long-poll-2', rctx, 2), new LongPollReader('long-poll-0', rctx, 0)];
    const plain = [new PlainWriter('plain-a', ctx, 0, 3), new PlainWriter('plain-b', ctx, 1, 3)];
    const producers = [new ProducerWriter('producer-1', ctx, 1, 2, 3), new ProducerWriter('producer-4', ctx, 4, 0, 3)];
    const seqs = [new StreamSeqWriter('stream-seq', ctx, 1, 3)];
    // However the test ends, the writers and readers stop.
    onTestFinished(() => {
      stopping = true;
      finalTail ??= 0;
    });
    const readerRuns = readers.map((r) => r.run());
    const writerRuns = [...plain, ...producers, ...seqs].map((w) => w.run());

    // SIGKILL a node four times (nodes 0, 1, 2, 0), each restarted on its port after a pause.
    const kills = [
      { atMs: 2_500, node: 0 },
      { atMs: 7_000, node: 1 },
      { atMs: 11_500, node: 2 },
      { atMs: 16_000, node: 0 },
    ];
    const downMs: number[] = [];
    const downtime = seededRandom(testSeed() + 1);
    for (const kill of kills) {
      await sleep(Math.max(0, started + kill.atMs - Date.now())); // the load runs until the kill's moment: the schedule under test
      const node = nodes[kill.node]!;
      const pid = node.pid;
      const killedAt = Date.now();
      await node.kill();
      await sleep(downtime.int(300, 799)); // the node stays down a while, as a crashed one does
      await node.restart();
      expect(node.pid).not.toBe(pid);
      downMs.push(Date.now() - killedAt);
    }
    await sleep(Math.max(0, started + LOAD_MS - Date.now())); // the load runs its course
    stopping = true;
    await Promise.all(writerRuns);
    const writersDoneAt = Date.now();

    const log = await readLog(nodes[1]!.url + path);
    finalTail = log.tail;
    await Promise.all(readerRuns);
    const readersDoneAt = Date.now();

    // What happened, for the record.
    const plainStats = plain.map((w) => {
      const counts = { acked: 0, unknown: 0, refused: 0 };
      for (const outcome of w.outcomes.values()) counts[outcome] += 1;
      return `${w.id}: ${JSON.stringify(counts)}, failovers ${w.failovers}`;
    });
    const producerStats = producers.map((p) => `${p.id}: ${p.acks.size} acked, ${p.resends} resends, ${p.duplicates} duplicates (204), ${p.gaps} 409 gaps`);
    const seqStats = seqs.map((s) => `${s.id}: ${s.acks.size} acked, ${s.retries} retries, ${s.conflictsOwnSeq} acked by 409 with its own Stream-Last-Seq`);
    const readerStats = readers.map((r) => `${r.id}: ${r.messages.length} messages, ${r.reads} reads, ${r.moves} moves${r instanceof SseReader ? `, ${r.ends} lifetime ends` : ''}`);
    console.log(
      [
        `[multinode] load ${LOAD_MS} ms, ${log.messages.length} messages stored (${log.tail} bytes); nodes down (kill to healthy) ms: ${downMs.join(' ')};`,
        `  restarts took ms: ${nodes.map((n) => `${n.name} [${n.restartMs.join(' ')}]`).join(', ')}`,
        `  writers done ${writersDoneAt - started - LOAD_MS} ms after the stop; readers caught up ${readersDoneAt - writersDoneAt} ms after the writers`,
        `  write answers by status: ${JSON.stringify(Object.fromEntries(statuses))}`,
        ...[...plainStats, ...producerStats, ...seqStats, ...readerStats].map((line) => `  ${line}`),
      ].join('\n'),
    );

    expect(violations).toEqual([]);
    // A node's death costs its own connections only: the others never answer 5xx for it.
    expect(serverErrors).toEqual([]);
    expect(checkLog(log, { plain, producers, seqs })).toEqual([]);
    // Enough load to mean something.
    for (const w of plain) expect(w.acked.length).toBeGreaterThan(50);
    for (const p of producers) expect(p.acks.size).toBeGreaterThan(50);
    for (const s of seqs) expect(s.acks.size).toBeGreaterThan(50);
    expect(nodes.map((n) => n.restarts).reduce((x, y) => x + y, 0)).toBe(kills.length);
    // The uncertain paths were taken: plain writes of unknown outcome, producer resends that had
    // applied (answered 204 by whichever node got them), Stream-Seq retries that had landed.
    expect(plain.flatMap((w) => [...w.outcomes.values()]).filter((o) => o === 'unknown').length).toBeGreaterThan(0);
    expect(producers.reduce((sum, p) => sum + p.duplicates, 0)).toBeGreaterThan(0);
    expect(seqs.reduce((sum, s) => sum + s.conflictsOwnSeq, 0)).toBeGreaterThan(0);
    // Every reader saw the whole stream, once, in order, and lost its node at least once.
    for (const reader of readers) {
      expect([reader.id, reader.offset]).toEqual([reader.id, log.tail]);
      expect([reader.id, reader.messages.length]).toEqual([reader.id, log.messages.length]);
      expect(reader.messages).toEqual(log.messages);
      expect([reader.id, reader.moves > 0]).toEqual([reader.id, true]);
    }
    // Every node serves the final state.
    for (const node of nodes) {
      const head = await send(node.url + path, { method: 'HEAD' });
      expect([node.name, head.status, head.headers.get('stream-next-offset')]).toEqual([node.name, 200, pad20(log.tail)]);
    }
  }, 120_000);
});
