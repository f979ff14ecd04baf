/**
 * Seed 000 (exactly-once writes) over HTTP against the real `rill` binary on SQLite:
 * one test per rule of issue 3. Eviction, forgetting and the epoch floor run on servers
 * started with shortened timings (--max-producers, --producer-idle-evict, --producer-ttl).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { blake3Hex, httpRequest, sendPipelined, type HttpAnswer } from '../helpers/producer-client.js';
import { TestClock } from '../helpers/clock.js';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { request } from 'node:http';

const MAX_SAFE = '9007199254740991';
const off = (position: number): string => String(position).padStart(20, '0');

/** Headers a producer relies on; an answer is compared on exactly these. */
const WATCHED = [
  'stream-offset',
  'stream-next-offset',
  'stream-closed',
  'producer-epoch',
  'producer-seq',
  'producer-expected-seq',
  'producer-received-seq',
  'producer-outcome',
  'producer-closed-epoch',
  'producer-closed-seq',
  'retry-after',
];

interface Answer {
  status: number;
  code: string | null;
  h: Record<string, string>;
}

async function answerOf(res: Response): Promise<Answer> {
  const h: Record<string, string> = {};
  for (const name of WATCHED) {
    const value = res.headers.get(name);
    if (value !== null) h[name] = value;
  }
  const text = await res.text();
  const code = res.status >= 400 ? (JSON.parse(text) as { code: string }).code : null;
  return { status: res.status, code, h };
}

interface WriteOptions {
  id?: string;
  epoch?: number | string;
  seq?: number | string;
  digest?: string | 'auto';
  close?: boolean;
  incarnation?: string;
  contentType?: string;
  extra?: Record<string, string>;
}

class Streams {
  constructor(readonly server: () => RunningServer) {}

  url(name: string): string {
    return `${this.server().url}/v1/stream/${name}`;
  }

  /** Creates a stream and answers its incarnation token. */
  async create(name: string, contentType = 'text/plain'): Promise<string> {
    const res = await fetch(this.url(name), { method: 'PUT', headers: { 'content-type': contentType } });
    expect(res.status).toBe(201);
    return res.headers.get('stream-incarnation')!;
  }

  async write(name: string, body: string, o: WriteOptions = {}): Promise<Answer> {
    const headers: Record<string, string> = { 'content-type': o.contentType ?? 'text/plain', ...o.extra };
    if (o.id !== undefined) headers['producer-id'] = o.id;
    if (o.epoch !== undefined) headers['producer-epoch'] = String(o.epoch);
    if (o.seq !== undefined) headers['producer-seq'] = String(o.seq);
    if (o.digest !== undefined) headers['producer-digest'] = o.digest === 'auto' ? blake3Hex(body) : o.digest;
    if (o.close) headers['stream-closed'] = 'true';
    if (o.incarnation !== undefined) headers['stream-incarnation'] = o.incarnation;
    const res = await fetch(this.url(name), { method: 'POST', headers, body: body.length > 0 ? body : undefined });
    return answerOf(res);
  }

  /** A producer write: id, epoch and seq, plus whatever else the options say. */
  async produce(name: string, id: string, epoch: number, seq: number, body: string, o: WriteOptions = {}): Promise<Answer> {
    return this.write(name, body, { ...o, id, epoch, seq });
  }

  async log(name: string): Promise<string> {
    const res = await fetch(`${this.url(name)}?offset=-1`);
    expect(res.status).toBe(200);
    return res.text();
  }
}

function ok(status: 200 | 204, h: Record<string, string>): Answer {
  return { status, code: null, h };
}

function receipt(start: number, next: number, closed = false): Record<string, string> {
  return { 'stream-offset': off(start), 'stream-next-offset': off(next), ...(closed ? { 'stream-closed': 'true' } : {}) };
}

function pos(epoch: number, seq: number): Record<string, string> {
  return { 'producer-epoch': String(epoch), 'producer-seq': String(seq) };
}

