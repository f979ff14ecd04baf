/**
 * Snapshots and retention over real HTTP, on both URL families: publishing at message
 * boundaries, idempotent repeats, conditional publish, reading, HEAD metadata, the size
 * limit, retention rules, 410s after trimming, and bytes really removed from SQLite.
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { call, errorCode, get, head, offset, post, put } from '../helpers/http.js';
import { extensionUrl } from '../../src/protocol/extensions.js';

let server: RunningServer;
let bucketBase: string;
const MAX_SNAPSHOT_BYTES = 4096;

beforeAll(async () => {
  server = await startServer({ args: ['--max-snapshot-bytes', String(MAX_SNAPSHOT_BYTES)] });
  bucketBase = `${server.url}/snapdocs`;
  expect((await put(bucketBase)).status).toBe(201);
});

afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

let counter = 0;
const families = () => [
  { family: 'v1', url: `${server.url}/v1/stream/snap-${Date.now()}-${counter++}` },
  { family: 'bucket', url: `${bucketBase}/snap-${Date.now()}-${counter++}` },
];

/** A text stream with appends "aaaa", "bb", "cccccc": boundaries at 0, 4, 6, 12. */
async function textStream(url: string): Promise<void> {
  expect((await put(url, 'aaaa', { 'content-type': 'text/plain' })).status).toBe(201);
  expect((await post(url, 'bb', { 'content-type': 'text/plain' })).status).toBe(204);
  expect((await post(url, 'cccccc', { 'content-type': 'text/plain' })).status).toBe(204);
}

