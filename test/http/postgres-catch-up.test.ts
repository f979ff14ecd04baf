/**
 * Catch-up reads of a plain stream on PostgreSQL, whose large windows go from the
 * database's COPY output to the response as they arrive (storage/postgres/bulk-reads.ts,
 * http/reads.ts streamData): every byte in order, each response as long as it declares,
 * its head out before the window has loaded, and a failure answered with a JSON error
 * before any byte, or by cutting the response after some. Real server over HTTP, real
 * PostgreSQL.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeOffset } from '../../src/protocol/offset.js';
import { errorCode, get, post, put } from '../helpers/http.js';
import { sharedDatabase } from '../helpers/postgres.js';
import { startServer, type RunningServer } from '../helpers/server.js';
import { until } from '../helpers/waits.js';
import { randomBytes, seededRandom } from '../storage/fixtures.js';

const OCTET = { 'content-type': 'application/octet-stream' };
let url: string;
let server: RunningServer;

beforeAll(async () => {
  url = await sharedDatabase();
  server = await startServer({ postgresUrl: url });
});

afterAll(async () => {
  await server?.stop();
});

/** Runs `work` on a connection of its own to the test's database. */
async function withClient<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** A stream holding `sizes` appended in order, of seeded random bytes; its URL and bytes. */
async function streamOf(name: string, seed: number, sizes: number[]): Promise<{ streamUrl: string; bytes: Buffer }> {
  const streamUrl = `${server.url}/v1/stream/${name}`;
  expect((await put(streamUrl, undefined, OCTET)).status).toBe(201);
  const random = seededRandom(seed);
  const parts = sizes.map((n) => randomBytes(random, n));
  for (const part of parts) expect((await post(streamUrl, part, OCTET)).status).toBe(204);
  return { streamUrl, bytes: Buffer.concat(parts) };
}

/** Follows Stream-Next-Offset from byte `from` to the tail, checking each response against the stream's bytes. */
async function catchUp(streamUrl: string, bytes: Buffer, from: number, maxBytes: number): Promise<number> {
  let offset = encodeOffset(from);
  let position = from;
  let responses = 0;
  for (;;) {
    const reply = await get(`${streamUrl}?offset=${offset}&max_bytes=${maxBytes}`);
    expect(reply.status).toBe(200);
    expect(Number(reply.headers.get('content-length'))).toBe(reply.body.length);
    expect(reply.body.equals(bytes.subarray(position, position + maxBytes))).toBe(true);
    position += reply.body.length;
    responses++;
    offset = reply.headers.get('stream-next-offset')!;
    expect(offset).toBe(encodeOffset(position));
    if (reply.headers.get('stream-up-to-date') === 'true') {
      expect(position).toBe(bytes.length);
      return responses;
    }
  }
}

describe('catch-up of a plain stream on PostgreSQL', () => {
  it('returns every byte, each response as long as it says, from any offset and window', async () => {
    const { streamUrl, bytes } = await streamOf('large', 41, [700_000, 3, 1_300_000, 64 * 1024, 900_001]);
    expect(await catchUp(streamUrl, bytes, 0, 4 * 1024 * 1024)).toBe(1);
    expect(await catchUp(streamUrl, bytes, 0, 1_000_000)).toBe(3);
    expect(await catchUp(streamUrl, bytes, 699_999, 300_007)).toBe(8);
    expect(await catchUp(streamUrl, bytes, bytes.length - 9_500, 1_000)).toBe(10);
  });

  it('answers a reader holding the window with 304, and the same window again with its bytes', async () => {
    const { streamUrl, bytes } = await streamOf('cached', 42, [600_000, 600_000]);
    const first = await get(`${streamUrl}?offset=-1&max_bytes=1000000`);
    const etag = first.headers.get('etag')!;
    expect(first.body.equals(bytes.subarray(0, 1_000_000))).toBe(true);
    const again = await get(`${streamUrl}?offset=-1&max_bytes=1000000`, { 'if-none-match': etag });
    expect(again.status).toBe(304);
    expect(again.body.length).toBe(0);
    const other = await get(`${streamUrl}?offset=-1&max_bytes=1000000`, { 'if-none-match': '"another"' });
    expect(other.status).toBe(200);
    expect(other.headers.get('etag')).toBe(etag);
    expect(other.body.equals(first.body)).toBe(true);
  });

  it('answers 503 with the JSON error body when the read fails before any byte, and the next read gets every byte', async () => {
    const { streamUrl, bytes } = await streamOf('refused', 43, [600_000]);
    const waiting = "FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'COPY%' AND wait_event_type = 'Lock'";
    await withClient(async (locker) => {
      // The COPY waits for the lock, so its connection is cut before any of its output.
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE chunks IN ACCESS EXCLUSIVE MODE');
      try {
        const refused = get(`${streamUrl}?offset=-1`);
        await until(async () => (await withClient((c) => c.query(`SELECT pid ${waiting}`))).rowCount === 1, 'a COPY waiting for the lock');
        await withClient((c) => c.query(`SELECT pg_terminate_backend(pid) ${waiting}`));
        const reply = await refused;
        expect(reply.status).toBe(503);
        expect(errorCode(reply)).toBe('STORAGE_UNAVAILABLE');
      } finally {
        await locker.query('ROLLBACK');
      }
    });
    await catchUp(streamUrl, bytes, 0, 4 * 1024 * 1024);
  });

  it('sends the first bytes before the window has loaded, and cuts the response when the read fails after them', async () => {
    const { streamUrl, bytes } = await streamOf('cut', 44, [600_000, 600_000]);
    const GATE = 4141;
    // A node whose queries read chunks in index order, row by row, with no sort that would
    // read every row before the first goes out (the gate below would stop it there).
    const ordered = new URL(url);
    ordered.searchParams.set('options', '-c enable_sort=off -c enable_seqscan=off');
    const node = await startServer({ postgresUrl: ordered.toString() });
    await withClient(async (holder) => {
      // Rows past the first wait on a lock the test holds, then fail: the database stops
      // in the middle of the window's output, as a read error would stop it.
      await holder.query(`CREATE FUNCTION gate(data bytea) RETURNS bytea STABLE LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_advisory_lock(${GATE}); RAISE EXCEPTION 'cut in the middle of a read'; END $$`);
      await holder.query('ALTER TABLE chunks RENAME TO chunks_stored');
      await holder.query('CREATE VIEW chunks AS SELECT stream_id, start, CASE WHEN start > 0 THEN gate(data) ELSE data END AS data FROM chunks_stored');
      await holder.query('SELECT pg_advisory_lock($1)', [GATE]);
      try {
        const res = await fetch(`${node.url}${new URL(streamUrl).pathname}?offset=-1`);
        // The head came with the first append's bytes while the second waits on the lock.
        expect(res.status).toBe(200);
        expect(Number(res.headers.get('content-length'))).toBe(bytes.length);
        await holder.query('SELECT pg_advisory_unlock($1)', [GATE]);
        await expect(res.arrayBuffer()).rejects.toThrow();
      } finally {
        await holder.query('SELECT pg_advisory_unlock_all()');
        await holder.query('DROP VIEW chunks');
        await holder.query('ALTER TABLE chunks_stored RENAME TO chunks');
        await node.stop();
      }
    });
    await catchUp(streamUrl, bytes, 0, 4 * 1024 * 1024);
  });
});