function closedBy(epoch: number, seq: number): Record<string, string> {
  return { 'producer-closed-epoch': String(epoch), 'producer-closed-seq': String(seq) };
}

let server: RunningServer;
const s = new Streams(() => server);

beforeAll(async () => {
  server = await startServer();
});

afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

describe('answers of a producer write', () => {
  it('a write next in sequence answers 200 with its receipt, and Stream-Closed when it closed the stream', async () => {
    await s.create('next-in-seq');
    expect(await s.produce('next-in-seq', 'p', 0, 0, 'hello')).toEqual(ok(200, { ...receipt(0, 5), ...pos(0, 0) }));
    expect(await s.produce('next-in-seq', 'p', 0, 1, ' big')).toEqual(ok(200, { ...receipt(5, 9), ...pos(0, 1) }));
    expect(await s.produce('next-in-seq', 'p', 0, 2, ' world', { close: true })).toEqual(ok(200, { ...receipt(9, 15, true), ...pos(0, 2) }));
    expect(await s.log('next-in-seq')).toBe('hello big world');
  });

  it('a repeat of the newest write answers 204 with the original receipt; older repeats say receipt-evicted', async () => {
    await s.create('repeats');
    for (const [seq, body] of ['a', 'bb', 'ccc'].entries()) expect((await s.produce('repeats', 'p', 3, seq, body)).status).toBe(200);
    // Producer-Seq is the highest applied seq of the epoch, not the request's.
    expect(await s.produce('repeats', 'p', 3, 2, 'ccc')).toEqual(ok(204, { ...receipt(3, 6), ...pos(3, 2) }));
    expect(await s.produce('repeats', 'p', 3, 1, 'bb')).toEqual(ok(204, { ...pos(3, 2), 'producer-outcome': 'receipt-evicted' }));
    // seq 0 of the first epoch is a claim that closed nothing: no closed headers.
    expect(await s.produce('repeats', 'p', 3, 0, 'a')).toEqual(ok(204, { ...pos(3, 2), 'producer-outcome': 'receipt-evicted' }));
    expect(await s.log('repeats')).toBe('abbccc');
  });

  it('a seq that skips ahead answers 409 with the expected and received seq, and applies nothing', async () => {
    await s.create('gap');
    await s.produce('gap', 'p', 0, 0, 'zero;');
    const gap = { status: 409, code: 'PRODUCER_SEQ_GAP', h: { 'producer-expected-seq': '1', 'producer-received-seq': '3' } };
    expect(await s.produce('gap', 'p', 0, 3, 'three;')).toEqual(gap);
    expect(await s.produce('gap', 'p', 0, 1, 'one;')).toEqual(ok(200, { ...receipt(5, 9), ...pos(0, 1) }));
    expect(await s.log('gap')).toBe('zero;one;');
  });

  it('a seq above 0 of a new producer is a gap (409 expecting 0); of an unclaimed later epoch, 400 expecting 0', async () => {
    await s.create('not-zero');
    const notZero = (received: number) => ({ status: 400, code: 'PRODUCER_SEQ_NOT_ZERO', h: { 'producer-expected-seq': '0', 'producer-received-seq': String(received) } });
    const gap = { status: 409, code: 'PRODUCER_SEQ_GAP', h: { 'producer-expected-seq': '0', 'producer-received-seq': '1' } };
    expect(await s.produce('not-zero', 'p', 0, 1, 'x')).toEqual(gap);
    await s.produce('not-zero', 'p', 0, 0, 'a');
    await s.produce('not-zero', 'p', 0, 1, 'b');
    expect(await s.produce('not-zero', 'p', 1, 2, 'x')).toEqual(notZero(2));
    // The later epoch stays unclaimed: the old one still writes.
    expect(await s.produce('not-zero', 'p', 0, 2, 'c')).toEqual(ok(200, { ...receipt(2, 3), ...pos(0, 2) }));
    expect(await s.log('not-zero')).toBe('abc');
  });

  it('the claim of a new epoch closes the old one, and every repeat of the claim says so', async () => {
    await s.create('claim');
    for (const seq of [0, 1, 2]) await s.produce('claim', 'p', 0, seq, `e0s${seq};`);
    const claim = ok(200, { ...receipt(15, 20), ...pos(1, 0), ...closedBy(0, 2) });
    expect(await s.produce('claim', 'p', 1, 0, 'e1s0;')).toEqual(claim);
    expect(await s.produce('claim', 'p', 1, 0, 'e1s0;')).toEqual({ ...claim, status: 204 });
    expect(await s.produce('claim', 'p', 1, 1, 'e1s1;')).toEqual(ok(200, { ...receipt(20, 25), ...pos(1, 1) }));
    expect(await s.produce('claim', 'p', 1, 0, 'e1s0;')).toEqual(ok(204, { ...pos(1, 1), 'producer-outcome': 'receipt-evicted', ...closedBy(0, 2) }));
    expect(await s.log('claim')).toBe('e0s0;e0s1;e0s2;e1s0;e1s1;');
  });

  it('an older epoch answers 403 whether or not its write applied: epoch-closed for the closed epoch, stale-epoch before it', async () => {
    await s.create('fenced');
    await s.produce('fenced', 'p', 0, 0, 'a');
    for (const seq of [0, 1]) await s.produce('fenced', 'p', 1, seq, 'b');
    await s.produce('fenced', 'p', 3, 0, 'c');
    const closed = { status: 403, code: 'PRODUCER_FENCED', h: { 'producer-epoch': '3', 'producer-outcome': 'epoch-closed;by=claim', ...closedBy(1, 1) } };
    const stale = { status: 403, code: 'PRODUCER_FENCED', h: { 'producer-epoch': '3', 'producer-outcome': 'stale-epoch' } };
    expect(await s.produce('fenced', 'p', 1, 1, 'b')).toEqual(closed); // applied before
    expect(await s.produce('fenced', 'p', 1, 2, 'b')).toEqual(closed); // never applied
    expect(await s.produce('fenced', 'p', 0, 0, 'a')).toEqual(stale); // applied before
    expect(await s.produce('fenced', 'p', 0, 1, 'a')).toEqual(stale); // never applied
    expect(await s.produce('fenced', 'p', 2, 0, 'x')).toEqual(stale); // an epoch never used
    expect(await s.log('fenced')).toBe('abbc');
  });

  it('the same Producer-Id keeps independent state on two streams', async () => {
    await s.create('scope-a');
    await s.create('scope-b');
    await s.produce('scope-a', 'shared', 5, 0, 'a0');
    await s.produce('scope-a', 'shared', 5, 1, 'a1');
    expect(await s.produce('scope-b', 'shared', 0, 0, 'b0')).toEqual(ok(200, { ...receipt(0, 2), ...pos(0, 0) }));
    expect(await s.produce('scope-b', 'shared', 0, 1, 'b1')).toEqual(ok(200, { ...receipt(2, 4), ...pos(0, 1) }));
    expect(await s.produce('scope-a', 'shared', 5, 2, 'a2')).toEqual(ok(200, { ...receipt(4, 6), ...pos(5, 2) }));
  });

  it('a stream deleted and created again starts without producers', async () => {
    await s.create('recreated');
    await s.produce('recreated', 'p', 4, 0, 'old;');
    expect((await fetch(s.url('recreated'), { method: 'DELETE' })).status).toBe(204);
    await s.create('recreated');
    // Epoch 2 would be fenced by the old stream's epoch 4; here it is a first claim.
    expect(await s.produce('recreated', 'p', 2, 0, 'new;')).toEqual(ok(200, { ...receipt(0, 4), ...pos(2, 0) }));
    expect(await s.log('recreated')).toBe('new;');
  });

  it('a producer close-only write answers 204 with its receipt and closes the stream; a repeat is a duplicate', async () => {
    await s.create('close-only');
    await s.produce('close-only', 'p', 0, 0, 'data');
    const closeOnly = ok(204, { ...receipt(4, 4, true), ...pos(0, 1) });
    expect(await s.produce('close-only', 'p', 0, 1, '', { close: true })).toEqual(closeOnly);
    expect(await s.produce('close-only', 'p', 0, 1, '', { close: true })).toEqual(closeOnly);
    expect(await s.produce('close-only', 'p', 0, 2, 'late')).toEqual({ status: 409, code: 'STREAM_CLOSED', h: { 'stream-closed': 'true', 'stream-next-offset': off(4) } });
    expect(await s.log('close-only')).toBe('data');
  });
});

