/**
 * Path affinity (Ursula's extensions, 1.7) against a real server: every stream operation
 * on `/{bucket}/{affinity_key}/{stream}`, streams that share a local name kept apart, the
 * 122-byte identity `{bucket}/{affinity_key}/{stream}`, reserved local names, the
 * `path-affinity-v1` token on every answer on the affinity form and on none on the plain
 * form, and how bucket listings show affinity streams (`{affinity_key}/{stream}`).
 * Routing alone is tested in test/protocol/affinity-routing.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { frames } from '../helpers/http.js';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { sseBlocks } from '../helpers/sse.js';
import { untilLiveReaders } from '../helpers/waits.js';
import { call, expectRefusal, offset, unique, type CallOptions, type Reply } from './client.js';

const TOKEN = 'path-affinity-v1';
const RECORDS_TOKEN = 'json-record-coordinates-v1';
const TEXT = { 'content-type': 'text/plain' };
const JSON_TYPE = { 'content-type': 'application/json' };

let server: RunningServer;
let bucket: string;
const http = (method: string, path: string, options: CallOptions = {}) => call(server.url, method, path, options);

beforeAll(async () => {
  server = await startServer();
  bucket = unique('aff');
  expect((await http('PUT', `/${bucket}`)).status).toBe(201);
});
afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

/** The tokens of an answer's Stream-Extensions, in order; none without the header. */
function tokens(reply: Reply): string[] {
  const value = reply.headers['stream-extensions'];
  return value === undefined ? [] : value.split(',').map((t) => t.trim());
}

/** Asserts the answer advertises path affinity, and answers it for chaining. */
function affine(reply: Reply, what = ''): Reply {
  expect(tokens(reply), `${what} ${reply.status} ${reply.text()}`).toContain(TOKEN);
  return reply;
}

/** Asserts the answer does not advertise path affinity. */
function plain(reply: Reply, what = ''): Reply {
  expect(tokens(reply), `${what} ${reply.status}`).not.toContain(TOKEN);
  return reply;
}

/** A fresh affinity key, and the path of `local` under it. */
function affinityPath(local = 'journal', key = unique('run')): string {
  return `/${bucket}/${key}/${local}`;
}

const lines = (reply: Reply) => reply.text().split('\n').filter((l) => l !== '');

