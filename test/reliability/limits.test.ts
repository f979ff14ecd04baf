/**
 * Every limit of DESIGN.md, against the real server process with its limits shortened
 * by flags: body 413, headers 431, URL 414, live connections 503 + Retry-After,
 * long-poll and SSE lifetimes, slow headers and bodies, and a slow SSE reader that
 * must be dropped rather than buffered for.
 *
 * No assertion here is on time or memory: timers are judged by the order of what they
 * end, and waits are for the event itself, with a timeout only a bug reaches. How long
 * the server leaves other requests waiting while it frames a JSON flood, and the memory
 * a flood or a stalled reader costs, are `npm run bench` figures (the `limits` workload,
 * docs/performance.md).
 */
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeDir, startServer, type ServerProcess } from '../helpers/server.js';
import { until, untilLiveReaders } from '../helpers/waits.js';
import { expectJsonRefusal, refusalOf, sleep } from './checks.js';
import { collect, openSocket, parseHead, type Collected } from './net.js';

const servers: ServerProcess[] = [];

async function serve(args: string[]): Promise<ServerProcess> {
  const s = await startServer({ process: true, args });
  servers.push(s);
  return s;
}

afterAll(async () => {
  for (const s of servers.splice(0)) {
    if (s.child.exitCode === null && s.child.signalCode === null) await s.kill();
    removeDir(s.dataDir);
  }
});

const text = { 'content-type': 'text/plain' };

async function create(url: string, contentType = 'text/plain'): Promise<void> {
  const res = await fetch(url, { method: 'PUT', headers: { 'content-type': contentType } });
  expect(res.status).toBe(201);
}

async function tailOf(url: string): Promise<number> {
  const res = await fetch(url, { method: 'HEAD' });
  return Number(res.headers.get('stream-next-offset'));
}

/** Sends raw bytes on a fresh connection and returns everything the server answers. */
async function raw(port: number, bytes: string | Buffer, timeoutMs = 5_000): Promise<Collected> {
  const socket = await openSocket(port);
  socket.write(bytes);
  return collect(socket, timeoutMs);
}


/** Runs the tasks at once and answers their labels in the order they finished. */
async function finishOrder(tasks: Record<string, () => Promise<void>>): Promise<string[]> {
  const order: string[] = [];
  await Promise.all(
    Object.entries(tasks).map(async ([label, task]) => {
      await task();
      order.push(label);
    }),
  );
  return order;
}

function refusalFrom(reply: Collected) {
  const head = parseHead(reply.data);
  expect(head).not.toBeNull();
  const length = Number(head!.headers['content-length']);
  return { status: head!.status, contentType: head!.headers['content-type'] ?? null, body: head!.rest.subarray(0, length).toString() };
}

describe('request size limits', () => {
  let s: ServerProcess;
  const stream = () => `${s.url}/v1/stream/sizes`;
  beforeAll(async () => {
    s = await serve(['--max-body', '1024', '--max-header-bytes', '4096', '--max-url-bytes', '1024']);
    await create(stream());
  });

  it('answers 413 to a body over --max-body, declared or streamed, and applies nothing', async () => {
    expect((await fetch(stream(), { method: 'POST', headers: text, body: 'x'.repeat(1024) })).status).toBe(204);
    const declared = await fetch(stream(), { method: 'POST', headers: text, body: 'x'.repeat(1025) });
    expectJsonRefusal(await refusalOf(declared), 413, 'PAYLOAD_TOO_LARGE');
    // Chunked, without a Content-Length: refused once the bytes pass the limit.
    const chunked = await raw(
      s.port,
      `POST /v1/stream/sizes HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n${'y'.repeat(1024)}\r\n400\r\n${'y'.repeat(1024)}\r\n0\r\n\r\n`,
    );
    expectJsonRefusal(refusalFrom(chunked), 413, 'PAYLOAD_TOO_LARGE');
    const put = await fetch(`${s.url}/v1/stream/sizes-2`, { method: 'PUT', headers: text, body: 'z'.repeat(2048) });
    expectJsonRefusal(await refusalOf(put), 413, 'PAYLOAD_TOO_LARGE');
    expect((await fetch(`${s.url}/v1/stream/sizes-2`, { method: 'HEAD' })).status).toBe(404);
    expect(await tailOf(stream())).toBe(1024);
  });

  it('answers 431 to request headers over --max-header-bytes', async () => {
    const big = await raw(s.port, `GET /v1/stream/sizes HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'a'.repeat(5000)}\r\n\r\n`);
    expectJsonRefusal(refusalFrom(big), 431, 'HEADERS_TOO_LARGE');
    const many = Array.from({ length: 300 }, (_, i) => `X-H${i}: ${'b'.repeat(10)}\r\n`).join('');
    const manyReply = await raw(s.port, `GET /v1/stream/sizes HTTP/1.1\r\nHost: localhost\r\n${many}\r\n`);
    expectJsonRefusal(refusalFrom(manyReply), 431, 'HEADERS_TOO_LARGE');
    expect((await fetch(stream(), { method: 'HEAD' })).status).toBe(200);
  });

  it('answers 414 to a URL over --max-url-bytes', async () => {
    const res = await fetch(`${stream()}?offset=-1&pad=${'p'.repeat(1100)}`);
    expectJsonRefusal(await refusalOf(res), 414, 'URI_TOO_LONG');
    const longId = await fetch(`${s.url}/v1/stream/${'n'.repeat(1100)}`, { method: 'PUT', headers: text });
    expectJsonRefusal(await refusalOf(longId), 414, 'URI_TOO_LONG');
  });
});

