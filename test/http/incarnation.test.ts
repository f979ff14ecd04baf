/**
 * Seed 001, "Guarding against a recreated stream (Stream-Incarnation)", sentence by
 * sentence, against the real rill binary on SQLite over HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, JSON_TYPE, openSse, pad, pipelinedRecreate, readJsonToTail, TEXT_TYPE, type Answer } from '../helpers/conditional.js';
import { removeDir, startServer, tempDataDir, type RunningServer } from '../helpers/server.js';
import { TestClock } from '../helpers/clock.js';
import { untilLiveReader } from '../helpers/processing.js';
import { extensionUrl } from '../../src/protocol/extensions.js';

let server: RunningServer;
let counter = 0;
/** The server's clock: a stream's TTL passes when a test moves it, not by waiting. */
const clock = new TestClock();

beforeAll(async () => {
  server = await startServer({ args: ['--long-poll-timeout', '2s'], clock });
});

afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

function freshUrl(label: string): string {
  counter += 1;
  return `${server.url}/v1/stream/inc-${label}-${counter}`;
}

async function created(label: string, headers: Record<string, string> = TEXT_TYPE, body?: string): Promise<{ url: string; token: string }> {
  const url = freshUrl(label);
  const res = await call(url, 'PUT', headers, body);
  expect(res.status).toBe(201);
  const token = res.headers.get('stream-incarnation');
  expect(token).toMatch(/\S/);
  return { url, token: token! };
}

const inc = (token: string) => ({ 'stream-incarnation': token });

const producer = (id: string, epoch: number, seqNo: number) => ({ 'producer-id': id, 'producer-epoch': String(epoch), 'producer-seq': String(seqNo) });

function expect412(res: Answer, current: string): void {
  expect(res.status).toBe(412);
  expect(res.headers.get('stream-incarnation')).toBe(current);
  if (res.text !== '') expect(res.code).toBe('INCARNATION_MISMATCH');
  for (const name of ['stream-last-seq', 'stream-closed', 'producer-expected-seq', 'producer-epoch']) {
    expect(res.headers.get(name)).toBeNull();
  }
}

async function snapshot(url: string): Promise<{ tail: string | null; lastSeq: string | null; closed: string | null; body: string }> {
  const h = await call(url, 'HEAD');
  const body = await call(`${url}?offset=-1`, 'GET');
  return { tail: h.headers.get('stream-next-offset'), lastSeq: h.headers.get('stream-last-seq'), closed: h.headers.get('stream-closed'), body: body.text };
}

async function recreate(url: string, headers: Record<string, string> = TEXT_TYPE, body?: string): Promise<string> {
  expect((await call(url, 'DELETE')).status).toBe(204);
  const res = await call(url, 'PUT', headers, body);
  expect(res.status).toBe(201);
  return res.headers.get('stream-incarnation')!;
}