describe('stream operations on the affinity form', () => {
  it('create, append, read, HEAD, close and DELETE answer as on the plain form, each with the token', async () => {
    const path = affinityPath();
    const created = affine(await http('PUT', path, { headers: TEXT }), 'create');
    expect([created.status, created.headers['location'], created.headers['stream-next-offset']]).toEqual([201, `${server.url}${path}`, offset(0)]);
    expect(affine(await http('PUT', path, { headers: TEXT })).status).toBe(200);
    const a1 = affine(await http('POST', path, { headers: TEXT, body: 'hello ' }));
    expect([a1.status, a1.headers['stream-offset'], a1.headers['stream-next-offset']]).toEqual([204, offset(0), offset(6)]);
    affine(await http('POST', path, { headers: TEXT, body: 'world' }));
    const all = affine(await http('GET', `${path}?offset=-1`));
    expect([all.status, all.text(), all.headers['content-type'], all.headers['stream-up-to-date']]).toEqual([200, 'hello world', 'text/plain', 'true']);
    expect(affine(await http('GET', `${path}?offset=${offset(6)}`)).text()).toBe('world');
    const head = affine(await http('HEAD', path));
    expect([head.status, head.body.length, head.headers['stream-next-offset']]).toEqual([200, 0, offset(11)]);
    const closed = affine(await http('POST', path, { headers: { 'stream-closed': 'true' } }));
    expect([closed.status, closed.headers['stream-closed']]).toEqual([204, 'true']);
    expectRefusal(affine(await http('POST', path, { headers: TEXT, body: '!' })), 'STREAM_CLOSED');
    expect(affine(await http('DELETE', path)).status).toBe(204);
    for (const method of ['GET', 'POST', 'DELETE']) {
      expectRefusal(affine(await http(method, path, method === 'POST' ? { headers: TEXT, body: 'x' } : {}), method), 'STREAM_NOT_FOUND');
    }
    expect(affine(await http('HEAD', path)).status).toBe(404);
  });

  it('refusals before the stream is looked up (405, bad headers) carry the token too', async () => {
    const path = affinityPath();
    expectRefusal(affine(await http('PATCH', path)), 'METHOD_NOT_ALLOWED');
    expectRefusal(affine(await http('PUT', path, { headers: { ...TEXT, 'stream-ttl': '-1' } })), 'INVALID_TTL');
    expectRefusal(affine(await http('GET', `${path}?offset=abc`)), 'INVALID_OFFSET');
  });

  it('producer headers and Stream-Seq work: receipts, duplicates, gaps and sequence conflicts', async () => {
    const path = affinityPath('producer');
    affine(await http('PUT', path, { headers: TEXT }));
    const producer = (seq: number) => ({ ...TEXT, 'producer-id': 'p1', 'producer-epoch': '0', 'producer-seq': String(seq) });
    const first = affine(await http('POST', path, { headers: producer(0), body: 'a' }));
    expect([first.status, first.headers['producer-epoch'], first.headers['producer-seq'], first.headers['stream-next-offset']]).toEqual([200, '0', '0', offset(1)]);
    const duplicate = affine(await http('POST', path, { headers: producer(0), body: 'a' }));
    expect([duplicate.status, duplicate.headers['producer-seq']]).toEqual([204, '0']);
    expectRefusal(affine(await http('POST', path, { headers: producer(5), body: 'c' })), 'PRODUCER_SEQ_GAP');
    expect(affine(await http('POST', path, { headers: { ...TEXT, 'stream-seq': '001' }, body: 'b' })).status).toBe(204);
    expectRefusal(affine(await http('POST', path, { headers: { ...TEXT, 'stream-seq': '001' }, body: 'x' })), 'STREAM_SEQ_CONFLICT');
    const head = affine(await http('HEAD', path));
    expect(head.headers['stream-last-seq']).toBe('001');
    expect((await http('GET', `${path}?offset=-1`)).text()).toBe('ab');
  });

  it('a JSON stream has record coordinates: both tokens, Stream-Record-Start/Next on appends, ?record= reads', async () => {
    const path = affinityPath('events');
    const created = await http('PUT', path, { headers: JSON_TYPE, body: '[{"n":0},{"n":1}]' });
    expect(created.status).toBe(201);
    expect(tokens(created)).toEqual([TOKEN, RECORDS_TOKEN]);
    const appended = await http('POST', path, { headers: JSON_TYPE, body: '[{"n":2},{"n":3}]' });
    expect([appended.status, appended.headers['stream-record-start'], appended.headers['stream-record-next']]).toEqual([204, '2', '4']);
    expect(tokens(appended)).toEqual([TOKEN, RECORDS_TOKEN]);
    const matched = await http('POST', path, { headers: { ...JSON_TYPE, 'stream-record-match': '3' }, body: '{"n":4}' });
    expectRefusal(affine(matched), 'RECORD_MATCH_FAILED');
    const read = affine(await http('GET', `${path}?record=1&max_records=2`));
    expect([read.status, read.headers['stream-record-start'], read.headers['stream-record-next']]).toEqual([200, '1', '3']);
    expect(lines(read)).toEqual(['{"n":1}', '{"n":2}']);
    const head = affine(await http('HEAD', path));
    expect([head.headers['stream-record-first'], head.headers['stream-record-next']]).toEqual(['0', '4']);
  });

  it('a long-poll read is woken by an append and answers with the token', async () => {
    const path = affinityPath('live');
    affine(await http('PUT', path, { headers: TEXT, body: 'old' }));
    const waiting = http('GET', `${path}?offset=${offset(3)}&live=long-poll`);
    await untilLiveReaders(server.url, 'long_poll', 1);
    affine(await http('POST', path, { headers: TEXT, body: 'new' }));
    const reply = affine(await waiting);
    expect([reply.status, reply.text(), reply.headers['stream-next-offset']]).toEqual([200, 'new', offset(6)]);
  });

  it('an SSE read sends the data with the token on its answer', async () => {
    const path = affinityPath('sse');
    affine(await http('PUT', path, { headers: TEXT, body: 'over sse' }));
    const { extensions, data } = await firstSseData(`${server.url}${path}?offset=-1&live=sse`);
    expect(extensions).toContain(TOKEN);
    expect(data).toBe('over sse');
  });
});