describe.each(['v1', 'bucket'])('snapshots (%s family)', (family) => {
  const streamUrl = () => families().find((f) => f.family === family)!.url;

  test('publish at an append boundary answers its digest; the same body again answers the same digest', async () => {
    const url = streamUrl();
    await textStream(url);
    const first = await put(extensionUrl(url, `snapshot/${offset(6)}`), 'STATE@6', { 'content-type': 'application/x-state' });
    expect(first.status).toBe(204);
    const digest = first.headers.get('stream-snapshot-digest');
    expect(digest).toMatch(/^[0-9a-f]{64}$/);
    expect(first.headers.get('stream-snapshot-offset')).toBe(offset(6));
    expect(first.headers.get('stream-incarnation')).toBeTruthy();
    const again = await put(extensionUrl(url, `snapshot/${offset(6)}`), 'STATE@6', { 'content-type': 'application/x-state' });
    expect(again.status).toBe(204);
    expect(again.headers.get('stream-snapshot-digest')).toBe(digest);
  });

  test('a different body, or the same body under another type, at a published offset is refused with 409', async () => {
    const url = streamUrl();
    await textStream(url);
    expect((await put(extensionUrl(url, `snapshot/${offset(4)}`), 'one', { 'content-type': 'text/plain' })).status).toBe(204);
    const otherBody = await put(extensionUrl(url, `snapshot/${offset(4)}`), 'two', { 'content-type': 'text/plain' });
    expect(otherBody.status).toBe(409);
    expect(errorCode(otherBody)).toBe('SNAPSHOT_CONFLICT');
    const otherType = await put(extensionUrl(url, `snapshot/${offset(4)}`), 'one', { 'content-type': 'application/octet-stream' });
    expect(otherType.status).toBe(409);
    const read = await get(extensionUrl(url, `snapshot/${offset(4)}`));
    expect(read.text).toBe('one');
  });

  test('offsets must be committed message boundaries, not beyond the tail', async () => {
    const url = streamUrl();
    await textStream(url);
    const inside = await put(extensionUrl(url, `snapshot/${offset(5)}`), 'x');
    expect(inside.status).toBe(400);
    expect(errorCode(inside)).toBe('MISALIGNED_OFFSET');
    const beyond = await put(extensionUrl(url, `snapshot/${offset(13)}`), 'x');
    expect(beyond.status).toBe(409);
    expect(beyond.headers.get('stream-next-offset')).toBe(offset(12));
    const malformed = await put(extensionUrl(url, 'snapshot/abc'), 'x');
    expect(malformed.status).toBe(400);
    expect(errorCode(malformed)).toBe('INVALID_OFFSET');
    expect((await put(extensionUrl(url, `snapshot/${offset(0)}`), 'empty-prefix')).status).toBe(204);
    expect((await put(extensionUrl(url, `snapshot/${offset(12)}`), 'everything')).status).toBe(204);
  });

  test('JSON streams accept any message boundary, including inside one batch append', async () => {
    const url = streamUrl();
    expect((await put(url, '[{"n":1},{"n":2},{"n":3}]', { 'content-type': 'application/json' })).status).toBe(201);
    const boundaries = [0, 8, 16, 24];
    for (const position of boundaries) {
      expect((await put(extensionUrl(url, `snapshot/${offset(position)}`), `s${position}`)).status).toBe(204);
    }
    const insideMessage = await put(extensionUrl(url, `snapshot/${offset(3)}`), 'x');
    expect(insideMessage.status).toBe(400);
  });

  test('Stream-Snapshot-Match makes the publish conditional on the visible snapshot', async () => {
    const url = streamUrl();
    await textStream(url);
    const noneVisible = await put(extensionUrl(url, `snapshot/${offset(4)}`), 'a', { 'stream-snapshot-match': 'f'.repeat(64) });
    expect(noneVisible.status).toBe(409);
    const first = await put(extensionUrl(url, `snapshot/${offset(4)}`), 'a');
    const digest = first.headers.get('stream-snapshot-digest')!;
    const stale = await put(extensionUrl(url, `snapshot/${offset(6)}`), 'b', { 'stream-snapshot-match': '0'.repeat(64) });
    expect(stale.status).toBe(409);
    expect(errorCode(stale)).toBe('SNAPSHOT_CONFLICT');
    const fresh = await put(extensionUrl(url, `snapshot/${offset(6)}`), 'b', { 'stream-snapshot-match': digest });
    expect(fresh.status).toBe(204);
    const repeat = await put(extensionUrl(url, `snapshot/${offset(6)}`), 'b', { 'stream-snapshot-match': digest });
    expect(repeat.status).toBe(204);
  });

  test('the latest snapshot is read by redirect, by offset, and announced on HEAD', async () => {
    const url = streamUrl();
    await textStream(url);
    expect((await get(extensionUrl(url, 'snapshot'))).status).toBe(404);
    expect((await head(url)).headers.get('stream-snapshot-offset')).toBeNull();
    await put(extensionUrl(url, `snapshot/${offset(4)}`), 'first', { 'content-type': 'text/x-a' });
    const second = await put(extensionUrl(url, `snapshot/${offset(6)}`), 'second', { 'content-type': 'text/x-b' });
    const digest = second.headers.get('stream-snapshot-digest');
    const latest = await get(extensionUrl(url, 'snapshot'));
    expect(latest.status).toBe(307);
    const [location, expected] = [new URL(latest.headers.get('location')!, url), new URL(extensionUrl(url, `snapshot/${offset(6)}`))];
    expect(location.pathname + location.search).toBe(expected.pathname + expected.search);
    const followed = await call(extensionUrl(url, 'snapshot'), { redirect: 'follow' });
    expect(followed.status).toBe(200);
    expect(followed.text).toBe('second');
    expect(followed.headers.get('content-type')).toBe('text/x-b');
    expect(followed.headers.get('stream-snapshot-offset')).toBe(offset(6));
    expect(followed.headers.get('stream-snapshot-digest')).toBe(digest);
    expect(followed.headers.get('stream-next-offset')).toBe(offset(6));
    expect(followed.headers.get('stream-up-to-date')).toBeNull();
    const meta = await head(url);
    expect(meta.headers.get('stream-snapshot-offset')).toBe(offset(6));
    expect(meta.headers.get('stream-snapshot-digest')).toBe(digest);
    expect((await get(extensionUrl(url, `snapshot/${offset(4)}`))).status).toBe(404);
    const older = await put(extensionUrl(url, `snapshot/${offset(4)}`), 'older');
    expect(older.status).toBe(409);
  });

  test('a snapshot at the tail says the reader is up to date; ordinary reads never return snapshot bytes', async () => {
    const url = streamUrl();
    await textStream(url);
    await put(extensionUrl(url, `snapshot/${offset(12)}`), 'SNAP');
    const read = await get(extensionUrl(url, `snapshot/${offset(12)}`));
    expect(read.headers.get('stream-up-to-date')).toBe('true');
    expect((await get(`${url}?offset=-1`)).text).toBe('aaaabbcccccc');
  });

  test('snapshots larger than the limit are refused with 413; missing streams with 404', async () => {
    const url = streamUrl();
    await textStream(url);
    const big = await put(extensionUrl(url, `snapshot/${offset(4)}`), Buffer.alloc(MAX_SNAPSHOT_BYTES + 1, 1));
    expect(big.status).toBe(413);
    expect(errorCode(big)).toBe('PAYLOAD_TOO_LARGE');
    const missing = await put(extensionUrl(`${url}-missing`, `snapshot/${offset(0)}`), 'x');
    expect(missing.status).toBe(404);
    expect((await get(extensionUrl(`${url}-missing`, 'snapshot'))).status).toBe(404);
  });

  test('a closed stream still takes snapshots', async () => {
    const url = streamUrl();
    await textStream(url);
    expect((await post(url, undefined, { 'stream-closed': 'true' })).status).toBe(204);
    expect((await put(extensionUrl(url, `snapshot/${offset(12)}`), 'final')).status).toBe(204);
  });
});

