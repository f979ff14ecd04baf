/**
 * The cold tier under SIGKILL (issue 38): clients append to two streams of a server with
 * `--cold-store` on a real S3-compatible server (s3rver, test/helpers/s3.ts), whose
 * uploader moves history while they write; the server is killed at a moment chosen from
 * the file's seed once uploads are under way, and restarted on the same data directory (or
 * PostgreSQL database) and bucket, several times. After each restart, every acknowledged
 * append is read back once, in order, at the range its answer named, from whichever tier
 * holds it; an append never acknowledged is there whole or not at all, and nothing is
 * there twice. On PostgreSQL the killed node's upload lock goes with its connection, and the
 * restarted node takes it again.
 */
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { sharedDatabase } from '../helpers/postgres.js';
import { seededRandom } from '../helpers/seed.js';
import { startTestS3, TEST_BUCKET, type TestS3 } from '../helpers/s3.js';
import { removeDir, startServer, tempDataDir, type ServerProcess } from '../helpers/server.js';
import { until } from '../helpers/waits.js';
import { call } from '../http/client.js';
import { runCli } from '../helpers/cli.js';

const CLIENTS = 4;
const ROUNDS = 3;
const STREAMS = ['/v1/stream/cold-crash-a', '/v1/stream/cold-crash-b'];
const OCTETS = { 'content-type': 'application/octet-stream' };
const COLD_ARGS = ['--cold-hot-bytes', '16KiB', '--cold-hot-age', '0ms', '--cold-segment-bytes', '8KiB', '--cold-upload-interval', '10ms'];
/** Kill moments and append sizes come from the file's seed: RILL_TEST_SEED replays them. */
const rng = seededRandom();

interface Attempt {
  stream: string;
  body: string;
  outcome: 'pending' | 'acked';
  /** Where the acknowledged append ends (its answer's Stream-Next-Offset). */
  end?: number;
}

/** Three rounds of a server process under load, killed and restarted: generous, so that only a bug reaches it on a loaded machine. */
const CRASH_TEST_TIMEOUT_MS = 180_000;

let s3: TestS3 | undefined;
let server: ServerProcess | undefined;
const dataDirs: string[] = [];

afterAll(async () => {
  await server?.kill();
  await s3?.close();
  dataDirs.forEach(removeDir);
});

/** One client: lines `client:seq:padding` of 100 to 1,000 bytes, to the streams in turn, until the server is gone. */
async function runClient(url: string, client: number, nextSeq: number[], attempts: Attempt[]): Promise<void> {
  for (let guard = 0; guard < 100_000; guard++) {
    const seq = nextSeq[client]!++;
    const stream = STREAMS[seq % STREAMS.length]!;
    const body = `${client}:${seq}:${'x'.repeat(rng.int(100, 1000))}\n`;
    const attempt: Attempt = { stream, body, outcome: 'pending' };
    attempts.push(attempt);
    let reply;
    try {
      reply = await call(url, 'POST', stream, { headers: OCTETS, body, timeoutMs: 10_000 });
    } catch {
      return; // the server is gone: this attempt stays unacknowledged
    }
    expect(reply.status, reply.text()).toBe(204);
    attempt.outcome = 'acked';
    attempt.end = Number(reply.headers['stream-next-offset']);
  }
}

async function coldUploads(url: string): Promise<number> {
  const stats = (await call(url, 'GET', '/stats')).json() as { cold: { uploads: number } };
  return stats.cold.uploads;
}

async function loadAndKill(srv: ServerProcess, nextSeq: number[], attempts: Attempt[]): Promise<number> {
  const clients = Array.from({ length: CLIENTS }, (_, c) => runClient(srv.url, c, nextSeq, attempts));
  const before = await coldUploads(srv.url);
  await until(async () => (await coldUploads(srv.url)) >= before + 3, 'uploads under way');
  const killAfterMs = rng.int(0, 199);
  // The crash moment under load: the pause is the behaviour under test, not a wait for an outcome.
  await new Promise((r) => setTimeout(r, killAfterMs));
  await srv.kill();
  await Promise.all(clients);
  return killAfterMs;
}

async function readAll(url: string, stream: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  for (let offset = '-1'; ; ) {
    const page = await call(url, 'GET', `${stream}?offset=${offset}`);
    expect(page.status, page.text()).toBe(200);
    parts.push(page.body);
    offset = page.headers['stream-next-offset']!;
    if (page.headers['stream-up-to-date'] === 'true') return Buffer.concat(parts);
  }
}