describe('Producer-Digest', () => {
  it('is BLAKE3-256 in 64 lowercase hex digits (the published test vector of the empty input)', () => {
    expect(blake3Hex('')).toBe('af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262');
  });

  it('a digest that does not match the body answers 400 and applies nothing', async () => {
    await s.create('digest-mismatch');
    expect(await s.produce('digest-mismatch', 'p', 0, 0, 'body', { digest: blake3Hex('other') })).toEqual({ status: 400, code: 'DIGEST_MISMATCH', h: {} });
    expect(await s.produce('digest-mismatch', 'p', 0, 0, 'body', { digest: 'auto' })).toEqual(ok(200, { ...receipt(0, 4), ...pos(0, 0) }));
    expect(await s.log('digest-mismatch')).toBe('body');
  });

  it('a different body under the newest write key or the claim key answers 403 key-conflict and applies nothing', async () => {
    await s.create('key-conflict');
    for (const seq of [0, 1, 2]) await s.produce('key-conflict', 'p', 0, seq, `w${seq};`, { digest: 'auto' });
    const conflict = { status: 403, code: 'PRODUCER_KEY_CONFLICT', h: { ...pos(0, 2), 'producer-outcome': 'key-conflict' } };
    expect(await s.produce('key-conflict', 'p', 0, 2, 'other', { digest: 'auto' })).toEqual(conflict);
    expect(await s.produce('key-conflict', 'p', 0, 0, 'other', { digest: 'auto' })).toEqual(conflict);
    // The same bodies are plain duplicates.
    expect(await s.produce('key-conflict', 'p', 0, 2, 'w2;', { digest: 'auto' })).toEqual(ok(204, { ...receipt(6, 9), ...pos(0, 2) }));
    expect((await s.produce('key-conflict', 'p', 0, 0, 'w0;', { digest: 'auto' })).status).toBe(204);
    // Seq 1 is neither the newest nor the claim: its digest is not kept.
    expect(await s.produce('key-conflict', 'p', 0, 1, 'other', { digest: 'auto' })).toEqual(ok(204, { ...pos(0, 2), 'producer-outcome': 'receipt-evicted' }));
    expect(await s.log('key-conflict')).toBe('w0;w1;w2;');
  });

  it('without a digest, a repeat with a different body is a duplicate', async () => {
    await s.create('no-digest');
    await s.produce('no-digest', 'p', 0, 0, 'first', { digest: 'auto' });
    expect(await s.produce('no-digest', 'p', 0, 0, 'changed')).toEqual(ok(204, { ...receipt(0, 5), ...pos(0, 0) }));
    expect(await s.log('no-digest')).toBe('first');
  });

  it('covers the body as sent, before a JSON stream splits it into messages', async () => {
    await s.create('digest-json', 'application/json');
    const body = '[ {"a": 1}, {"b": 2} ]';
    const answer = await s.produce('digest-json', 'p', 0, 0, body, { digest: 'auto', contentType: 'application/json' });
    expect(answer.status).toBe(200);
    expect(JSON.parse(await s.log('digest-json'))).toEqual([{ a: 1 }, { b: 2 }]);
  });

  it('a close-only write may carry the digest of its empty body', async () => {
    await s.create('digest-close');
    const answer = await s.produce('digest-close', 'p', 0, 0, '', { close: true, digest: blake3Hex('') });
    expect(answer).toEqual(ok(204, { ...receipt(0, 0, true), ...pos(0, 0) }));
  });
});