describe('Every successful response that addresses a stream, except a DELETE, carries Stream-Incarnation', () => {
  it('create, appends, reads, HEAD and SSE all carry the same token; DELETE does not', async () => {
    const { url, token } = await created('every');
    const answers: Array<[string, Answer]> = [];
    answers.push(['PUT again', await call(url, 'PUT', TEXT_TYPE)]);
    answers.push(['append', await call(url, 'POST', TEXT_TYPE, 'abc')]);
    answers.push(['producer append', await call(url, 'POST', { ...TEXT_TYPE, ...producer('p', 0, 0) }, 'de')]);
    answers.push(['duplicate', await call(url, 'POST', { ...TEXT_TYPE, ...producer('p', 0, 0) }, 'de')]);
    answers.push(['append with Stream-Seq', await call(url, 'POST', { ...TEXT_TYPE, 'stream-seq': '1' }, 'f')]);
    const read = await call(`${url}?offset=-1`, 'GET');
    answers.push(['catch-up', read]);
    answers.push(['revalidated catch-up', await call(`${url}?offset=-1`, 'GET', { 'if-none-match': read.headers.get('etag')! })]);
    answers.push(['offset=now', await call(`${url}?offset=now`, 'GET')]);
    answers.push(['long-poll with data', await call(`${url}?offset=${pad(2)}&live=long-poll`, 'GET')]);
    answers.push(['long-poll timeout', await call(`${url}?offset=${pad(6)}&live=long-poll&timeout_ms=50`, 'GET')]);
    answers.push(['HEAD', await call(url, 'HEAD')]);
    answers.push(['close', await call(url, 'POST', { 'stream-closed': 'true' })]);
    answers.push(['close again', await call(url, 'POST', { 'stream-closed': 'true' })]);
    const sse = await openSse(`${url}?offset=-1&live=sse`);
    sse.close();
    expect(answers.map(([label, res]) => [label, res.status])).toEqual([
      ['PUT again', 200],
      ['append', 204],
      ['producer append', 200],
      ['duplicate', 204],
      ['append with Stream-Seq', 204],
      ['catch-up', 200],
      ['revalidated catch-up', 304],
      ['offset=now', 200],
      ['long-poll with data', 200],
      ['long-poll timeout', 204],
      ['HEAD', 200],
      ['close', 204],
      ['close again', 204],
    ]);
    for (const [label, res] of answers) expect([label, res.headers.get('stream-incarnation')]).toEqual([label, token]);
    expect([sse.status, sse.headers.get('stream-incarnation')]).toEqual([200, token]);
    const deleted = await call(url, 'DELETE');
    expect(deleted.status).toBe(204);
    expect(deleted.headers.get('stream-incarnation')).toBeNull();
  });

  it('streams in buckets carry it too, and each stream has its own token', async () => {
    const bucket = `inc-bucket-${counter++}`;
    expect((await call(`${server.url}/${bucket}`, 'PUT')).status).toBe(201);
    const a = await call(`${server.url}/${bucket}/a`, 'PUT', TEXT_TYPE);
    const b = await call(`${server.url}/${bucket}/b`, 'PUT', TEXT_TYPE);
    expect(a.headers.get('stream-incarnation')).toMatch(/\S/);
    expect(b.headers.get('stream-incarnation')).toMatch(/\S/);
    expect(a.headers.get('stream-incarnation')).not.toBe(b.headers.get('stream-incarnation'));
    const append = await call(`${server.url}/${bucket}/a`, 'POST', TEXT_TYPE, 'x');
    expect(append.headers.get('stream-incarnation')).toBe(a.headers.get('stream-incarnation'));
  });

  it('survives a kill -9 and restart unchanged', async () => {
    const dataDir = tempDataDir();
    let own = await startServer({ process: true, dataDir });
    try {
      const first = await call(`${own.url}/v1/stream/durable-token`, 'PUT', TEXT_TYPE);
      const token = first.headers.get('stream-incarnation')!;
      await own.kill();
      own = await startServer({ process: true, dataDir });
      const url = `${own.url}/v1/stream/durable-token`;
      expect((await call(url, 'HEAD', inc(token))).headers.get('stream-incarnation')).toBe(token);
      expect((await call(url, 'POST', { ...TEXT_TYPE, ...inc(token) }, 'x')).status).toBe(204);
    } finally {
      await own.stop();
      removeDir(dataDir);
    }
  });
});