describe.each(['v1', 'bucket'])('retention (%s family)', (family) => {
  const streamUrl = () => families().find((f) => f.family === family)!.url;

  test('retention needs a published snapshot at or after it, aligned, never moving backward', async () => {
    const url = streamUrl();
    await textStream(url);
    const noSnapshot = await put(extensionUrl(url, `retention/${offset(4)}`));
    expect(noSnapshot.status).toBe(409);
    expect(errorCode(noSnapshot)).toBe('RETENTION_CONFLICT');
    expect((noSnapshot.json as { message: string }).message).toMatch(/^the stream has no snapshot: publish one/);
    await put(extensionUrl(url, `snapshot/${offset(6)}`), 'S6');
    const past = await put(extensionUrl(url, `retention/${offset(12)}`));
    expect(past.status).toBe(409);
    expect((past.json as { message: string }).message).toBe(`retention may not pass the latest published snapshot, at ${offset(6)}`);
    expect((await put(extensionUrl(url, `retention/${offset(5)}`))).status).toBe(400);
    const trimmed = await put(extensionUrl(url, `retention/${offset(4)}`));
    expect(trimmed.status).toBe(204);
    expect(trimmed.headers.get('stream-earliest-offset')).toBe(offset(4));
    expect((await put(extensionUrl(url, `retention/${offset(4)}`))).status).toBe(204);
    const backward = await put(extensionUrl(url, `retention/${offset(0)}`));
    expect(backward.status).toBe(409);
    expect((await put(extensionUrl(url, `retention/${offset(6)}`))).status).toBe(204);
  });

  test('reads before the retained start answer 410 with the earliest offset; later reads are whole', async () => {
    const url = streamUrl();
    await textStream(url);
    await put(extensionUrl(url, `snapshot/${offset(6)}`), 'S6');
    await put(extensionUrl(url, `retention/${offset(6)}`));
    for (const from of ['-1', offset(0), offset(4)]) {
      const gone = await get(`${url}?offset=${from}`);
      expect(gone.status).toBe(410);
      expect(errorCode(gone)).toBe('OFFSET_TRIMMED');
      expect(gone.headers.get('stream-next-offset')).toBe(offset(6));
    }
    const longPoll = await get(`${url}?offset=${offset(0)}&live=long-poll`);
    expect(longPoll.status).toBe(410);
    const sse = await get(`${url}?offset=-1&live=sse`);
    expect(sse.status).toBe(410);
    const rest = await get(`${url}?offset=${offset(6)}`);
    expect(rest.status).toBe(200);
    expect(rest.text).toBe('cccccc');
    expect((await head(url)).headers.get('stream-earliest-offset')).toBe(offset(6));
    const snapshotBefore = await put(extensionUrl(url, `snapshot/${offset(4)}`), 'x');
    expect(snapshotBefore.status).toBe(410);
  });
});

describe('retention deletes bytes from storage', () => {
  test('after retention the trimmed appends are gone from the SQLite file; bytes a fork reads stay', async () => {
    const dataServer = await startServer({ store: 'sqlite' });
    const url = `${dataServer.url}/v1/stream/trim-${Date.now()}`;
    const kept = `${dataServer.url}/v1/stream/trim-fork-${Date.now()}`;
    const other = `${dataServer.url}/v1/stream/trim-other-${Date.now()}`;
    try {
      await textStream(url);
      await textStream(other);
      expect((await put(kept, undefined, { 'stream-forked-from': new URL(other).pathname, 'stream-fork-offset': offset(6) })).status).toBe(201);
      for (const target of [url, other]) {
        await put(extensionUrl(target, `snapshot/${offset(6)}`), 'S6');
        expect((await put(extensionUrl(target, `retention/${offset(6)}`))).status).toBe(204);
      }
      expect((await get(`${kept}?offset=-1`)).text).toBe('aaaabb');
    } finally {
      await dataServer.stop();
    }
    const db = new Database(join(dataServer.dataDir, 'rill.db'), { readonly: true });
    try {
      // The appends stored for a stream, as `start:bytes`. A row may hold several appends,
      // its `bounds` column listing their lengths (uint32 LE each); NULL is one append.
      const rows = (name: string) =>
        db
          .prepare<[string], { start: number; data: Buffer; bounds: Buffer | null }>(
            'SELECT c.start, c.data, c.bounds FROM chunks c JOIN streams s ON s.id = c.stream_id WHERE s.name = ? ORDER BY c.start',
          )
          .all(`v1/${new URL(name).pathname.split('/').pop()}`)
          .flatMap((r) => {
            const lengths = r.bounds === null ? [r.data.length] : Array.from({ length: r.bounds.length / 4 }, (_, i) => r.bounds!.readUInt32LE(i * 4));
            let at = 0;
            return lengths.map((length) => `${r.start + at}:${r.data.subarray(at, (at += length)).toString()}`);
          });
      expect(rows(url)).toEqual(['6:cccccc']);
      expect(rows(other)).toEqual(['0:aaaa', '4:bb', '6:cccccc']);
    } finally {
      db.close();
      removeDir(dataServer.dataDir);
    }
  });
});