describe('producer header syntax', () => {
  const invalid = { status: 400, code: 'INVALID_PRODUCER_HEADERS', h: {} };
  const cases: Array<[string, Record<string, string>]> = [
    ['only Producer-Id', { 'producer-id': 'p' }],
    ['no Producer-Seq', { 'producer-id': 'p', 'producer-epoch': '0' }],
    ['no Producer-Id', { 'producer-epoch': '0', 'producer-seq': '0' }],
    ['a digest alone', { 'producer-digest': blake3Hex('x') }],
    ['an empty Producer-Id', { 'producer-id': '', 'producer-epoch': '0', 'producer-seq': '0' }],
    ['a Producer-Id over 1024 bytes', { 'producer-id': 'p'.repeat(1025), 'producer-epoch': '0', 'producer-seq': '0' }],
    ['an empty epoch', { 'producer-id': 'p', 'producer-epoch': '', 'producer-seq': '0' }],
    ['an empty seq', { 'producer-id': 'p', 'producer-epoch': '0', 'producer-seq': '' }],
    ['a fraction', { 'producer-id': 'p', 'producer-epoch': '1.0', 'producer-seq': '0' }],
    ['an exponent', { 'producer-id': 'p', 'producer-epoch': '0', 'producer-seq': '1e3' }],
    ['a negative epoch', { 'producer-id': 'p', 'producer-epoch': '-1', 'producer-seq': '0' }],
    ['a negative seq', { 'producer-id': 'p', 'producer-epoch': '0', 'producer-seq': '-1' }],
    ['a plus sign', { 'producer-id': 'p', 'producer-epoch': '+1', 'producer-seq': '0' }],
    ['a leading zero', { 'producer-id': 'p', 'producer-epoch': '0', 'producer-seq': '01' }],
    ['hex', { 'producer-id': 'p', 'producer-epoch': '0x1', 'producer-seq': '0' }],
    ['an epoch of 2^53', { 'producer-id': 'p', 'producer-epoch': '9007199254740992', 'producer-seq': '0' }],
    ['a seq of 2^53', { 'producer-id': 'p', 'producer-epoch': '0', 'producer-seq': '9007199254740992' }],
    ['a huge seq', { 'producer-id': 'p', 'producer-epoch': '0', 'producer-seq': '99999999999999999999999' }],
    ['an uppercase digest', { 'producer-id': 'p', 'producer-epoch': '0', 'producer-seq': '0', 'producer-digest': blake3Hex('x').toUpperCase() }],
    ['a short digest', { 'producer-id': 'p', 'producer-epoch': '0', 'producer-seq': '0', 'producer-digest': blake3Hex('x').slice(2) }],
  ];

  it.each(cases)('%s answers 400 and applies nothing', async (_label, headers) => {
    const name = `syntax-${Math.random().toString(36).slice(2)}`;
    await s.create(name);
    expect(await s.write(name, 'x', { extra: headers })).toEqual(invalid);
    expect(await s.log(name)).toBe('');
  });

  it('accepts epoch and seq up to 2^53-1 and echoes them exactly', async () => {
    await s.create('max-epoch');
    const claim = await s.write('max-epoch', 'x', { id: 'p', epoch: MAX_SAFE, seq: 0 });
    expect(claim).toEqual(ok(200, { ...receipt(0, 1), 'producer-epoch': MAX_SAFE, 'producer-seq': '0' }));
    const ahead = await s.write('max-epoch', 'y', { id: 'p', epoch: MAX_SAFE, seq: MAX_SAFE });
    expect(ahead).toEqual({ status: 409, code: 'PRODUCER_SEQ_GAP', h: { 'producer-expected-seq': '1', 'producer-received-seq': MAX_SAFE } });
  });

  it('a create (PUT) with producer headers answers 400 and creates nothing', async () => {
    const url = s.url('put-with-producer');
    const res = await fetch(url, { method: 'PUT', headers: { 'content-type': 'text/plain', 'producer-id': 'p', 'producer-epoch': '0', 'producer-seq': '0' } });
    expect(await answerOf(res)).toEqual({ status: 400, code: 'PRODUCER_HEADERS_ON_CREATE', h: {} });
    expect((await fetch(url, { method: 'HEAD' })).status).toBe(404);
  });
});