describe('The server compares a sent token for equality and answers 412 with the current token', () => {
  it('accepts every kind of request that sends the current token', async () => {
    const { url, token } = await created('match');
    const h = inc(token);
    expect((await call(url, 'POST', { ...TEXT_TYPE, ...h }, 'ab')).status).toBe(204);
    expect((await call(url, 'POST', { ...TEXT_TYPE, ...h, ...producer('p', 0, 0) }, 'c')).status).toBe(200);
    expect((await call(`${url}?offset=-1`, 'GET', h)).text).toBe('abc');
    expect((await call(`${url}?offset=${pad(1)}&live=long-poll`, 'GET', h)).text).toBe('bc');
    expect((await call(url, 'HEAD', h)).status).toBe(200);
    expect((await call(url, 'PUT', { ...TEXT_TYPE, ...h })).status).toBe(200);
    const sse = await openSse(`${url}?offset=-1&live=sse`, h);
    expect(sse.status).toBe(200);
    sse.close();
    expect((await call(url, 'DELETE', h)).status).toBe(204);
  });

  it('is an opaque token: a token differing in case or truncated is another incarnation', async () => {
    const { url, token } = await created('opaque');
    const flipped = token === token.toUpperCase() ? token.toLowerCase() : token.toUpperCase();
    for (const wrong of [flipped, token.slice(0, -1), `${token} x`, 'x']) {
      if (wrong === token) continue;
      expect412(await call(url, 'HEAD', inc(wrong)), token);
    }
    // A made-up token is not told the stream was recreated: only that it is not the current one.
    const madeUp = await call(url, 'GET', inc('3qL0aQ9x1vY2bT7k'));
    expect(madeUp.text).toContain('does not name the current incarnation');
    expect(madeUp.text).not.toContain('recreated:');
  });

  it('a refused append applies nothing: no bytes, no Stream-Seq, no closure, no Producer-Seq', async () => {
    const { url, token } = await created('append-412');
    const current = await recreate(url);
    expect(current).not.toBe(token);
    const before = await snapshot(url);
    const refusals = [
      await call(url, 'POST', { ...TEXT_TYPE, ...inc(token) }, 'x'),
      await call(url, 'POST', { ...TEXT_TYPE, ...inc(token), 'stream-seq': '5' }, 'x'),
      await call(url, 'POST', { ...TEXT_TYPE, ...inc(token), ...producer('p', 0, 0) }, 'x'),
      await call(url, 'POST', { ...inc(token), 'stream-closed': 'true' }),
      await call(url, 'POST', { ...TEXT_TYPE, ...inc(token), 'stream-closed': 'true' }, 'x'),
    ];
    for (const res of refusals) expect412(res, current);
    expect(await snapshot(url)).toEqual(before);
    // Producer-Seq 0 was not used up: the same write with the right token is new, not a duplicate.
    const write = await call(url, 'POST', { ...TEXT_TYPE, ...inc(current), ...producer('p', 0, 0) }, 'y');
    expect(write.status).toBe(200);
  });

  it('reads, long-polls, SSE, HEAD, DELETE and a PUT of the existing stream answer 412 too, changing nothing', async () => {
    const { url, token } = await created('all-412');
    const current = await recreate(url, TEXT_TYPE, 'new data');
    const h = inc(token);
    expect412(await call(`${url}?offset=-1`, 'GET', h), current);
    expect412(await call(`${url}?offset=now`, 'GET', h), current);
    expect412(await call(`${url}?offset=${pad(8)}&live=long-poll&timeout_ms=50`, 'GET', h), current);
    expect412(await call(`${url}?offset=-1&live=long-poll`, 'GET', h), current);
    expect412(await call(`${url}?offset=-1&live=sse`, 'GET', h), current);
    expect412(await call(url, 'HEAD', h), current);
    expect412(await call(url, 'DELETE', h), current);
    expect412(await call(url, 'PUT', { ...TEXT_TYPE, ...h }), current);
    const still = await call(url, 'HEAD');
    expect([still.status, still.headers.get('stream-incarnation')]).toEqual([200, current]);
    expect((await call(`${url}?offset=-1`, 'GET')).text).toBe('new data');
  });

  it('412 never mixes with the 409s: the stream you knew is gone, whatever else is wrong', async () => {
    const { url, token } = await created('no-mix', JSON_TYPE);
    const current = await recreate(url, { ...JSON_TYPE, 'stream-seq': '5' });
    expect((await call(url, 'POST', { ...JSON_TYPE, ...producer('p', 3, 0) }, '[1]')).status).toBe(200);
    const h = inc(token);
    const cases: Array<[string, Answer]> = [
      ['Stream-Seq conflict', await call(url, 'POST', { ...JSON_TYPE, ...h, 'stream-seq': '5' }, '[2]')],
      ['content type', await call(url, 'POST', { 'content-type': 'text/plain', ...h }, 'x')],
      ['producer gap', await call(url, 'POST', { ...JSON_TYPE, ...h, ...producer('p', 3, 5) }, '[2]')],
      ['stale epoch', await call(url, 'POST', { ...JSON_TYPE, ...h, ...producer('p', 1, 0) }, '[2]')],
      ['duplicate', await call(url, 'POST', { ...JSON_TYPE, ...h, ...producer('p', 3, 0) }, '[1]')],
      ['config conflict', await call(url, 'PUT', { 'content-type': 'text/plain', ...h })],
    ];
    for (const [label, res] of cases) {
      expect([label, res.status]).toEqual([label, 412]);
      expect412(res, current);
    }
    expect((await call(url, 'POST', { 'stream-closed': 'true' })).status).toBe(204);
    expect412(await call(url, 'POST', { ...JSON_TYPE, ...h }, '[3]'), current);
    expect((await readJsonToTail(url)).messages).toEqual([1]);
  });
});

