/**
 * The stream handle against a real rill server: create, append, head, delete, reads in
 * the three modes, JSON message offsets, Stream-Incarnation, and typed errors.
 */
import { describe, expect, it } from 'vitest';
import {
  GoneError,
  NotFoundError,
  RillClient,
  RillError,
  StreamClosedError,
  StreamReplacedError,
  StreamSeqConflictError,
  type FetchLike,
  type ReadBatch,
  type StreamHandle,
} from '../../src/client/index.js';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { errorFromResponse } from '../../src/client/errors.js';
import { useClientServer } from '../helpers/client-server.js';
import { removeDir, startServer } from '../helpers/server.js';
import { until, untilLiveReader } from '../helpers/processing.js';

// A short SSE lifetime makes the reader reconnect several times within a test.
const env = useClientServer('client', { args: ['--long-poll-timeout', '2s'], settings: { sseLifetimeMs: 200 } });
let counter = 0;

function fresh(prefix: string): StreamHandle {
  counter += 1;
  return env.client.stream(`client/${prefix}-${counter}`);
}

async function collect(batches: AsyncIterable<ReadBatch>, limit = 1000): Promise<ReadBatch[]> {
  const out: ReadBatch[] = [];
  for await (const batch of batches) {
    out.push(batch);
    if (out.length >= limit) break;
  }
  return out;
}

/** A fetch that counts the SSE connections it opens. */
function countingSse(): { fetch: FetchLike; connections: () => number } {
  let connections = 0;
  const counting: FetchLike = (input, init) => {
    if (String(input).includes('live=sse')) connections++;
    return fetch(input, init);
  };
  return { fetch: counting, connections: () => connections };
}

const values = (batches: ReadBatch[]) => batches.flatMap((b) => b.messages.map((m) => m.value));
const text = (batches: ReadBatch[]) => batches.map((b) => new TextDecoder().decode(b.data)).join('');