describe('ordering across connections', () => {
  /** A POST on its own TCP connection; the body is sent when `release` is called. */
  function heldWrite(url: string, headers: Record<string, string>, body: string): { release: () => void; answer: Promise<HttpAnswer> } {
    let release!: () => void;
    const answer = new Promise<HttpAnswer>((resolve, reject) => {
      const req = request(url, { method: 'POST', headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) }, agent: false }, (res) => {
        const parts: Buffer[] = [];
        res.on('data', (d: Buffer) => parts.push(d));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(parts).toString() }));
      });
      req.on('error', reject);
      req.flushHeaders();
      release = () => req.end(body);
    });
    return { release, answer };
  }

  it('writes of one producer that arrive out of order over several connections are judged in arrival order', async () => {
    await s.create('arrival');
    const url = s.url('arrival');
    const headers = (seq: number) => ({ 'content-type': 'text/plain', 'producer-id': 'p', 'producer-epoch': '0', 'producer-seq': String(seq) });
    expect((await httpRequest(url, 'POST', headers(0), 's0;', false)).status).toBe(200);
    // seq 1 opens its connection first but its body arrives last; seq 2 is judged when it
    // arrives, against what has applied by then, so the server never waits for seq 1.
    const one = heldWrite(url, headers(1), 's1;');
    const two = await httpRequest(url, 'POST', headers(2), 's2;', false);
    expect([two.status, two.headers['producer-expected-seq'], two.headers['producer-received-seq']]).toEqual([409, '1', '2']);
    one.release();
    expect((await one.answer).status).toBe(200);
    const again = await httpRequest(url, 'POST', headers(2), 's2;', false);
    expect([again.status, again.headers['producer-seq']]).toEqual([200, '2']);
    expect(await s.log('arrival')).toBe('s0;s1;s2;');
  });

  it('a client that pipelines and retries its 409s ends with every write applied once, in seq order', async () => {
    await s.create('pipelined');
    const url = s.url('pipelined');
    const writes = Array.from({ length: 80 }, (_, seq) => ({ seq, body: Buffer.from(`w${seq};`) }));
    const options = { producerId: 'pipe', epoch: 0, contentType: 'text/plain', maxAttempts: 20_000 };
    const claim = await sendPipelined(url, writes.slice(0, 1), { ...options, inFlight: 1 });
    expect(claim.answered.get(0)?.status).toBe(200);
    const rest = await sendPipelined(url, writes.slice(1), { ...options, inFlight: 8, order: 'shuffled' });
    expect(rest.unanswered).toEqual([]);
    expect(rest.conflicts).toBeGreaterThan(0); // the shuffle made writes arrive ahead of their turn
    for (const [seq, answer] of rest.answered) {
      expect([seq, answer.status, answer.headers['producer-seq']]).toEqual([seq, 200, String(seq)]);
    }
    expect(await s.log('pipelined')).toBe(writes.map((w) => w.body.toString()).join(''));
  });
});