describe('A request that would answer 404 (or, for a read, 410 or 416) without the header still does', () => {
  it('404 for a missing stream, whatever token is sent', async () => {
    const { url, token } = await created('missing');
    expect((await call(url, 'DELETE')).status).toBe(204);
    const h = inc(token);
    const answers = [
      await call(url, 'POST', { ...TEXT_TYPE, ...h }, 'x'),
      await call(`${url}?offset=-1`, 'GET', h),
      await call(`${url}?offset=-1&live=long-poll`, 'GET', h),
      await call(`${url}?offset=-1&live=sse`, 'GET', h),
      await call(url, 'HEAD', h),
      await call(url, 'DELETE', h),
    ];
    expect(answers.map((r) => r.status)).toEqual([404, 404, 404, 404, 404, 404]);
    expect(answers.filter((r) => r.text !== '').map((r) => r.code)).toEqual(Array(5).fill('STREAM_NOT_FOUND'));
  });

  it('410 for a deleted stream whose history a fork still reads', async () => {
    const { url: source, token } = await created('gone-source', TEXT_TYPE, 'history');
    const fork = freshUrl('gone-fork');
    const forked = await call(fork, 'PUT', { 'stream-forked-from': new URL(source).pathname });
    expect(forked.status).toBe(201);
    expect((await call(source, 'DELETE')).status).toBe(204);
    for (const h of [inc(token), inc('another-token')]) {
      expect((await call(`${source}?offset=-1`, 'GET', h)).status).toBe(410);
      expect((await call(source, 'POST', { ...TEXT_TYPE, ...h }, 'x')).status).toBe(410);
    }
    expect((await call(`${fork}?offset=-1`, 'GET')).text).toBe('history');
  });

  it('416 for a read beyond the tail', async () => {
    const { url } = await created('beyond', TEXT_TYPE, 'abc');
    const res = await call(`${url}?offset=${pad(99)}`, 'GET', inc('not-the-token'));
    expect(res.status).toBe(416);
    expect(res.code).toBe('OFFSET_BEYOND_TAIL');
  });
});