describe('stream handle', () => {
  it('creates idempotently and reports metadata with HEAD', async () => {
    const stream = fresh('meta');
    const first = await stream.create({ contentType: 'application/json', ttlSeconds: 3600 });
    expect(first).toMatchObject({ created: true, contentType: 'application/json', nextOffset: '00000000000000000000', closed: false });
    expect(first.incarnation).toMatch(/.+/);
    const again = await stream.create({ contentType: 'application/json', ttlSeconds: 3600 });
    expect(again.created).toBe(false);
    const conflict = await stream.create({ contentType: 'text/plain' }).catch((e: unknown) => e);
    expect(conflict).toBeInstanceOf(RillError);
    expect((conflict as RillError).code).toBe('STREAM_CONFIG_CONFLICT');
    await stream.appendMessages([{ a: 1 }]);
    const info = await stream.head();
    expect(info).toMatchObject({ contentType: 'application/json', nextOffset: '00000000000000000008', closed: false, ttlSeconds: 3600 });
    expect(info.incarnation).toBe(first.incarnation);
  });

  it('gives every JSON message the offset after it, which reads resume from', async () => {
    const stream = fresh('offsets');
    await stream.create({ contentType: 'application/json' });
    await stream.appendMessages([{ text: 'a,b]c' }, [1, [2, 3]], 'x"y', 42, null]);
    await stream.appendJson({ nested: { deep: ['ü', '\\'] } });
    const batches = await collect(stream.read());
    const messages = batches.flatMap((b) => b.messages);
    expect(messages.map((m) => m.value)).toEqual([{ text: 'a,b]c' }, [1, [2, 3]], 'x"y', 42, null, { nested: { deep: ['ü', '\\'] } }]);
    expect(messages.at(-1)!.nextOffset).toBe((await stream.head()).nextOffset);
    for (let i = 0; i < messages.length; i++) {
      // Reading from a message's nextOffset yields exactly the messages after it.
      const rest = values(await collect(stream.read({ offset: messages[i]!.nextOffset! })));
      expect(rest).toEqual(messages.slice(i + 1).map((m) => m.value));
      if (i > 0) expect(messages[i]!.offset).toBe(messages[i - 1]!.nextOffset);
    }
  });

  it('reads byte streams in bounded catch-up pieces', async () => {
    const stream = fresh('bytes');
    await stream.create({ contentType: 'application/octet-stream' });
    const bytes = Uint8Array.from({ length: 3000 }, (_, i) => i % 251);
    await stream.append(bytes);
    const batches = await collect(stream.read({ maxBytes: 1024 }));
    expect(batches.length).toBe(3);
    expect(batches[0]!.nextOffset).toBe('00000000000000001024');
    expect(Buffer.concat(batches.map((b) => b.data))).toEqual(Buffer.from(bytes));
    expect(batches.at(-1)!.upToDate).toBe(true);
  });

  it('follows with long-poll and ends at Stream-Closed', async () => {
    const stream = fresh('longpoll');
    await stream.create({ contentType: 'application/json' });
    await stream.appendJson({ i: 0 });
    const writer = (async () => {
      // Each append lands while the reader's long-poll waits for it.
      for (let i = 1; i <= 3; i++) {
        await untilLiveReader(stream.url);
        await stream.appendJson({ i });
      }
      await untilLiveReader(stream.url);
      await stream.close();
    })();
    const batches = await collect(stream.read({ live: 'long-poll', longPollTimeoutMs: 1000 }));
    await writer;
    expect(values(batches)).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }, { i: 3 }]);
    expect(batches.at(-1)!.closed).toBe(true);
  });

  it('yields heartbeats on empty long-polls when asked', async () => {
    const stream = fresh('heartbeat');
    await stream.create({ contentType: 'application/json' });
    const batches = await collect(stream.read({ live: 'long-poll', longPollTimeoutMs: 100, heartbeats: true }), 3);
    expect(batches.length).toBe(3);
    expect(batches.every((b) => b.messages.length === 0 && b.upToDate)).toBe(true);
  });

  it('tails with SSE across server-side reconnects and ends at Stream-Closed', async () => {
    const stream = fresh('sse');
    await stream.create({ contentType: 'application/json' });
    await stream.appendMessages([{ i: 0 }, { i: 1 }]);
    const sse = countingSse();
    const reader = new RillClient({ url: env.client.baseUrl, fetch: sse.fetch }).stream(stream.url);
    const writer = (async () => {
      // The server ends each SSE connection after 200 ms: two appends on each of three
      // connections, each pair once the reader has reconnected and waits again.
      for (let i = 2; i < 8; i += 2) {
        await until(() => sse.connections() >= i / 2, `SSE connection ${i / 2}`);
        await untilLiveReader(stream.url);
        await stream.appendJson({ i });
        await stream.appendJson({ i: i + 1 });
      }
      await stream.close();
    })();
    const batches = await collect(reader.read({ live: 'sse' }));
    await writer;
    expect(sse.connections()).toBeGreaterThanOrEqual(3);
    expect(values(batches)).toEqual(Array.from({ length: 8 }, (_, i) => ({ i })));
    const offsets = batches.flatMap((b) => b.messages.map((m) => m.nextOffset));
    expect(offsets.every((o) => o !== undefined)).toBe(true);
    expect(batches.at(-1)!.closed).toBe(true);
    expect(batches.at(-1)!.nextOffset).toBe((await stream.head()).nextOffset);
  });

  it('resumes SSE and long-poll reads across a SIGKILLed server', { timeout: 30_000 }, async () => {
    let local = await startServer({ process: true });
    try {
      const localClient = new RillClient({ url: local.url });
      await localClient.bucket('client').create();
      for (const live of ['sse', 'long-poll'] as const) {
        const stream = localClient.stream(`client/restart-${live}`);
        await stream.create({ contentType: 'application/json' });
        await stream.appendJson({ i: 0 });
        const reading = collect(stream.read({ live, retry: { baseDelayMs: 20, maxDelayMs: 200 } }));
        await untilLiveReader(stream.url); // the server dies under a live reader
        await local.kill();
        local = await startServer({ process: true, port: local.port, dataDir: local.dataDir });
        await stream.appendJson({ i: 1 });
        await stream.close();
        expect(values(await reading)).toEqual([{ i: 0 }, { i: 1 }]);
      }
    } finally {
      await local.stop();
      removeDir(local.dataDir);
    }
  });

  it('tails text and binary streams with SSE', async () => {
    const textStream = fresh('sse-text');
    await textStream.create({ contentType: 'text/plain' });
    await textStream.append('line one\nline two\n');
    await textStream.close();
    expect(text(await collect(textStream.read({ live: 'sse' })))).toBe('line one\nline two\n');
    const binary = fresh('sse-bin');
    await binary.create({ contentType: 'application/octet-stream' });
    const bytes = Uint8Array.from({ length: 600 }, (_, i) => (i * 7) % 256);
    await binary.append(bytes);
    await binary.close();
    const batches = await collect(binary.read({ live: 'sse' }));
    expect(Buffer.concat(batches.map((b) => b.data))).toEqual(Buffer.from(bytes));
  });

  it('keeps Stream-Incarnation: a recreated stream is refused with StreamReplacedError', async () => {
    const stream = fresh('incarnation');
    const created = await stream.create({ contentType: 'application/json' });
    await stream.appendJson({ v: 1 });
    // Someone else deletes the stream and creates a new one at the same URL.
    const other = env.client.stream(stream.url);
    await other.delete();
    const recreated = await other.create({ contentType: 'application/json' });
    expect(recreated.incarnation).not.toBe(created.incarnation);
    for (const attempt of [() => stream.appendJson({ v: 2 }), () => stream.head(), () => collect(stream.read()), () => collect(stream.read({ live: 'sse' }))]) {
      const error = await attempt().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StreamReplacedError);
      expect((error as StreamReplacedError).code).toBe('INCARNATION_MISMATCH');
      expect((error as StreamReplacedError).status).toBe(412);
      expect((error as StreamReplacedError).currentIncarnation).toBe(recreated.incarnation);
    }
    // The refused append applied nothing; starting over adopts the new stream.
    expect((await other.head()).nextOffset).toBe('00000000000000000000');
    stream.forgetIncarnation();
    await stream.appendJson({ v: 3 });
    expect(stream.incarnation).toBe(recreated.incarnation);
  });

  it('types refusals with their code and header fields', async () => {
    const stream = fresh('errors');
    await stream.create({ contentType: 'application/json' });
    await stream.appendJson({ a: 1 }, { streamSeq: '00000000000000000005' });
    const seq = await stream.appendJson({ a: 2 }, { streamSeq: '00000000000000000005' }).catch((e: unknown) => e);
    expect(seq).toBeInstanceOf(StreamSeqConflictError);
    expect((seq as StreamSeqConflictError).lastSeq).toBe('00000000000000000005');
    // Offsets in error fields have the form offsets have everywhere else in the API.
    expect((seq as StreamSeqConflictError).fields.nextOffset).toBe('00000000000000000008');
    const mismatch = await stream.append('plain', { contentType: 'text/plain' }).catch((e: unknown) => e);
    expect((mismatch as RillError).code).toBe('CONTENT_TYPE_MISMATCH');
    expect((mismatch as RillError).fields.lastSeq).toBeUndefined();
    const beyond = await collect(stream.read({ offset: '00000000000000099999' })).catch((e: unknown) => e);
    expect((beyond as RillError).code).toBe('OFFSET_BEYOND_TAIL');
    expect((beyond as RillError).status).toBe(416);
    await stream.close();
    const closed = await stream.appendJson({ a: 3 }).catch((e: unknown) => e);
    expect(closed).toBeInstanceOf(StreamClosedError);
    expect((closed as StreamClosedError).fields).toMatchObject({ closed: true, nextOffset: '00000000000000000008' });
    expect((closed as StreamClosedError).message).toBe(`the stream is closed: ${new URL(stream.url).pathname}`);
    // A path without a stream in it is refused before anything is sent: a create would make a bucket.
    expect(() => env.client.stream('run-1')).toThrow(expect.objectContaining({ code: 'INVALID_ID', message: `"run-1" names a bucket, not a stream: a stream path is bucket/stream (client.bucket('run-1').stream(NAME)) or v1/stream/NAME` }));
    expect(() => env.client.stream('v1/stream/')).toThrow(/names the \/v1\/stream family, not a stream/);
    const missing = await env.client.stream('client/never-created').head().catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(NotFoundError);
    expect((missing as NotFoundError).code).toBe('STREAM_NOT_FOUND');
    expect((missing as NotFoundError).message).toContain('/client/never-created');
  });

  it('answers 410 for a deleted stream whose history a fork still reads', async () => {
    const source = fresh('gone');
    await source.create({ contentType: 'application/json' });
    await source.appendJson({ a: 1 });
    const fork = await fetch(`${fresh('fork').url}`, { method: 'PUT', headers: { 'stream-forked-from': new URL(source.url).pathname } });
    expect(fork.status).toBe(201);
    await source.delete();
    const error = await env.client.stream(source.url).head().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GoneError);
    expect((error as GoneError).status).toBe(410);
  });

  it('answers 410 with the earliest offset once retention trimmed the start', async () => {
    const stream = fresh('trimmed');
    await stream.create({ contentType: 'application/json' });
    await stream.appendMessages([{ a: 1 }, { a: 2 }, { a: 3 }]);
    const second = (await collect(stream.read())).flatMap((b) => b.messages)[1]!.nextOffset!;
    const put = (path: string, body?: string) =>
      fetch(`${stream.url}/${path}`, { method: 'PUT', headers: { 'content-type': 'application/json' }, ...(body ? { body } : {}) });
    expect((await put(`snapshot/${second}`, '{"sum":3}')).ok).toBe(true);
    expect((await put(`retention/${second}`)).ok).toBe(true);
    for (const offset of ['-1', '00000000000000000000']) {
      const error = await collect(stream.read({ offset })).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(GoneError);
      expect((error as GoneError).code).toBe('OFFSET_TRIMMED');
      expect((error as GoneError).earliestOffset).toBe(second);
    }
    // Reading on from the earliest offset works.
    expect(values(await collect(stream.read({ offset: second })))).toEqual([{ a: 3 }]);
    expect((await stream.head()).earliestOffset).toBe(second);
  });

  it('parses a 410 answer into GoneError with the earliest offset', async () => {
    const response = new Response(JSON.stringify({ code: 'OFFSET_TRIMMED', message: 'trimmed' }), {
      status: 410,
      headers: { 'content-type': 'application/json', 'stream-next-offset': '00000000000000000512' },
    });
    const error = await errorFromResponse(response);
    expect(error).toBeInstanceOf(GoneError);
    expect(error.code).toBe('OFFSET_TRIMMED');
    expect((error as GoneError).earliestOffset).toBe('00000000000000000512');
  });

  it('reports a refused connection with its URL, as retryable but not of unknown outcome', async () => {
    // A port nobody listens on: taken from the system, then given back.
    const probe = createServer().listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const port = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const offline = new RillClient({ url: `http://127.0.0.1:${port}`, timeoutMs: 2000 });
    const error = await offline.stream('client/x').append('x').catch((e: unknown) => e);
    expect((error as RillError).code).toBe('CONNECTION_FAILED');
    expect((error as RillError).message).toBe(`POST http://127.0.0.1:${port}/client/x: the connection was refused: nothing listens on 127.0.0.1:${port} (ECONNREFUSED)`);
    // Nothing was sent, so nothing can have been applied.
    expect((error as RillError).outcomeUnknown).toBe(false);
    expect((error as RillError).retryable).toBe(true);
  });

  it('reports an answer lost after the request left as NETWORK_ERROR with an unknown outcome', async () => {
    const lost = new RillClient({ url: env.client.baseUrl, fetch: async () => { throw new TypeError('fetch failed', { cause: Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }) }); } });
    const error = await lost.stream('client/x').append('x').catch((e: unknown) => e);
    expect((error as RillError).code).toBe('NETWORK_ERROR');
    expect((error as RillError).outcomeUnknown).toBe(true);
  });

  it('publishes snapshots, trims, bootstraps, labels, forks and appends batches', async () => {
    const stream = fresh('extras');
    await stream.create({ contentType: 'application/json' });
    expect(await stream.snapshot()).toBeUndefined();
    await stream.appendMessages([{ a: 1 }, { a: 2 }, { a: 3 }]);
    const published = await stream.publishSnapshot('00000000000000000008', '{"sum":1}');
    expect(published.digest).toMatch(/^[0-9a-f]{64}$/);
    expect(await stream.snapshot()).toMatchObject({ offset: '00000000000000000008', digest: published.digest, contentType: 'application/json' });
    // A JSON stream's answer says where its records now start, too.
    expect(await stream.retain('00000000000000000008')).toEqual({ earliestOffset: '00000000000000000008', recordFirst: 1, recordNext: 3 });
    const boot = await stream.bootstrap();
    expect(new TextDecoder().decode(boot.snapshot!.body)).toBe('{"sum":1}');
    expect(boot.messages.map((m) => JSON.parse(new TextDecoder().decode(m)))).toEqual([{ a: 2 }, { a: 3 }]);
    expect(boot).toMatchObject({ nextOffset: '00000000000000000024', upToDate: true, closed: false });
    await stream.setAttrs({ title: 'T', metadata: { k: 1 } });
    expect(await stream.attrs()).toEqual({ title: 'T', metadata: { k: 1 } });
    const fork = fresh('extras-fork');
    expect(await fork.create({ forkOf: { source: stream, offset: '00000000000000000016' } })).toMatchObject({ created: true, contentType: 'application/json' });
    const acks = await fork.appendBatch(['{"f":1}', '{"broken"', '{"f":2}']);
    expect(acks.map((a) => a.status)).toEqual([204, 400, 204]);
    expect(acks[0]).toMatchObject({ offset: '00000000000000000016', nextOffset: '00000000000000000024' });
    expect(values(await collect(fork.read({ offset: '00000000000000000008' })))).toEqual([{ a: 2 }, { f: 1 }, { f: 2 }]);
  });

  it('serves the bucket-less /v1/stream family too', async () => {
    const stream = env.client.stream(`v1/stream/client-v1-${Date.now()}`);
    await stream.create({ contentType: 'text/plain' });
    await stream.append('hello');
    expect(text(await collect(stream.read()))).toBe('hello');
    await stream.delete();
    expect(stream.incarnation).toBeUndefined();
  });
});