/** The Stream-Extensions header of an SSE answer and the data of its first data event. */
async function firstSseData(url: string): Promise<{ extensions: string; data: string }> {
  const abort = new AbortController();
  try {
    const res = await fetch(url, { signal: abort.signal });
    expect(res.status).toBe(200);
    const extensions = res.headers.get('stream-extensions') ?? '';
    for await (const block of sseBlocks(res)) {
      if (!block.startsWith('event: data')) continue;
      const data = block
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).replace(/^ /, ''))
        .join('\n');
      return { extensions, data };
    }
    throw new Error('the SSE answer ended without a data event');
  } finally {
    abort.abort();
  }
}

describe('sub-resources of an affinity stream', () => {
  it('attributes, append-batch, stats and producers, each answered with the token', async () => {
    const path = affinityPath('subs');
    affine(await http('PUT', path, { headers: TEXT }));
    expect(affine(await http('PUT', `${path}/attrs`, { headers: JSON_TYPE, body: '{"title":"Run"}' })).status).toBe(204);
    expect(affine(await http('GET', `${path}/attrs`)).json()).toEqual({ title: 'Run' });
    const batch = affine(await http('POST', `${path}/append-batch`, { headers: TEXT, body: frames('ab', 'cd') }));
    expect(batch.status).toBe(200);
    expect((batch.json() as Array<{ status: number }>).map((a) => a.status)).toEqual([204, 204]);
    const stats = affine(await http('GET', `${path}/stats`));
    expect(stats.json()).toMatchObject({ tail: '00000000000000000004', bytes: 4, closed: false });
    expect(affine(await http('GET', `${path}/producers`)).json()).toEqual({ producers: [], next: null });
    expect((await http('GET', `${path}?offset=-1`)).text()).toBe('abcd');
  });

  it('snapshot, retention and bootstrap, each answered with the token', async () => {
    const path = affinityPath('snap');
    affine(await http('PUT', path, { headers: TEXT, body: 'aaaa' }));
    affine(await http('POST', path, { headers: TEXT, body: 'bb' }));
    const published = affine(await http('PUT', `${path}/snapshot/${offset(4)}`, { headers: TEXT, body: 'STATE' }));
    expect([published.status, published.headers['stream-snapshot-offset']]).toEqual([204, offset(4)]);
    expect(affine(await http('GET', `${path}/snapshot/${offset(4)}`)).text()).toBe('STATE');
    expect(affine(await http('PUT', `${path}/retention/${offset(4)}`)).status).toBe(204);
    expectRefusal(affine(await http('GET', `${path}?offset=-1`)), 'OFFSET_TRIMMED');
    const boot = affine(await http('GET', `${path}/bootstrap`));
    expect(boot.status).toBe(200);
    expect(boot.headers['content-type']).toMatch(/^multipart\/mixed/);
    expect(boot.text()).toContain('STATE');
    expect(boot.text()).toContain('bb');
  });

  it('forks: an affinity stream forks a plain one and the reverse, by path or URL', async () => {
    const source = affinityPath('src');
    affine(await http('PUT', source, { headers: TEXT, body: 'shared' }));
    const affinityFork = affinityPath('fork');
    const plainFork = `/${bucket}/${unique('plainfork')}`;
    expect(affine(await http('PUT', affinityFork, { headers: { 'stream-forked-from': source } })).status).toBe(201);
    expect(plain(await http('PUT', plainFork, { headers: { 'stream-forked-from': `${server.url}${source}` } })).status).toBe(201);
    await http('POST', affinityFork, { headers: TEXT, body: '+a' });
    await http('POST', plainFork, { headers: TEXT, body: '+p' });
    const backFork = affinityPath('back');
    expect(affine(await http('PUT', backFork, { headers: { 'stream-forked-from': plainFork } })).status).toBe(201);
    expect((await http('GET', `${affinityFork}?offset=-1`)).text()).toBe('shared+a');
    expect((await http('GET', `${plainFork}?offset=-1`)).text()).toBe('shared+p');
    expect((await http('GET', `${backFork}?offset=-1`)).text()).toBe('shared+p');
    expect((await http('GET', `${source}?offset=-1`)).text()).toBe('shared');
  });
});