describe('Stream-Incarnation on producer writes', () => {
  it('a write naming another incarnation answers 412 before any producer rule, and applies nothing', async () => {
    const incarnation = await s.create('incarnation');
    await s.produce('incarnation', 'p', 0, 0, 'a', { incarnation });
    const stale = await s.produce('incarnation', 'p', 0, 1, 'b', { incarnation: `${incarnation}x` });
    expect([stale.status, stale.code]).toEqual([412, 'INCARNATION_MISMATCH']);
    expect(await s.produce('incarnation', 'p', 0, 1, 'b', { incarnation })).toEqual(ok(200, { ...receipt(1, 2), ...pos(0, 1) }));
  });
});

describe('state survives a restart', () => {
  it('receipts, claims, digests and fencing are the same after the server restarts on its data', async () => {
    let mine = await startServer();
    const t = new Streams(() => mine);
    try {
      await t.create('durable');
      for (const seq of [0, 1]) await t.produce('durable', 'p', 0, seq, `e0s${seq};`, { digest: 'auto' });
      await t.produce('durable', 'p', 2, 0, 'claim;', { digest: 'auto' });
      await t.produce('durable', 'p', 2, 1, 'newest;', { digest: 'auto' });
      expect(await mine.stop()).toBe(0);
      mine = await startServer({ dataDir: mine.dataDir });
      expect(await t.produce('durable', 'p', 2, 1, 'newest;', { digest: 'auto' })).toEqual(ok(204, { ...receipt(16, 23), ...pos(2, 1) }));
      expect((await t.produce('durable', 'p', 2, 0, 'changed', { digest: 'auto' })).h['producer-outcome']).toBe('key-conflict');
      expect(await t.produce('durable', 'p', 2, 0, 'claim;')).toEqual(ok(204, { ...pos(2, 1), 'producer-outcome': 'receipt-evicted', ...closedBy(0, 1) }));
      expect((await t.produce('durable', 'p', 0, 1, 'x')).h).toEqual({ 'producer-epoch': '2', 'producer-outcome': 'epoch-closed;by=claim', ...closedBy(0, 1) });
      expect(await t.produce('durable', 'p', 2, 2, 'next;')).toEqual(ok(200, { ...receipt(23, 28), ...pos(2, 2) }));
      expect(await t.log('durable')).toBe('e0s0;e0s1;claim;newest;next;');
    } finally {
      await mine.stop();
      removeDir(mine.dataDir);
    }
  });
});