describe('Snapshot publish and read, retention, bootstrap, attributes and append-batch', () => {
  /** A text stream with two appends (so offset 3 is a message boundary) and its token. */
  async function withHistory(label: string): Promise<{ url: string; token: string }> {
    const made = await created(label, TEXT_TYPE, 'abc');
    expect((await call(made.url, 'POST', TEXT_TYPE, 'def')).status).toBe(204);
    return made;
  }

  /** An append-batch body: each frame is a u32 big-endian length, then its bytes. */
  function batch(...frames: string[]): Uint8Array<ArrayBuffer> {
    const parts = frames.flatMap((frame) => {
      const length = Buffer.alloc(4);
      length.writeUInt32BE(Buffer.byteLength(frame));
      return [length, Buffer.from(frame)];
    });
    return new Uint8Array(Buffer.concat(parts));
  }

  it('carry the token on every successful answer', async () => {
    const { url, token } = await withHistory('ext-ok');
    const answers: Array<[string, Answer]> = [
      ['publish snapshot', await call(extensionUrl(url, `snapshot/${pad(3)}`), 'PUT', { 'content-type': 'text/plain', ...inc(token) }, 'ABC')],
      ['latest snapshot', await call(extensionUrl(url, 'snapshot'), 'GET', inc(token))],
      ['read snapshot', await call(extensionUrl(url, `snapshot/${pad(3)}`), 'GET', inc(token))],
      ['retention', await call(extensionUrl(url, `retention/${pad(3)}`), 'PUT', inc(token))],
      ['bootstrap', await call(extensionUrl(url, 'bootstrap'), 'GET', inc(token))],
      ['put attrs', await call(extensionUrl(url, 'attrs'), 'PUT', { ...JSON_TYPE, ...inc(token) }, '{"title":"t"}')],
      ['get attrs', await call(extensionUrl(url, 'attrs'), 'GET', inc(token))],
    ];
    const res = await fetch(extensionUrl(url, 'append-batch'), { method: 'POST', headers: { ...TEXT_TYPE, ...inc(token) }, body: batch('g', 'h') });
    expect(answers.map(([label, a]) => [label, a.status, a.headers.get('stream-incarnation')])).toEqual([
      ['publish snapshot', 204, token],
      ['latest snapshot', 307, token],
      ['read snapshot', 200, token],
      ['retention', 204, token],
      ['bootstrap', 200, token],
      ['put attrs', 204, token],
      ['get attrs', 200, token],
    ]);
    expect([res.status, res.headers.get('stream-incarnation')]).toEqual([200, token]);
  });

  it('answer 412 with the current token for another incarnation, and apply nothing', async () => {
    const { url, token: current } = await withHistory('ext-412');
    expect((await call(extensionUrl(url, `snapshot/${pad(3)}`), 'PUT', TEXT_TYPE, 'ABC')).status).toBe(204);
    const h = inc('an-earlier-incarnation');
    expect412(await call(extensionUrl(url, `snapshot/${pad(6)}`), 'PUT', { ...TEXT_TYPE, ...h }, 'ABCDEF'), current);
    expect412(await call(extensionUrl(url, 'snapshot'), 'GET', h), current);
    expect412(await call(extensionUrl(url, `snapshot/${pad(3)}`), 'GET', h), current);
    expect412(await call(extensionUrl(url, `retention/${pad(3)}`), 'PUT', h), current);
    expect412(await call(extensionUrl(url, 'bootstrap'), 'GET', h), current);
    expect412(await call(extensionUrl(url, 'attrs'), 'PUT', { ...JSON_TYPE, ...h }, '{"title":"t"}'), current);
    expect412(await call(extensionUrl(url, 'attrs'), 'GET', h), current);
    const frames = await fetch(extensionUrl(url, 'append-batch'), { method: 'POST', headers: { ...TEXT_TYPE, ...h }, body: batch('x') });
    expect(frames.status).toBe(412);
    expect(frames.headers.get('stream-incarnation')).toBe(current);
    // Nothing applied: the snapshot is still the one at 3, retention did not move, no attributes, no bytes.
    const latest = await call(extensionUrl(url, 'snapshot'), 'GET');
    expect(latest.headers.get('stream-snapshot-offset')).toBe(pad(3));
    expect((await call(`${url}?offset=-1`, 'GET')).text).toBe('abcdef');
    expect((await call(extensionUrl(url, 'attrs'), 'GET')).text).toBe('{}');
  });

  it('answer 404 for a missing stream or a missing snapshot, whatever token is sent', async () => {
    const { url, token } = await withHistory('ext-404');
    const h = inc('an-earlier-incarnation');
    const noSnapshot = [await call(extensionUrl(url, 'snapshot'), 'GET', h), await call(extensionUrl(url, `snapshot/${pad(3)}`), 'GET', h)];
    expect(noSnapshot.map((r) => [r.status, r.code])).toEqual([
      [404, 'SNAPSHOT_NOT_FOUND'],
      [404, 'SNAPSHOT_NOT_FOUND'],
    ]);
    expect((await call(url, 'DELETE')).status).toBe(204);
    const gone = [
      await call(extensionUrl(url, `snapshot/${pad(0)}`), 'PUT', { ...TEXT_TYPE, ...inc(token) }, 'x'),
      await call(extensionUrl(url, 'snapshot'), 'GET', inc(token)),
      await call(extensionUrl(url, `retention/${pad(0)}`), 'PUT', inc(token)),
      await call(extensionUrl(url, 'bootstrap'), 'GET', inc(token)),
      await call(extensionUrl(url, 'attrs'), 'PUT', { ...JSON_TYPE, ...inc(token) }, '{}'),
      await call(extensionUrl(url, 'attrs'), 'GET', inc(token)),
    ];
    expect(gone.map((r) => r.status)).toEqual([404, 404, 404, 404, 404, 404]);
  });

  it('a recreated stream starts without the old snapshot, retention point or attributes', async () => {
    const { url, token } = await withHistory('ext-fresh');
    expect((await call(extensionUrl(url, `snapshot/${pad(3)}`), 'PUT', TEXT_TYPE, 'ABC')).status).toBe(204);
    expect((await call(extensionUrl(url, `retention/${pad(3)}`), 'PUT')).status).toBe(204);
    expect((await call(extensionUrl(url, 'attrs'), 'PUT', JSON_TYPE, '{"title":"old"}')).status).toBe(204);
    const fresh = await recreate(url, TEXT_TYPE, 'new');
    expect(fresh).not.toBe(token);
    expect((await call(extensionUrl(url, 'snapshot'), 'GET')).status).toBe(404);
    expect((await call(url, 'HEAD')).headers.get('stream-earliest-offset')).toBeNull();
    expect((await call(`${url}?offset=-1`, 'GET')).text).toBe('new');
    expect((await call(extensionUrl(url, 'attrs'), 'GET')).text).toBe('{}');
  });
});

