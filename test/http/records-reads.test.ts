/**
 * JSON record coordinates, the reading side (Ursula's extensions, section 6): record-aware
 * reads start where a record starts and hold whole records only, name their place by
 * ordinal and by offset at the same boundary, expose the same messages as offset reads,
 * and compose with long-poll and SSE; retention, snapshots, bootstrap and forks keep
 * every surviving record's ordinal.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrapParts, get } from '../helpers/http.js';
import { seededRandom } from '../helpers/seed.js';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { sseBlocks } from '../helpers/sse.js';
import { untilLiveReaders } from '../helpers/waits.js';
import { call, expectRefusal, offset, unique, type Reply } from './client.js';
import { extensionUrl } from '../../src/protocol/extensions.js';

const JSON_TYPE = { 'content-type': 'application/json' };

let server: RunningServer;
const http = (method: string, path: string, headers: Record<string, string> = {}, body?: string | Buffer) => call(server.url, method, path, { headers, body });

beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

async function jsonStream(...bodies: string[]): Promise<string> {
  const path = `/v1/stream/${unique('rr')}`;
  const [first, ...rest] = bodies;
  expect((await http('PUT', path, JSON_TYPE, first)).status).toBe(201);
  for (const body of rest) expect((await http('POST', path, JSON_TYPE, body)).status).toBe(204);
  return path;
}

const lines = (reply: Reply) => reply.text().split('\n').filter((l) => l !== '');
const coords = (reply: Reply) => ({
  first: Number(reply.headers['stream-record-first']),
  start: Number(reply.headers['stream-record-start']),
  next: Number(reply.headers['stream-record-next']),
  offset: reply.headers['stream-next-offset'],
});

describe('record-aware catch-up reads', () => {
  it('starts at record=<n>, record=now and tail_records=<k>, and stops after max_records', async () => {
    const path = await jsonStream('[0,1,2,3,4,5,6,7,8,9]');
    const from4 = await http('GET', `${path}?record=4&max_records=3`);
    expect(from4.status).toBe(200);
    expect(from4.headers['content-type']).toBe('application/x-ndjson');
    expect(lines(from4)).toEqual(['4', '5', '6']);
    expect(coords(from4)).toEqual({ first: 0, start: 4, next: 7, offset: offset(14) });
    const now = await http('GET', `${path}?record=now`);
    expect(now.status).toBe(200);
    expect(now.text()).toBe('');
    expect(coords(now)).toEqual({ first: 0, start: 10, next: 10, offset: offset(20) });
    expect(now.headers['stream-up-to-date']).toBe('true');
    expect(lines(await http('GET', `${path}?tail_records=3`))).toEqual(['7', '8', '9']);
    const all = await http('GET', `${path}?tail_records=50`);
    expect(coords(all).start).toBe(0);
    expect(lines(all)).toHaveLength(10);
    const zero = await http('GET', `${path}?tail_records=0`);
    expect(coords(zero)).toMatchObject({ start: 10, next: 10 });
    const atTail = await http('GET', `${path}?record=10`);
    expect(atTail.status).toBe(200);
    expect(coords(atTail)).toMatchObject({ start: 10, next: 10 });
  });

  it('refuses a record past the tail (400) and below the first retained one (410), with both tails', async () => {
    const path = await jsonStream('[0,1,2]');
    const beyond = await http('GET', `${path}?record=4`);
    expectRefusal(beyond, 'RECORD_BEYOND_TAIL');
    expect(beyond.headers['stream-record-next']).toBe('3');
    expect((await http('PUT', extensionUrl(path, 'snapshot', 'record=2'), JSON_TYPE, '{}')).status).toBe(204);
    const retained = await http('PUT', extensionUrl(path, 'retention', 'record=2'));
    expect(retained.status).toBe(204);
    expect(retained.headers['stream-record-first']).toBe('2');
    const gone = await http('GET', `${path}?record=1`);
    expectRefusal(gone, 'RECORD_TRIMMED');
    expect([gone.headers['stream-record-first'], gone.headers['stream-record-next']]).toEqual(['2', '3']);
    // Surviving records keep their ordinals.
    expect(lines(await http('GET', `${path}?record=2`))).toEqual(['2']);
    expect(coords(await http('GET', `${path}?tail_records=9`)).start).toBe(2);
  });

  it('refuses the combinations the extension forbids, and record reads of streams without records', async () => {
    const path = await jsonStream('[0,1]');
    for (const query of [`record=0&offset=${offset(0)}`, 'record=0&tail_records=1', 'max_records=1', 'record_view=envelope', `offset=-1&max_records=2`, 'record=-1', 'record=01', 'record=x', 'tail_records=-2', 'record=0&max_records=0', 'record=0&record_view=plain']) {
      const reply = await http('GET', `${path}?${query}`);
      expectRefusal(reply, 'INVALID_QUERY');
      expect(reply.headers['stream-extensions'], query).toBe('json-record-coordinates-v1');
    }
    const text = `/v1/stream/${unique('text')}`;
    await http('PUT', text, { 'content-type': 'text/plain' }, 'abc');
    expectRefusal(await http('GET', `${text}?record=0`), 'RECORDS_NOT_ACTIVE');
  });

  it('max_bytes bounds whole records, and a record larger than it (or the 4 MiB read window) comes whole', async () => {
    const big = JSON.stringify({ big: 'x'.repeat(5 * 1024 * 1024) });
    const path = await jsonStream(`[1,2,${big},3]`);
    const small = await http('GET', `${path}?record=0&max_bytes=3`);
    expect(lines(small)).toEqual(['1']);
    expect(coords(small)).toMatchObject({ start: 0, next: 1 });
    const two = await http('GET', `${path}?record=0&max_bytes=4`);
    expect(lines(two)).toEqual(['1', '2']);
    const whole = await http('GET', `${path}?record=2&max_bytes=10`);
    expect(lines(whole)).toEqual([big]);
    expect(coords(whole)).toMatchObject({ start: 2, next: 3 });
    const unbounded = await http('GET', `${path}?record=2`);
    expect(lines(unbounded)).toEqual([big]);
    const both = await http('GET', `${path}?record=0&max_bytes=100000&max_records=2`);
    expect(lines(both)).toEqual(['1', '2']);
  });

  it('pages through a random stream by record, meeting offset reads at every boundary', async () => {
    const rng = seededRandom();
    const path = await jsonStream('[]');
    const expected: string[] = [];
    for (let i = 0; i < 60; i++) {
      const values = Array.from({ length: rng.int(1, 8) }, (_, k) => JSON.stringify({ i, k, pad: 'p'.repeat(rng.int(0, 900)) }));
      expected.push(...values);
      expect((await http('POST', path, JSON_TYPE, `[${values.join(',')}]`)).status).toBe(204);
    }
    const seen: string[] = [];
    let record = 0;
    while (record < expected.length) {
      const page = await http('GET', `${path}?record=${record}&max_records=${rng.int(1, 25)}`);
      expect(coords(page).start).toBe(record);
      seen.push(...lines(page));
      record = coords(page).next;
      expect(record).toBe(seen.length);
      // The offset read from the answer's offset starts with the record the answer names next.
      const byOffset = await http('GET', `${path}?offset=${coords(page).offset}&max_bytes=1`, { accept: 'application/x-ndjson' });
      if (record < expected.length) expect(lines(byOffset)[0]).toBe(expected[record]);
    }
    expect(seen).toEqual(expected);
    // A record chosen at random, found by counting from either end.
    for (let i = 0; i < 10; i++) {
      const r = rng.int(0, expected.length - 1);
      expect(lines(await http('GET', `${path}?record=${r}&max_records=1`))).toEqual([expected[r]]);
    }
  });
});

describe('the envelope view', () => {
  it('embeds each stored message verbatim with its ordinal', async () => {
    const odd = ['{"a":1,"a":2}', '12345678901234567890.5e-3', '"\\ud800 lone"', '{"z":0,"y":[1.50e3]}'];
    const path = await jsonStream(`[${odd.join(',')}]`);
    const reply = await http('GET', `${path}?record=1&record_view=envelope`);
    expect(reply.status).toBe(200);
    expect(reply.headers['content-type']).toBe('application/vnd.durable-stream-records+ndjson');
    expect(lines(reply)).toEqual(odd.slice(1).map((text, i) => `{"record":${i + 1},"value":${text}}`));
    expect(coords(reply)).toMatchObject({ start: 1, next: 4 });
    // Another representation of the same bytes: another ETag.
    const plain = await http('GET', `${path}?record=1`);
    expect(plain.headers.etag).not.toBe(reply.headers.etag);
  });
});

describe('live record reads', () => {
  it('a long-poll at the record tail answers the next append with its ordinals', async () => {
    const path = await jsonStream('[0,1]');
    const waiting = http('GET', `${path}?record=2&live=long-poll&timeout_ms=20000`);
    await untilLiveReaders(server.url, 'long_poll', 1);
    expect((await http('POST', path, JSON_TYPE, '[2,3]')).status).toBe(204);
    const reply = await waiting;
    expect(reply.status).toBe(200);
    expect(lines(reply)).toEqual(['2', '3']);
    expect(coords(reply)).toEqual({ first: 0, start: 2, next: 4, offset: offset(8) });
  });

  it('SSE control events carry the record boundary after each event; the envelope view sends one record per event', async () => {
    const path = await jsonStream('[0,1,2]');
    const abort = new AbortController();
    const res = await fetch(`${server.url}${path}?record=1&live=sse&record_view=envelope`, { signal: abort.signal });
    expect(res.headers.get('stream-data-content-type')).toBe('application/vnd.durable-stream-record+json');
    expect(res.headers.get('stream-record-start')).toBe('1');
    const events: Array<{ kind: string; data: string }> = [];
    let appended = false;
    for await (const block of sseBlocks(res)) {
      if (block.startsWith(':')) continue;
      const kind = block.split('\n')[0]!.slice('event: '.length);
      events.push({ kind, data: block.split('\n').slice(1).map((l) => l.slice(5)).join('\n') });
      if (kind === 'control' && !appended) {
        appended = true;
        expect((await http('POST', path, JSON_TYPE, '[3,4]')).status).toBe(204);
      } else if (kind === 'control') break;
    }
    abort.abort();
    expect(events.map((e) => e.kind)).toEqual(['data', 'data', 'control', 'data', 'data', 'control']);
    expect(events.filter((e) => e.kind === 'data').map((e) => JSON.parse(e.data))).toEqual([1, 2, 3, 4].map((n) => ({ record: n, value: n })));
    const controls = events.filter((e) => e.kind === 'control').map((e) => JSON.parse(e.data) as Record<string, unknown>);
    expect(controls.map((c) => [c.streamFirstRecord, c.streamNextRecord, c.streamNextOffset])).toEqual([
      [0, 3, offset(6)],
      [0, 5, offset(10)],
    ]);
  });
});

describe('snapshots, bootstrap and forks', () => {
  it('a snapshot by record lands on its boundary; inside a record it is refused', async () => {
    const path = await jsonStream('[{"a":1},{"b":22},{"c":333}]');
    const published = await http('PUT', extensionUrl(path, 'snapshot', 'record=1'), JSON_TYPE, '{"folded":1}');
    expect(published.status).toBe(204);
    expect(published.headers['stream-snapshot-offset']).toBe(offset(8));
    expect([published.headers['stream-record-first'], published.headers['stream-record-next']]).toEqual(['0', '3']);
    expectRefusal(await http('PUT', extensionUrl(path, `snapshot/${offset(10)}`), JSON_TYPE, '{}'), 'MISALIGNED_OFFSET');
    expectRefusal(await http('PUT', extensionUrl(path, `snapshot/${offset(8)}`, 'record=1'), JSON_TYPE, '{}'), 'INVALID_QUERY');
    expectRefusal(await http('PUT', extensionUrl(path, 'retention', 'record=9')), 'RECORD_BEYOND_TAIL');
    const boot = await get(extensionUrl(`${server.url}${path}`, 'bootstrap'));
    expect([boot.headers.get('stream-record-first'), boot.headers.get('stream-record-next')]).toEqual(['0', '3']);
    expect(bootstrapParts(boot).slice(1).map((p) => p.body.toString())).toEqual(['{"b":22}', '{"c":333}']);
  });

  it("a fork keeps its source's ordinals up to the fork point and numbers its own after it", async () => {
    const source = await jsonStream('[0,1,2]', '[3,4]');
    const fork = `/v1/stream/${unique('fork')}`;
    const created = await http('PUT', fork, { ...JSON_TYPE, 'stream-forked-from': source, 'stream-fork-offset': offset(6) }, '["f0"]');
    expect(created.status).toBe(201);
    expect([created.headers['stream-record-start'], created.headers['stream-record-next']]).toEqual(['3', '4']);
    expect((await http('POST', source, JSON_TYPE, '5')).status).toBe(204);
    const head = await http('HEAD', fork);
    expect([head.headers['stream-record-first'], head.headers['stream-record-next']]).toEqual(['0', '4']);
    expect(lines(await http('GET', `${fork}?record=1`))).toEqual(['1', '2', '"f0"']);
    const subFork = `/v1/stream/${unique('fork')}`;
    const sub = await http('PUT', subFork, { ...JSON_TYPE, 'stream-forked-from': source, 'stream-fork-offset': offset(6), 'stream-fork-sub-offset': '1' });
    expect(sub.status).toBe(201);
    expect(lines(await http('GET', `${subFork}?tail_records=2`))).toEqual(['2', '3']);
    expect((await http('HEAD', subFork)).headers['stream-record-next']).toBe('4');
  });
});