describe('producer limit and eviction (--max-producers 2 --producer-idle-evict 2s)', () => {
  let limited: RunningServer;
  const t = new Streams(() => limited);
  const clock = new TestClock();
  beforeAll(async () => {
    limited = await startServer({ args: ['--max-producers', '2', '--producer-idle-evict', '2s'], clock });
  });
  afterAll(async () => {
    await limited?.stop();
    if (limited) removeDir(limited.dataDir);
  });

  it('a new producer beyond the limit gets 429 until the least recently seen one has idled, then replaces it', async () => {
    const incarnation = await t.create('limit');
    await t.produce('limit', 'old', 4, 0, 'o0;');
    await t.produce('limit', 'busy', 0, 0, 'b0;');
    const refused = await t.produce('limit', 'third', 0, 0, 'x');
    // Retry-After: when 'old', seen a moment ago, will have idled 2 s.
    expect(refused).toEqual({ status: 429, code: 'PRODUCER_LIMIT', h: { 'retry-after': expect.stringMatching(/^[12]$/) } });
    // Known producers are not limited, not even when they claim a new epoch.
    expect((await t.produce('limit', 'old', 5, 0, 'o1;')).status).toBe(200);
    expect((await t.produce('limit', 'busy', 0, 1, 'b1;')).status).toBe(200);
    clock.advance(2_100);
    await t.produce('limit', 'busy', 0, 2, 'b2;'); // busy is seen again; old has idled 2 s
    expect(await t.produce('limit', 'third', 0, 0, 't0;')).toEqual(ok(200, { ...receipt(15, 18), ...pos(0, 0) }));
    // 'old' was replaced: forgotten, so the floor is its epoch 5; as a new producer its seq 1 is a gap expecting 0.
    expect(await t.produce('limit', 'old', 5, 1, 'o2;')).toEqual({ status: 409, code: 'PRODUCER_SEQ_GAP', h: { 'producer-expected-seq': '0', 'producer-received-seq': '1' } });
    const expired = { status: 403, code: 'PRODUCER_EXPIRED', h: { 'producer-epoch': '5', 'producer-outcome': 'producer-expired' } };
    expect(await t.produce('limit', 'old', 5, 0, 'o2;', { incarnation })).toEqual(expired);
    // Without Stream-Incarnation it is a new producer, and the stream is full again.
    expect((await t.produce('limit', 'old', 5, 0, 'o2;')).code).toBe('PRODUCER_LIMIT');
    expect(await t.log('limit')).toBe('o0;b0;o1;b1;b2;t0;');
  });
});