describe('identity', () => {
  it('two affinity keys with one stream name, the plain stream of that name, and the plain stream named like the key are four streams', async () => {
    const name = unique('same');
    const [k1, k2] = [unique('k1'), unique('k2')];
    const paths = [`/${bucket}/${k1}/${name}`, `/${bucket}/${k2}/${name}`, `/${bucket}/${name}`, `/${bucket}/${k1}`];
    for (const [i, path] of paths.entries()) expect((await http('PUT', path, { headers: TEXT, body: `body ${i}` })).status, path).toBe(201);
    for (const [i, path] of paths.entries()) expect((await http('GET', `${path}?offset=-1`)).text(), path).toBe(`body ${i}`);
    expect((await http('DELETE', paths[0]!)).status).toBe(204);
    for (const [i, path] of paths.slice(1).entries()) expect((await http('GET', `${path}?offset=-1`)).text(), path).toBe(`body ${i + 1}`);
  });

  it('{bucket}/{affinity_key}/{stream} of 122 bytes is accepted, of 123 refused with INVALID_ID, counting bytes', async () => {
    const key = 'kk';
    const room = 122 - Buffer.byteLength(`${bucket}/${key}/`);
    expect(room).toBeGreaterThan(2);
    expect((await http('PUT', `/${bucket}/${key}/${'s'.repeat(room)}`, { headers: TEXT })).status).toBe(201);
    expectRefusal(await http('PUT', `/${bucket}/${key}/${'s'.repeat(room + 1)}`, { headers: TEXT }), 'INVALID_ID');
    // é is two bytes in UTF-8: one more byte than the room is refused however the characters count.
    const odd = room % 2 === 1;
    const accented = 'é'.repeat(Math.floor(room / 2)) + (odd ? 's' : '');
    expect((await http('PUT', `/${bucket}/${key}/${encodeURIComponent(accented)}`, { headers: TEXT })).status).toBe(201);
    expectRefusal(await http('PUT', `/${bucket}/${key}/${encodeURIComponent(accented + 's')}`, { headers: TEXT }), 'INVALID_ID');
    // The limit counts the key as well: moving a byte from the stream to the key changes nothing.
    expect((await http('PUT', `/${bucket}/${key}k/${'s'.repeat(room - 1)}`, { headers: TEXT })).status).toBe(201);
    expectRefusal(await http('PUT', `/${bucket}/${key}k/${'s'.repeat(room)}`, { headers: TEXT }), 'INVALID_ID');
  });

  it('reserved local names and keys are refused with INVALID_ID; nothing is created', async () => {
    const key = unique('res');
    for (const local of ['keyed-state', 'streams', '__ds']) {
      expectRefusal(await http('PUT', `/${bucket}/${key}/${local}`, { headers: TEXT }), 'INVALID_ID');
    }
    expectRefusal(await http('PUT', `/${bucket}/streams/journal`, { headers: TEXT }), 'INVALID_ID');
    expectRefusal(await http('PUT', `/${bucket}/${key}/a..b`, { headers: TEXT }), 'INVALID_ID');
    expectRefusal(await http('PUT', `/${bucket}/${key}/$transaction`, { headers: TEXT }), 'METHOD_NOT_ALLOWED');
    expect(await listing(`?prefix=${key}`)).toEqual([]);
  });

  it('a keyword third segment is a sub-resource of the plain stream named like the key, answered without the token', async () => {
    const key = unique('kw');
    expectRefusal(plain(await http('GET', `/${bucket}/${key}/attrs`)), 'STREAM_NOT_FOUND');
    plain(await http('PUT', `/${bucket}/${key}`, { headers: TEXT }));
    expect(plain(await http('GET', `/${bucket}/${key}/attrs`)).json()).toEqual({});
    expect(plain(await http('PUT', `/${bucket}/${key}/snapshot/${offset(0)}`, { body: 'S' })).status).toBe(204);
  });
});