describe('protocol limits', () => {
  let s: ServerProcess;
  beforeAll(async () => {
    s = await serve(['--max-producers', '2', '--producer-idle-evict', '1h']);
  });

  it('answers 400 to a Stream-Seq over 256 bytes and stores nothing', async () => {
    const stream = `${s.url}/v1/stream/seq-limit`;
    await create(stream);
    const refused = await fetch(stream, { method: 'POST', headers: { ...text, 'stream-seq': 'a'.repeat(257) }, body: 'x' });
    expectJsonRefusal(await refusalOf(refused), 400, 'STREAM_SEQ_TOO_LONG');
    expect((await fetch(stream, { method: 'POST', headers: { ...text, 'stream-seq': 'a'.repeat(256) }, body: 'y' })).status).toBe(204);
    const head = await fetch(stream, { method: 'HEAD' });
    expect(head.headers.get('stream-last-seq')).toBe('a'.repeat(256));
    expect(head.headers.get('stream-next-offset')).toBe('00000000000000000001');
  });

  it('answers 429 PRODUCER_LIMIT to a producer beyond --max-producers when none is idle', async () => {
    const stream = `${s.url}/v1/stream/producer-limit`;
    await create(stream);
    const write = (pid: string) =>
      fetch(stream, { method: 'POST', headers: { ...text, 'producer-id': pid, 'producer-epoch': '0', 'producer-seq': '0' }, body: `${pid};` });
    expect((await write('p1')).status).toBe(200);
    expect((await write('p2')).status).toBe(200);
    expectJsonRefusal(await refusalOf(await write('p3')), 429, 'PRODUCER_LIMIT');
    expect(await (await fetch(`${stream}?offset=-1`)).text()).toBe('p1;p2;');
  });

  it('bounds one read response to 8 MiB whatever max_bytes asks', async () => {
    const stream = `${s.url}/v1/stream/read-limit`;
    await create(stream, 'application/octet-stream');
    const body = Buffer.alloc(9 * 1024 * 1024, 0x7a);
    expect((await fetch(stream, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body })).status).toBe(204);
    const res = await fetch(`${stream}?offset=-1&max_bytes=1000000000`);
    expect(res.status).toBe(200);
    expect((await res.arrayBuffer()).byteLength).toBe(8 * 1024 * 1024);
    expect(res.headers.get('stream-next-offset')).toBe(String(8 * 1024 * 1024).padStart(20, '0'));
    expect(res.headers.get('stream-up-to-date')).toBeNull();
  });
});