describe('A PUT with the header for a missing stream answers 412 and creates nothing', () => {
  it('refuses to create a stream at a name that never existed', async () => {
    const url = freshUrl('put-missing');
    const res = await call(url, 'PUT', { ...TEXT_TYPE, ...inc('anything') });
    expect(res.status).toBe(412);
    expect(res.code).toBe('INCARNATION_MISMATCH');
    expect(res.headers.get('stream-incarnation')).toBeNull();
    expect((await call(url, 'HEAD')).status).toBe(404);
  });

  it('refuses to recreate a deleted stream for a client that still holds the old token', async () => {
    const { url, token } = await created('put-deleted');
    expect((await call(url, 'DELETE')).status).toBe(204);
    expect((await call(url, 'PUT', { ...TEXT_TYPE, ...inc(token) })).status).toBe(412);
    expect((await call(url, 'HEAD')).status).toBe(404);
  });

  it('a missing bucket still answers 404', async () => {
    const res = await call(`${server.url}/no-such-bucket-${counter++}/s`, 'PUT', { ...TEXT_TYPE, ...inc('x') });
    expect([res.status, res.code]).toEqual([404, 'BUCKET_NOT_FOUND']);
  });
});

describe('A stream recreated at the same URL is another incarnation with fresh state', () => {
  async function fillOldState(url: string, token: string): Promise<void> {
    expect((await call(url, 'POST', { ...TEXT_TYPE, ...inc(token), 'stream-seq': pad(9) }, 'old')).status).toBe(204);
    expect((await call(url, 'POST', { ...TEXT_TYPE, ...producer('p', 4, 0) }, '!')).status).toBe(200);
    expect((await call(url, 'POST', { ...TEXT_TYPE, ...producer('p', 4, 1) }, '!')).status).toBe(200);
  }

  async function expectFresh(url: string, oldToken: string, newToken: string): Promise<void> {
    expect(newToken).not.toBe(oldToken);
    const h = await call(url, 'HEAD');
    expect(h.headers.get('stream-incarnation')).toBe(newToken);
    expect(h.headers.get('stream-last-seq')).toBeNull();
    expect(h.headers.get('stream-next-offset')).toBe(pad(0));
    expect412(await call(url, 'POST', { ...TEXT_TYPE, ...inc(oldToken) }, 'x'), newToken);
    // Fresh Stream-Seq state: a value below the old stream's is accepted.
    expect((await call(url, 'POST', { ...TEXT_TYPE, ...inc(newToken), 'stream-seq': pad(1) }, 'new')).status).toBe(204);
    // Fresh producer state: epoch 0 is not fenced by the old stream's epoch 4, and seq 0 is new.
    const p = await call(url, 'POST', { ...TEXT_TYPE, ...producer('p', 0, 0) }, '?');
    expect([p.status, p.headers.get('producer-epoch'), p.headers.get('producer-seq')]).toEqual([200, '0', '0']);
    expect((await call(`${url}?offset=-1`, 'GET', inc(newToken))).text).toBe('new?');
  }

  it('after DELETE and PUT', async () => {
    const { url, token } = await created('recreate');
    await fillOldState(url, token);
    const fresh = await recreate(url);
    await expectFresh(url, token, fresh);
  });

  it('after TTL expiry and a later PUT', async () => {
    const url = freshUrl('ttl');
    const first = await call(url, 'PUT', { ...TEXT_TYPE, 'stream-ttl': '60' });
    const token = first.headers.get('stream-incarnation')!;
    await fillOldState(url, token);
    clock.advance(30_000);
    expect((await call(url, 'HEAD')).status).toBe(200); // HEAD does not renew the TTL...
    clock.advance(30_500);
    expect((await call(url, 'HEAD')).status).toBe(404); // ...so 60 s after the last access the stream has expired
    const again = await call(url, 'PUT', TEXT_TYPE);
    expect(again.status).toBe(201);
    await expectFresh(url, token, again.headers.get('stream-incarnation')!);
  });

  it('every creation gets a token never used before', async () => {
    const url = freshUrl('many');
    const seen = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const res = await call(url, 'PUT', TEXT_TYPE);
      expect(res.status).toBe(201);
      seen.add(res.headers.get('stream-incarnation')!);
      expect((await call(url, 'DELETE')).status).toBe(204);
    }
    expect(seen.size).toBe(20);
  });
});