describe('buckets', () => {
  it('creates, lists page by page, and refuses to delete a non-empty bucket', async () => {
    const bucket = env.client.bucket(`bk-${Date.now()}`);
    expect(await bucket.create()).toEqual({ created: true });
    expect(await bucket.create()).toEqual({ created: false });
    for (const id of ['e', 'a', 'd', 'b', 'c']) await bucket.stream(id).create();
    const page = await bucket.list({ limit: 2 });
    expect(page.streams).toEqual(['a', 'b']);
    const all: string[] = [];
    for await (const id of bucket.streams({ limit: 2 })) all.push(id);
    expect(all).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect((await bucket.info()).streamCount).toBe(5);
    const busy = await bucket.delete().catch((e: unknown) => e);
    expect((busy as RillError).code).toBe('BUCKET_NOT_EMPTY');
    for (const id of all) await bucket.stream(id).delete();
    await bucket.delete();
    expect(((await bucket.info().catch((e: unknown) => e)) as RillError).code).toBe('BUCKET_NOT_FOUND');
  });

  it("configures a bucket's settings, and reads the usage record page by page", async () => {
    const id = `cf-${Date.now()}`;
    const bucket = env.client.bucket(id);
    await bucket.create();
    const info = await bucket.configure({ publicRead: true, limits: { maxBytes: 10 } });
    expect(info).toMatchObject({ id, retainedBytes: 0, publicRead: true, limits: { maxBytes: 10 }, overrides: { maxStreams: null, maxSubscriptions: null, maxBytes: 10 } });
    const stream = bucket.stream('s');
    await stream.create({ contentType: 'text/plain' });
    await stream.append('0123456789');
    const over = await stream.append('!').catch((e: unknown) => e);
    expect((over as RillError).code).toBe('BUCKET_BYTES_LIMIT');
    expect((over as RillError).status).toBe(507);
    expect(await bucket.configure({ limits: { maxBytes: null } })).toMatchObject({ retainedBytes: 10, limits: { maxBytes: null }, overrides: { maxBytes: null } });
    const refused = await bucket.configure({ limits: { maxBytes: -1 } }).catch((e: unknown) => e);
    expect((refused as RillError).code).toBe('INVALID_BUCKET_SETTINGS');
    // Two buckets written: a page of one row, then the next.
    const other = env.client.bucket(`${id}-b`);
    await other.create();
    await other.stream('t').create({ contentType: 'text/plain', body: 'abc' });
    const first = await env.client.usage({ limit: 1, after: id.slice(0, -1) });
    expect(first.rows).toEqual([{ bucket: id, subject: '-', appends: 1, bytesIn: 10, bytesOut: 0, liveReaders: 0 }]);
    const second = await env.client.usage({ limit: 1, after: first.next! });
    expect(second.rows).toEqual([{ bucket: `${id}-b`, subject: '-', appends: 1, bytesIn: 3, bytesOut: 0, liveReaders: 0 }]);
    expect((await env.client.usage({ bucket: id })).rows.map((row) => row.bucket)).toEqual([id]);
    expect((await env.client.usage()).maxKeys).toBeGreaterThan(0);
  });
});