describe('the plain form', () => {
  it('never advertises path affinity, on answers of every kind', async () => {
    const path = `/${bucket}/${unique('plain')}`;
    const json = `/${bucket}/${unique('plainjson')}`;
    const answers = [
      await http('PUT', path, { headers: TEXT, body: 'x' }),
      await http('POST', path, { headers: TEXT, body: 'y' }),
      await http('GET', `${path}?offset=-1`),
      await http('HEAD', path),
      await http('PUT', `${path}/attrs`, { headers: JSON_TYPE, body: '{}' }),
      await http('GET', `${path}/stats`),
      await http('PATCH', path),
      await http('PUT', json, { headers: JSON_TYPE, body: '[1]' }),
      await http('DELETE', path),
      await http('GET', `${path}?offset=-1`),
    ];
    for (const answer of answers) plain(answer);
    expect(tokens(answers[7]!)).toEqual([RECORDS_TOKEN]);
  });
});

/** The names `GET /{bucket}/streams{query}` lists. */
async function listing(query: string): Promise<string[]> {
  const reply = await http('GET', `/${bucket}/streams${query}`);
  expect(reply.status, reply.text()).toBe(200);
  return (reply.json() as { streams: string[] }).streams;
}

describe('bucket listings', () => {
  it('show an affinity stream as {affinity_key}/{stream}, sorted with the others; prefix and after apply to that path', async () => {
    const other = await freshBucket();
    const put = (path: string) => http('PUT', `/${other}/${path}`, { headers: TEXT });
    for (const path of ['run-1/queue', 'run-1/journal', 'run-1', 'run-10', 'run-2/journal']) expect((await put(path)).status, path).toBe(201);
    const list = async (query: string) => (await http('GET', `/${other}/streams${query}`)).json();
    expect(await list('')).toEqual({ bucket: other, streams: ['run-1', 'run-1/journal', 'run-1/queue', 'run-10', 'run-2/journal'], next: null });
    expect(await list('?prefix=run-1/')).toEqual({ bucket: other, streams: ['run-1/journal', 'run-1/queue'], next: null });
    expect(await list('?limit=2&after=run-1')).toEqual({ bucket: other, streams: ['run-1/journal', 'run-1/queue'], next: 'run-1/queue' });
    expect((await http('GET', `/${other}`)).json()).toMatchObject({ streamCount: 5 });
  });

  it('a bucket holding only an affinity stream is not empty', async () => {
    const other = await freshBucket();
    expect((await http('PUT', `/${other}/key/s`, { headers: TEXT })).status).toBe(201);
    expectRefusal(await http('DELETE', `/${other}`), 'BUCKET_NOT_EMPTY');
    expect((await http('DELETE', `/${other}/key/s`)).status).toBe(204);
    expect((await http('DELETE', `/${other}`)).status).toBe(204);
  });
});

async function freshBucket(): Promise<string> {
  const id = unique('affl');
  expect((await http('PUT', `/${id}`)).status).toBe(201);
  return id;
}
