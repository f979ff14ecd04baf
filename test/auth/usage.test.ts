/**
 * The usage record over HTTP, with auth on: each token subject's appends and bytes in per
 * bucket, bytes out of its reads, live readers while connected; `/usage` for an admin on
 * `*` only (open with auth off, like `/stats`); per-bucket metrics; and the key cap folding
 * into `(other)` with totals exact.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, expectRefusal } from '../http/client.js';
import { startServer, type RunningServer } from '../helpers/server.js';
import { until } from '../helpers/waits.js';
import { bearer, useAuthServer, type AuthServer } from './setup.js';
import type { UsageRow } from '../../src/client/index.js';

const TEXT = { 'content-type': 'text/plain' };
const JSON_TYPE = { 'content-type': 'application/json' };

type Row = UsageRow;

async function usageRows(env: AuthServer, admin: string, query = ''): Promise<Row[]> {
  const reply = await call(env.url, 'GET', `/usage${query}`, { headers: bearer(admin) });
  expect(reply.status, reply.text()).toBe(200);
  return (reply.json() as { rows: Row[] }).rows;
}

async function rowOf(env: AuthServer, admin: string, bucket: string, subject: string): Promise<Row | undefined> {
  return (await usageRows(env, admin, `?bucket=${bucket}`)).find((r) => r.subject === subject);
}

async function metricValue(env: AuthServer, admin: string, name: string, bucket: string): Promise<number | undefined> {
  const text = (await call(env.url, 'GET', '/metrics', { headers: bearer(admin) })).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{bucket="${bucket}"} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

async function tailOf(env: AuthServer, admin: string, path: string): Promise<number> {
  return Number((await call(env.url, 'HEAD', path, { headers: bearer(admin) })).headers['stream-next-offset']);
}

async function append(env: AuthServer, token: string, path: string, body: string, type: Record<string, string>): Promise<void> {
  const reply = await call(env.url, 'POST', path, { headers: { ...bearer(token), ...type }, body });
  expect(reply.status, reply.text()).toBeLessThan(300);
}

async function setUp(env: AuthServer, admin: string, streams: Array<[string, Record<string, string>]>): Promise<void> {
  for (const bucket of new Set(streams.map(([path]) => path.split('/')[1]!))) {
    expect((await call(env.url, 'PUT', `/${bucket}`, { headers: bearer(admin) })).status).toBe(201);
  }
  for (const [path, type] of streams) expect((await call(env.url, 'PUT', path, { headers: { ...bearer(admin), ...type } })).status).toBe(201);
}

describe('the usage record', () => {
  const env = useAuthServer();
  let admin: string;
  let alice: string;
  let bob: string;

  beforeAll(async () => {
    admin = await env.token([{ bucket: '*', can: ['admin'] }], { subject: 'root' });
    alice = await env.token([{ bucket: 'usea', can: ['write', 'read'] }, { bucket: 'useb', can: ['write', 'read'] }], { subject: 'alice' });
    bob = await env.token([{ bucket: 'usea', can: ['write', 'read'] }, { bucket: 'useb', can: ['write', 'read'] }], { subject: 'bob' });
    await setUp(env, admin, [
      ['/usea/text', TEXT],
      ['/usea/json', JSON_TYPE],
      ['/useb/text', TEXT],
    ]);
  });

  it('counts each subject\'s appends and bytes in per bucket, a JSON array by its messages', async () => {
    await append(env, alice, '/usea/text', 'hello', TEXT);
    await append(env, alice, '/usea/json', '[{"n":1},{"n":2},{"n":3}]', JSON_TYPE);
    await append(env, bob, '/useb/text', 'abc', TEXT);
    await append(env, bob, '/useb/text', 'defg', TEXT);
    await append(env, bob, '/usea/json', '{"n":4}', JSON_TYPE);
    const jsonTail = await tailOf(env, admin, '/usea/json');
    const rows = await usageRows(env, admin);
    const pick = (bucket: string, subject: string) => rows.find((r) => r.bucket === bucket && r.subject === subject);
    const aliceA = pick('usea', 'alice')!;
    const bobA = pick('usea', 'bob')!;
    expect({ appends: aliceA.appends, bytesOut: aliceA.bytesOut }).toEqual({ appends: 4, bytesOut: 0 });
    expect(bobA.appends).toBe(1);
    // Bytes in are the bytes stored: the JSON stream's tail is what both wrote to it.
    expect(aliceA.bytesIn + bobA.bytesIn).toBe(5 + jsonTail);
    expect(aliceA.bytesIn - 5).toBeGreaterThan(bobA.bytesIn);
    expect(pick('useb', 'bob')).toEqual({ bucket: 'useb', subject: 'bob', appends: 2, bytesIn: 7, bytesOut: 0, liveReaders: 0 });
    expect(pick('useb', 'alice')).toBeUndefined();
    // Creating empty streams stored nothing: the admin has no row.
    expect(rows.some((r) => r.subject === 'root')).toBe(false);
  });

  it('adds a catch-up read\'s bytes to the reader\'s bytes out', async () => {
    const carol = await env.token([{ bucket: 'useb', can: ['read'] }], { subject: 'carol' });
    const before = (await rowOf(env, admin, 'useb', 'carol'))?.bytesOut ?? 0;
    const read = await call(env.url, 'GET', '/useb/text?offset=-1', { headers: bearer(carol) });
    expect(read.status).toBe(200);
    expect(read.body.length).toBeGreaterThan(0);
    expect((await rowOf(env, admin, 'useb', 'carol'))!.bytesOut).toBe(before + read.body.length);
  });

  it('shows an SSE reader as a live reader while it is connected, and its bytes out', async () => {
    const dave = await env.token([{ bucket: 'usea', can: ['read'] }], { subject: 'dave' });
    const controller = new AbortController();
    const res = await fetch(`${env.url}/usea/text?offset=-1&live=sse`, { headers: bearer(dave), signal: controller.signal });
    expect(res.status).toBe(200);
    try {
      await until(async () => (await rowOf(env, admin, 'usea', 'dave'))?.liveReaders === 1, 'dave held as one live reader');
      // 'hello' was served in the first data event.
      await until(async () => (await rowOf(env, admin, 'usea', 'dave'))?.bytesOut === 5, "dave's SSE bytes counted");
    } finally {
      controller.abort();
    }
    await until(async () => (await rowOf(env, admin, 'usea', 'dave'))?.liveReaders === 0, 'dave no longer a live reader');
  });

  it('shows a waiting long-poll as a live reader, and adds the bytes it answers', async () => {
    const erin = await env.token([{ bucket: 'useb', can: ['read'] }], { subject: 'erin' });
    const tail = (await call(env.url, 'HEAD', '/useb/text', { headers: bearer(admin) })).headers['stream-next-offset']!;
    const poll = call(env.url, 'GET', `/useb/text?offset=${tail}&live=long-poll`, { headers: bearer(erin) });
    await until(async () => (await rowOf(env, admin, 'useb', 'erin'))?.liveReaders === 1, 'erin held as one live reader');
    await append(env, bob, '/useb/text', 'xyz', TEXT);
    const answer = await poll;
    expect(answer.text()).toBe('xyz');
    await until(async () => (await rowOf(env, admin, 'useb', 'erin'))?.liveReaders === 0, 'erin no longer a live reader');
    expect((await rowOf(env, admin, 'useb', 'erin'))!.bytesOut).toBe(3);
  });

  it('answers /usage to an admin on * only: 403 to others, 401 without a token', async () => {
    expectRefusal(await call(env.url, 'GET', '/usage', { headers: bearer(alice) }), 'FORBIDDEN');
    const bucketAdmin = await env.token([{ bucket: 'usea', can: ['admin'] }], { subject: 'usea-admin' });
    expectRefusal(await call(env.url, 'GET', '/usage', { headers: bearer(bucketAdmin) }), 'FORBIDDEN');
    expectRefusal(await call(env.url, 'GET', '/usage'), 'UNAUTHORIZED');
  });

  it('pages with limit and after, and bounds what a client sends', async () => {
    const all = await usageRows(env, admin);
    expect(all.length).toBeGreaterThan(2);
    const first = (await call(env.url, 'GET', '/usage?limit=2', { headers: bearer(admin) })).json() as { rows: Row[]; next: string };
    expect(first.rows).toEqual(all.slice(0, 2));
    const rest = await usageRows(env, admin, `?after=${encodeURIComponent(first.next)}&limit=1000`);
    expect(rest).toEqual(all.slice(2));
    expectRefusal(await call(env.url, 'GET', '/usage?limit=1001', { headers: bearer(admin) }), 'INVALID_QUERY');
    expectRefusal(await call(env.url, 'GET', '/usage?limit=0', { headers: bearer(admin) }), 'INVALID_QUERY');
  });

  it('exports per-bucket counters whose values are the rows\' sums', async () => {
    for (const bucket of ['usea', 'useb']) {
      const rows = await usageRows(env, admin, `?bucket=${bucket}`);
      const sum = (field: keyof Row) => rows.reduce((n, r) => n + (r[field] as number), 0);
      expect(await metricValue(env, admin, 'rill_usage_appends_total', bucket)).toBe(sum('appends'));
      expect(await metricValue(env, admin, 'rill_usage_bytes_in_total', bucket)).toBe(sum('bytesIn'));
      expect(await metricValue(env, admin, 'rill_usage_bytes_out_total', bucket)).toBe(sum('bytesOut'));
    }
    const text = (await call(env.url, 'GET', '/metrics', { headers: bearer(admin) })).text();
    // Subjects are never labels.
    expect(text).not.toMatch(/rill_usage_[a-z_]+\{[^}]*subject=/);
    expect(text).not.toContain('alice');
  });
});

describe('the usage record past its key cap', () => {
  const env = useAuthServer({ usageMaxKeys: 2 });
  let admin: string;

  beforeAll(async () => {
    admin = await env.token([{ bucket: '*', can: ['admin'] }], { subject: 'root' });
    await setUp(env, admin, [
      ['/capa/s', TEXT],
      ['/capb/s', TEXT],
    ]);
  });

  it('folds the least recently active key into (other), the totals exact', async () => {
    const writers = await Promise.all(['w1', 'w2', 'w3'].map((subject) => env.token([{ bucket: 'capa', can: ['write'] }, { bucket: 'capb', can: ['write'] }], { subject })));
    await append(env, writers[0]!, '/capa/s', 'a', TEXT); // w1: 1 byte, folded first
    await append(env, writers[1]!, '/capa/s', 'bb', TEXT);
    await append(env, writers[2]!, '/capb/s', 'ccc', TEXT); // a third key: w1's row is folded
    await append(env, writers[2]!, '/capb/s', 'dddd', TEXT);
    const rows = await usageRows(env, admin);
    expect(rows.map((r) => `${r.bucket}:${r.subject}`)).toEqual(['(other):(other)', 'capa:w2', 'capb:w3']);
    expect(rows[0]).toMatchObject({ appends: 1, bytesIn: 1 });
    expect(rows.reduce((n, r) => n + r.appends, 0)).toBe(4);
    expect(rows.reduce((n, r) => n + r.bytesIn, 0)).toBe(10);
    // capa still has a row: its series keeps w1's append.
    expect(await metricValue(env, admin, 'rill_usage_appends_total', 'capa')).toBe(2);
    expect(await metricValue(env, admin, 'rill_usage_bytes_in_total', 'capb')).toBe(7);
    // Two more keys fold w2 and w3; capa and capb then have no row and their series go to (other).
    const late = await env.token([{ bucket: 'capa', can: ['write'] }], { subject: 'late' });
    const later = await env.token([{ bucket: 'capa', can: ['write'] }], { subject: 'later' });
    await append(env, late, '/capa/s', 'e', TEXT);
    await append(env, later, '/capa/s', 'f', TEXT);
    expect(await metricValue(env, admin, 'rill_usage_bytes_in_total', 'capb')).toBeUndefined();
    expect(await metricValue(env, admin, 'rill_usage_bytes_in_total', '(other)')).toBe(3 + 7);
    // capa's series began again with late and later.
    expect(await metricValue(env, admin, 'rill_usage_bytes_in_total', 'capa')).toBe(2);
    const after = await usageRows(env, admin);
    expect(after.reduce((n, r) => n + r.bytesIn, 0)).toBe(12);
  });
});

describe('the usage record with auth off', () => {
  let server: RunningServer;

  beforeAll(async () => {
    server = await startServer({ store: 'memory', args: ['--usage-max-keys', '5'] });
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('counts under the subject "-" and answers /usage without a token, as /stats is', async () => {
    expect((await call(server.url, 'PUT', '/open', {})).status).toBe(201);
    expect((await call(server.url, 'PUT', '/open/s', { headers: TEXT })).status).toBe(201);
    expect((await call(server.url, 'POST', '/open/s', { headers: TEXT, body: 'hi' })).status).toBe(204);
    expect((await call(server.url, 'GET', '/stats')).status).toBe(200);
    const reply = await call(server.url, 'GET', '/usage');
    expect(reply.status).toBe(200);
    expect(reply.json()).toEqual({
      rows: [{ bucket: 'open', subject: '-', appends: 1, bytesIn: 2, bytesOut: 0, liveReaders: 0 }],
      next: null,
      maxKeys: 5,
      totals: { appends: 1, bytesIn: 2, bytesOut: 0 },
    });
  });
});