function check(stream: string, stored: Buffer, attempts: Attempt[], context: string): void {
  const lines = stored.toString('latin1').split('\n').slice(0, -1);
  expect(lines.length + 1, `${context}: ${stream} does not end with a whole line`).toBe(stored.toString('latin1').split('\n').length);
  const seen = new Set<string>();
  const lastSeq = new Map<string, number>();
  for (const line of lines) {
    expect(seen.has(line), `${context}: ${line.slice(0, 20)} stored twice`).toBe(false);
    seen.add(line);
    // One client's appends are sequential: its lines come in its order.
    const [client, seq] = line.split(':').map(Number) as [number, number];
    expect(seq, `${context}: client ${client}'s appends out of order`).toBeGreaterThan(lastSeq.get(String(client)) ?? -1);
    lastSeq.set(String(client), seq);
  }
  for (const attempt of attempts.filter((a) => a.stream === stream)) {
    if (attempt.outcome === 'acked') {
      const at = stored.subarray(attempt.end! - attempt.body.length, attempt.end!).toString('latin1');
      expect(at === attempt.body, `${context}: an acknowledged append is not at its range ${attempt.end! - attempt.body.length}-${attempt.end}`).toBe(true);
    }
  }
}

/**
 * PostgreSQL's part of what `rill check --cold-store` checks on SQLite (it reads SQLite data
 * files only): each stream's segments follow one another from its start, and its hot rows
 * begin where they end; none held twice, none missing.
 */
async function expectTiersMeet(postgresUrl: string): Promise<void> {
  const client = new pg.Client(postgresUrl);
  await client.connect();
  try {
    const { rows } = await client.query<{ id: string; segments: string[] | null; hot_start: string | null }>(
      `SELECT s.id, (SELECT array_agg(c.start || '-' || c.end_offset ORDER BY c.start) FROM cold_segments c WHERE c.stream_id = s.id) AS segments,
              (SELECT min(start) FROM chunks WHERE stream_id = s.id) AS hot_start FROM streams s`,
    );
    for (const row of rows) {
      let at = 0;
      for (const range of row.segments ?? []) {
        const [start, end] = range.split('-').map(Number) as [number, number];
        expect(start, `stream id ${row.id}: segment ${range} after ${at}`).toBe(at);
        at = end;
      }
      if (row.hot_start !== null) expect(Number(row.hot_start), `stream id ${row.id}: hot rows begin inside or after the cold tier's end ${at}`).toBe(at);
    }
  } finally {
    await client.end();
  }
}

describe('cold tier under SIGKILL', () => {
  it.each([
    { engine: 'sqlite' as const, rounds: ROUNDS },
    // Two rounds: the kill, restart and lock handover are what PostgreSQL adds, and two show them.
    { engine: 'postgres' as const, rounds: 2 },
  ])('every acknowledged append reads back once, in order, at its range, from whichever tier holds it ($engine)', async ({ engine, rounds }) => {
    s3 ??= await startTestS3();
    const dataDir = tempDataDir('rill-crash-cold-');
    dataDirs.push(dataDir);
    const prefix = `crash-${engine}`;
    const postgresUrl = engine === 'postgres' ? await sharedDatabase() : undefined;
    const args = ['--cold-store', `s3://${TEST_BUCKET}/${prefix}`, ...COLD_ARGS];
    const start = () => startServer({ process: true, store: engine, dataDir, ...(postgresUrl === undefined ? {} : { postgresUrl }), args, env: s3!.env });
    server = await start();
    for (const stream of STREAMS) expect((await call(server.url, 'PUT', stream, { headers: OCTETS })).status).toBe(201);
    const attempts: Attempt[] = [];
    const nextSeq = Array.from({ length: CLIENTS }, () => 0);
    for (let round = 1; round <= rounds; round++) {
      const killAfterMs = await loadAndKill(server, nextSeq, attempts);
      server = await start();
      const context = `${engine} round ${round} (killed ${killAfterMs} ms after 3 uploads)`;
      for (const stream of STREAMS) check(stream, await readAll(server.url, stream), attempts, context);
    }
    expect(attempts.filter((a) => a.outcome === 'acked').length).toBeGreaterThan(0);
    // The reads above crossed the boundary: part of each stream was in objects.
    await until(async () => ((await call(server!.url, 'GET', '/stats')).json() as { cold: { coldBytes: number } }).cold.coldBytes > 0, 'cold bytes counted by a pass');
    expect([...s3.objectFiles().keys()].some((k) => k.startsWith(`${prefix}/`))).toBe(true);
    // No range is held by both tiers, and every object is there, whole and the range its row names.
    if (engine === 'sqlite') {
      const checked = await runCli(server.url, ['check', '--data', dataDir, '--cold-store', `s3://${TEST_BUCKET}/${prefix}`], { env: s3.env });
      expect(checked.code, checked.stderr).toBe(0);
    }
    await server.kill();
    server = undefined;
    if (engine === 'postgres') await expectTiersMeet(postgresUrl!);
  }, CRASH_TEST_TIMEOUT_MS);
});