describe('JSON floods: an array of tiny elements', () => {
  /** `[0,0,...,0]` of `elements` elements: two bytes each, so 32 MiB (the default --max-body) holds 16.7 million. */
  function zeros(elements: number): Buffer<ArrayBuffer> {
    // Filled in place: a 32 MiB JavaScript string would cost this process more than the request.
    const body = Buffer.allocUnsafe(2 * elements + 1);
    body[0] = 0x5b;
    body.fill('0,', 1, 2 * elements);
    body[2 * elements] = 0x5d;
    return body;
  }
  const json = { 'content-type': 'application/json' };

  // The bench's `limits` workload measures the memory these floods cost and how long the
  // server leaves a HEAD waiting meanwhile (keys json-flood-*, json-million-rss, json-frame-*).

  it('refuses 32 MiB of `[0,0,...]` with 413 TOO_MANY_MESSAGES past --max-append-messages, and stores nothing', async () => {
    const s = await serve([]);
    const stream = `${s.url}/v1/stream/flood`;
    await create(stream, 'application/json');
    const body = zeros(16 * 1024 * 1024 - 1);
    expect(body.length).toBeLessThanOrEqual(32 * 1024 * 1024);
    const refused = await refusalOf(await fetch(stream, { method: 'POST', headers: json, body }));
    expectJsonRefusal(refused, 413, 'TOO_MANY_MESSAGES');
    expect(refused.body).toContain('100000 messages');
    expect(refused.body).toContain('--max-append-messages');
    expect(await tailOf(stream)).toBe(0);
    // The server goes on answering once it has refused.
    expect((await fetch(stream, { method: 'HEAD' })).status).toBe(200);
  });

  it('accepts an array of a million messages past a raised --max-append-messages, and reads it back', async () => {
    const s = await serve(['--max-append-messages', '1000000']);
    const stream = `${s.url}/v1/stream/flood-accepted`;
    await create(stream, 'application/json');
    const elements = 1_000_000;
    expect((await fetch(stream, { method: 'POST', headers: json, body: zeros(elements) })).status).toBe(204);
    // Every element is a message "0\n"; the last ones read back as they were sent.
    expect(await tailOf(stream)).toBe(2 * elements);
    const tail = await fetch(`${stream}?offset=${String(2 * elements - 6).padStart(20, '0')}`);
    expect(await tail.json()).toEqual([0, 0, 0]);
    const over = await fetch(stream, { method: 'POST', headers: json, body: zeros(elements + 1) });
    expectJsonRefusal(await refusalOf(over), 413, 'TOO_MANY_MESSAGES');
    expect(await tailOf(stream)).toBe(2 * elements);
  });

  /**
   * `[0 ... ,0 ...]`: `elements` zeros of 320 bytes each with whitespace, which framing
   * reads and drops: the body frames as 320 bytes an element and stores as "0\n", two.
   */
  function paddedZeros(elements: number): Buffer<ArrayBuffer> {
    const body = Buffer.allocUnsafe(320 * elements + 1);
    body[0] = 0x5b;
    body.fill(`0${' '.repeat(318)},`, 1);
    body[320 * elements] = 0x5d;
    return body;
  }

  it('frames a 32 MB JSON body of padded elements (in slices) into its 100,000 messages, whitespace dropped', async () => {
    const s = await serve([]);
    const stream = `${s.url}/v1/stream/flood-padded`;
    await create(stream, 'application/json');
    const elements = 100_000;
    const body = paddedZeros(elements);
    expect(body.length).toBe(32_000_001);
    expect((await fetch(stream, { method: 'POST', headers: json, body })).status).toBe(204);
    expect(await tailOf(stream)).toBe(2 * elements);
    // Stored as "0\n" each, first and last alike: no slice boundary left a message out or cut one.
    const first = await fetch(`${stream}?offset=-1&max_bytes=6`);
    expect(await first.json()).toEqual([0, 0, 0]);
    const last = await fetch(`${stream}?offset=${String(2 * elements - 6).padStart(20, '0')}`);
    expect(await last.json()).toEqual([0, 0, 0]);
  });
});