describe('forgetting and the epoch floor (--producer-ttl 2s)', () => {
  let forgetful: RunningServer;
  const t = new Streams(() => forgetful);
  const args = ['--producer-ttl', '2s'];
  const clock = new TestClock();
  beforeAll(async () => {
    forgetful = await startServer({ args, clock });
  });
  afterAll(async () => {
    await forgetful?.stop();
    if (forgetful) removeDir(forgetful.dataDir);
  });

  it('a producer idle for the TTL is forgotten; with Stream-Incarnation, epochs at or below the floor answer producer-expired', async () => {
    const incarnation = await t.create('floor');
    await t.produce('floor', 'a', 7, 0, 'a0;');
    await t.produce('floor', 'b', 2, 0, 'b0;');
    expect((await t.produce('floor', 'a', 7, 1, 'a1;')).status).toBe(200); // not idle yet
    clock.advance(2_100);
    const expired = { status: 403, code: 'PRODUCER_EXPIRED', h: { 'producer-epoch': '7', 'producer-outcome': 'producer-expired' } };
    expect(await t.produce('floor', 'b', 2, 1, 'b1;', { incarnation })).toEqual(expired);
    expect(await t.produce('floor', 'never-seen', 7, 0, 'n0;', { incarnation })).toEqual(expired);
    // Without Stream-Incarnation a forgotten producer is new: seq 0 again, no closed epoch.
    expect((await t.produce('floor', 'a', 7, 2, 'a2;')).code).toBe('PRODUCER_SEQ_GAP');
    expect(await t.produce('floor', 'a', 7, 0, 'A0;')).toEqual(ok(200, { ...receipt(9, 12), ...pos(7, 0) }));
    expect(await t.produce('floor', 'b', 8, 0, 'B0;', { incarnation })).toEqual(ok(200, { ...receipt(12, 15), ...pos(8, 0) }));
    expect(await t.log('floor')).toBe('a0;b0;a1;A0;B0;');
  });

  it('the floor survives a restart', async () => {
    const incarnation = await t.create('floor-restart');
    await t.produce('floor-restart', 'gone', 9, 0, 'g0;');
    clock.advance(2_100);
    await t.produce('floor-restart', 'fresh', 0, 0, 'f0;'); // a new producer: the stream forgets 'gone'
    expect(await forgetful.stop()).toBe(0);
    forgetful = await startServer({ dataDir: forgetful.dataDir, args, clock });
    const late = await t.produce('floor-restart', 'late', 9, 0, 'l0;', { incarnation });
    expect(late).toEqual({ status: 403, code: 'PRODUCER_EXPIRED', h: { 'producer-epoch': '9', 'producer-outcome': 'producer-expired' } });
    expect((await t.produce('floor-restart', 'late', 10, 0, 'l0;', { incarnation })).status).toBe(200);
  });
});