describe('Live readers never carry one incarnation\'s token with another incarnation\'s data', () => {
  it('a long-poll with the token, waiting while the stream is deleted and recreated, answers 404 or 412, never new data', async () => {
    for (let round = 0; round < 3; round++) {
      const { url, token } = await created('lp-recreate', TEXT_TYPE, 'hello');
      const waiting = call(`${url}?offset=${pad(5)}&live=long-poll&timeout_ms=2000`, 'GET', inc(token));
      await untilLiveReader(url);
      const fresh = await pipelinedRecreate(server.port, new URL(url).pathname, 'text/plain', 'new stream data');
      const res = await waiting;
      expect([404, 412]).toContain(res.status);
      if (res.status === 412) expect(res.headers.get('stream-incarnation')).toBe(fresh);
    }
  });

  it('an SSE connection ends when its stream is deleted and recreated, and sends nothing of the new stream', async () => {
    for (const withToken of [false, true]) {
      for (let round = 0; round < 3; round++) {
        const { url, token } = await created('sse-recreate', TEXT_TYPE, 'hello');
        const sse = await openSse(`${url}?offset=now&live=sse`, withToken ? inc(token) : {});
        expect(sse.headers.get('stream-incarnation')).toBe(token);
        await sse.until((events) => events.some((e) => e.event === 'control'));
        const fresh = await pipelinedRecreate(server.port, new URL(url).pathname, 'text/plain', 'NEW STREAM DATA');
        expect(fresh).toBeDefined();
        expect(fresh).not.toBe(token);
        expect((await call(url, 'HEAD')).headers.get('stream-incarnation')).toBe(fresh);
        const ended = await sse.ended(3_000);
        const events = await sse.until(() => true, 0);
        sse.close();
        const data = events.filter((e) => e.event === 'data').map((e) => e.data).join('');
        expect(data).toBe('');
        expect(ended).toBe(true);
      }
    }
  });

  it('a long-poll waiting on a stream that is deleted and recreated answers 412, never the new stream\'s bytes', async () => {
    for (const withToken of [false, true]) {
      const { url, token } = await created('lp-recreate', TEXT_TYPE, 'hello');
      const waiting = call(`${url}?offset=now&live=long-poll&timeout_ms=5000`, 'GET', withToken ? inc(token) : {});
      await untilLiveReader(url);
      const fresh = await pipelinedRecreate(server.port, new URL(url).pathname, 'text/plain', 'NEW STREAM DATA');
      expect(fresh).not.toBe(token);
      const answer = await waiting;
      expect(answer.status).toBe(412);
      expect(answer.code).toBe('INCARNATION_MISMATCH');
      expect(answer.headers.get('stream-incarnation')).toBe(fresh);
      expect(answer.text).not.toContain('NEW STREAM');
    }
  });
});

describe('Caches cannot answer for a stream that was recreated', () => {
  it('history reads vary on Stream-Incarnation, and a reader that sends it is revalidated every time', async () => {
    const { url, token } = await created('cache-vary', TEXT_TYPE, 'old history');
    await call(url, 'POST', TEXT_TYPE, ' more');
    const partial = await call(`${url}?offset=-1&max_bytes=3`, 'GET');
    expect(partial.headers.get('cache-control')).toContain('public');
    expect(partial.headers.get('vary')).toContain('Stream-Incarnation');
    const named = await call(`${url}?offset=-1&max_bytes=3`, 'GET', inc(token));
    expect(named.headers.get('cache-control')).toBe('private, no-cache');
    expect(named.headers.get('vary')).toContain('Stream-Incarnation');
  });
});