describe('live connection limits', () => {
  let s: ServerProcess;
  const LIVE_LIMIT = 3;
  const stream = () => `${s.url}/v1/stream/live`;
  /** Longer than any wait here: a reader still open then was not ended by the limit under test. */
  const notEnded = () => AbortSignal.timeout(20_000);
  beforeAll(async () => {
    s = await serve(['--max-live-connections', String(LIVE_LIMIT), '--long-poll-timeout', '300ms', '--max-long-poll-timeout', '1s', '--sse-lifetime', '1s']);
    await create(stream());
  });

  it('answers 503 with Retry-After once --max-live-connections readers are held, and admits again after', async () => {
    const held = Array.from({ length: LIVE_LIMIT }, () => fetch(`${stream()}?offset=now&live=long-poll&timeout_ms=1000`));
    await untilLiveReaders(s.url, 'long_poll', LIVE_LIMIT);
    for (const query of ['offset=now&live=long-poll', 'offset=now&live=sse']) {
      const refused = await fetch(`${stream()}?${query}`);
      expect(refused.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
      expectJsonRefusal(await refusalOf(refused), 503, 'TOO_MANY_CONNECTIONS');
    }
    // Catch-up reads are not live and are never refused for it.
    expect((await fetch(`${stream()}?offset=-1`)).status).toBe(200);
    for (const res of await Promise.all(held)) expect(res.status).toBe(204);
    const again = await fetch(`${stream()}?offset=now&live=long-poll`);
    expect(again.status).toBe(204);
  });

  /** A long-poll at the tail that must end 204: its wait over, nothing written. */
  const waitEnds = (query: string) => async () => {
    const res = await fetch(`${stream()}?offset=now&live=long-poll${query}`, { signal: notEnded() });
    await res.arrayBuffer();
    expect(res.status).toBe(204);
  };

  it('bounds a long-poll wait by --max-long-poll-timeout, whatever timeout_ms asks', async () => {
    // Three waits at once, told apart by the order they end in: the default (300 ms), one
    // asked for 600 ms, and one asking 600 s, which the 1 s bound ends third (and at all).
    const order = await finishOrder({ default: waitEnds(''), asked600ms: waitEnds('&timeout_ms=600'), asked600s: waitEnds('&timeout_ms=600000') });
    expect(order).toEqual(['default', 'asked600ms', 'asked600s']);
  });

  it('ends an SSE connection after --sse-lifetime, with a control event carrying where to resume', async () => {
    let body = '';
    const sse = async () => {
      const res = await fetch(`${stream()}?offset=-1&live=sse`, { signal: notEnded() });
      expect(res.status).toBe(200);
      body = await res.text();
    };
    // The SSE connection (1 s) outlives a long-poll of the default wait (300 ms) started with it.
    expect(await finishOrder({ longPoll: waitEnds(''), sse })).toEqual(['longPoll', 'sse']);
    expect(body).toContain('"streamNextOffset":"00000000000000000000"');
  });
});

describe('live readers that hang up', () => {
  let s: ServerProcess;
  const path = '/v1/stream/hangup';
  beforeAll(async () => {
    // Waits far longer than the test: a slot comes back only through the hang-up itself.
    s = await serve(['--max-live-connections', '2', '--max-long-poll-timeout', '60s', '--sse-lifetime', '60s', '--sse-heartbeat', '30s']);
    await create(`${s.url}${path}`);
  });

  /** The status a long-poll of 100 ms gets: 204 when admitted, 503 when every slot is held. */
  const probe = async () => (await fetch(`${s.url}${path}?offset=now&live=long-poll&timeout_ms=100`)).status;

  for (const [kind, gauge, query] of [
    ['long-poll', 'long_poll', 'offset=now&live=long-poll&timeout_ms=60000'],
    ['SSE', 'sse', 'offset=now&live=sse'],
  ] as const) {
    it(`gives back the slots of ${kind} readers that close their connections mid-wait`, async () => {
      const readers = await Promise.all([1, 2].map(() => openSocket(s.port)));
      for (const socket of readers) socket.write(`GET ${path}?${query} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
      await untilLiveReaders(s.url, gauge, 2);
      expect(await probe()).toBe(503);
      for (const socket of readers) socket.destroy();
      await untilLiveReaders(s.url, gauge, 0);
      // Both slots: two readers are held at once again.
      const held = [1, 2].map(() => fetch(`${s.url}${path}?offset=now&live=long-poll&timeout_ms=500`));
      for (const res of await Promise.all(held)) expect(res.status).toBe(204);
    });
  }
});

describe('slow clients', () => {
  let s: ServerProcess;
  /**
   * Six times --headers-timeout and short of its 10 s default: a connection still open
   * then was not closed by the flag. --request-timeout (2 s) is far from its default (120 s).
   */
  const HEADERS_CLOSE_MS = 6_000;
  beforeAll(async () => {
    s = await serve(['--headers-timeout', '1s', '--request-timeout', '2s']);
    await create(`${s.url}/v1/stream/slow`);
  });

  it('answers 408 and closes a connection whose headers trickle in (slowloris)', async () => {
    const socket = await openSocket(s.port);
    socket.write('GET /v1/stream/slow HTTP/1.1\r\nHost: localhost\r\nX-Slow: ');
    // The trickle is the client under test: a byte of header every 100 ms, never the end.
    const drip = setInterval(() => socket.writable && socket.write('a'), 100);
    const reply = await collect(socket, HEADERS_CLOSE_MS);
    clearInterval(drip);
    expect(reply.ended).not.toBe('timeout');
    expectJsonRefusal(refusalFrom(reply), 408, 'REQUEST_TIMEOUT');
  });

  it('closes a connection that never sends a request', async () => {
    const reply = await collect(await openSocket(s.port), HEADERS_CLOSE_MS);
    expect(reply.ended).not.toBe('timeout');
  });

  it('drops a request whose body trickles past --request-timeout, applying nothing', async () => {
    const socket = await openSocket(s.port);
    socket.write('POST /v1/stream/slow HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\nab');
    // A byte of body every 100 ms: 1000 bytes would take 100 s.
    const drip = setInterval(() => socket.writable && socket.write('c'), 100);
    const reply = await collect(socket, 12_000);
    clearInterval(drip);
    expect(reply.ended).not.toBe('timeout');
    expect(await tailOf(`${s.url}/v1/stream/slow`)).toBe(0);
    expect((await fetch(`${s.url}/healthz`)).status).toBe(200);
  });
});

describe('a slow SSE reader', () => {
  it('is disconnected instead of being buffered for, while a reader that keeps up gets everything', async () => {
    const bound = 64 * 1024;
    const s = await serve(['--sse-max-buffered', String(bound), '--sse-heartbeat', '1s', '--sse-lifetime', '60s']);
    const stream = `${s.url}/v1/stream/firehose`;
    await create(stream, 'application/octet-stream');
    const subscribe = async () => {
      const socket = await openSocket(s.port);
      socket.write('GET /v1/stream/firehose?offset=-1&live=sse HTTP/1.1\r\nHost: localhost\r\n\r\n');
      return socket;
    };
    // The stalled reader takes its answer's head, then stops reading: that is the client under test.
    const stalled = await subscribe();
    await once(stalled, 'readable');
    const keeping = await subscribe();
    const keepingDone = collect(keeping, 60_000);
    await untilLiveReaders(s.url, 'sse', 2);

    const chunk = Buffer.alloc(1024 * 1024, 0x61);
    const appends = 48;
    for (let i = 0; i < appends; i++) {
      const res = await fetch(stream, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: chunk });
      expect(res.status).toBe(204);
    }
    const total = appends * chunk.length;
    // The server lets the stalled reader go (a heartbeat after its buffer filled), keeping the other.
    await untilLiveReaders(s.url, 'sse', 1);
    // Closing the stream ends the reader that kept up once it has read everything.
    expect((await fetch(stream, { method: 'POST', headers: { 'stream-closed': 'true' } })).status).toBe(204);

    const fromStalled = await collect(stalled, 5_000);
    expect(fromStalled.ended).not.toBe('timeout');
    // Base64 SSE of 48 MiB is 64 MiB; the stalled reader got the socket buffers' worth
    // and the bound, then was cut.
    expect(fromStalled.data.length).toBeLessThan(16 * 1024 * 1024);
    const kept = await keepingDone;
    expect(kept.ended).toBe('end');
    expect(kept.data.toString()).toContain(`"streamNextOffset":"${String(total).padStart(20, '0')}"`);
    expect(kept.data.toString()).toContain('"streamClosed":true');
  }, 60_000);
});

describe('connections a client opens and holds', () => {
  it('closes a connection that sends no request within --headers-timeout; one in use stays', async () => {
    const s = await serve(['--headers-timeout', '500ms', '--request-timeout', '2s']);
    const silent = await Promise.all(Array.from({ length: 50 }, () => openSocket(s.port)));
    const used = await openSocket(s.port);
    used.write(`HEAD /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n`);
    // Ten times --headers-timeout, and half its 10 s default.
    const endings = await Promise.all(silent.map((socket) => collect(socket, 5_000)));
    for (const ending of endings) expect(ending.ended).toBe('end');
    // The used connection is governed by the keep-alive timeout (5 s), not the first-request one.
    await sleep(700); // the used connection idles past --headers-timeout: the idling is the behaviour under test
    expect(used.destroyed).toBe(false);
    used.destroy();
  });

  it('answers a connection past --max-connections 503 TOO_MANY_CONNECTIONS with Retry-After, and admits again once others close', async () => {
    const s = await serve(['--max-connections', '20', '--headers-timeout', '10s']);
    const held = await Promise.all(Array.from({ length: 20 }, () => openSocket(s.port)));
    const extra = await openSocket(s.port);
    extra.write(`GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n`);
    const refused = await collect(extra, 3_000);
    const head = parseHead(refused.data)!;
    expect(head.status).toBe(503);
    expect(head.headers['retry-after']).toBe('1');
    expect(JSON.parse(head.rest.toString())).toEqual({ code: 'TOO_MANY_CONNECTIONS', message: expect.any(String) });
    for (const socket of held) socket.destroy();
    // Admitted once the server has seen the closes: refused (503) until then.
    await until(async () => (await fetch(`${s.url}/healthz`)).status === 200, 'a connection admitted again');
  });
});
