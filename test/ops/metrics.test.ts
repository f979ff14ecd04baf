/**
 * /metrics after a known workload: each counter and histogram moves by exactly what the
 * workload did, on SQLite and on PostgreSQL (storage metrics are measured where both
 * engines pass, batched.ts). Requests are sent one after another, so that each command
 * is a batch of its own and batch counts are exact too.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_PRODUCER_SETTINGS } from '../../src/core/types.js';
import { FaultyStore } from '../reliability/faulty-store.js';
import { removeDir, tempDataDir } from '../helpers/server.js';
import { moved, scrape, startInProcess, type Running } from './ops-helpers.js';

/** A loaded machine may take a while; the poll ends as soon as the condition holds. */
const POLL = { timeout: 10_000 };

const JSON_TYPE = { 'content-type': 'application/json' };

async function call(url: string, init: RequestInit = {}): Promise<number> {
  const res = await fetch(url, init);
  await res.arrayBuffer();
  return res.status;
}

const ENGINES = ['sqlite', 'postgres'] as const;

describe.each(ENGINES)('metrics on %s', (engine) => {
  let server: Running;

  beforeAll(async () => {
    const postgres = engine === 'postgres' ? { store: 'postgres' as const, postgresUrl: await (await import('../helpers/postgres.js')).sharedDatabase() } : {};
    server = await startInProcess(postgres);
  });
  afterAll(() => server.stop());

  it('each counter and histogram moves by exactly what a known workload did', async () => {
    const b = `${server.url}/ops-bucket`;
    const before = await scrape(server.url);
    expect(await call(b, { method: 'PUT' })).toBe(201);
    expect(await call(`${b}/j`, { method: 'PUT', headers: JSON_TYPE })).toBe(201);
    // Stored as "1\n2\n3\n" (6 bytes, 3 messages) and '{"a":1}\n' (8 bytes, 1 message).
    expect(await call(`${b}/j`, { method: 'POST', headers: JSON_TYPE, body: '[1, 2, 3]' })).toBe(204);
    expect(await call(`${b}/j`, { method: 'POST', headers: JSON_TYPE, body: '{"a": 1}' })).toBe(204);
    expect(await call(`${b}/j`, { method: 'POST', headers: JSON_TYPE, body: '{not json' })).toBe(400);
    expect(await call(`${b}/raw`, { method: 'PUT', headers: { 'content-type': 'text/plain' } })).toBe(201);
    const producer = { 'content-type': 'text/plain', 'producer-id': 'p1', 'producer-epoch': '0', 'producer-seq': '0' };
    expect(await call(`${b}/raw`, { method: 'POST', headers: producer, body: 'hello' })).toBe(200);
    expect(await call(`${b}/j?offset=-1`)).toBe(200);
    expect(await call(`${b}/nope`)).toBe(404);
    const after = await scrape(server.url);

    const requests = (route: string, method: string, status: number) => `rill_http_requests_total{method="${method}",route="${route}",status="${status}"}`;
    const expected: Record<string, number> = {
      [requests('/{bucket}', 'PUT', 201)]: 1,
      [requests('/{bucket}/{stream}', 'PUT', 201)]: 2,
      [requests('/{bucket}/{stream}', 'POST', 204)]: 2,
      [requests('/{bucket}/{stream}', 'POST', 400)]: 1,
      [requests('/{bucket}/{stream}', 'POST', 200)]: 1,
      [requests('/{bucket}/{stream}', 'GET', 200)]: 1,
      [requests('/{bucket}/{stream}', 'GET', 404)]: 1,
      // The first scrape, counted once it ended.
      [requests('/metrics', 'GET', 200)]: 1,
      rill_append_duration_seconds_count: 4,
      rill_appended_bytes_total: 6 + 8 + 5,
      rill_appended_messages_total: 3 + 1 + 1,
      rill_read_bytes_total: 6 + 8,
      rill_read_messages_total: 4,
      // createBucket, two createStream, three appends; one command per batch.
      rill_storage_batch_commands_sum: 6,
      rill_storage_batch_commands_count: 6,
      'rill_storage_batch_commands_bucket{le="1"}': 6,
      rill_storage_commit_duration_seconds_count: 6,
      rill_storage_fsync_duration_seconds_count: 6,
      rill_storage_errors_total: 0,
      rill_storage_unavailable_responses_total: 0,
      'rill_live_readers_dropped_total{kind="sse"}': 0,
      'rill_live_readers_dropped_total{kind="long_poll"}': 0,
    };
    expect(moved(before, after, Object.keys(expected))).toEqual(expected);
    const requestSeries = [...after.keys()].filter((k) => k.startsWith('rill_http_requests_total'));
    expect(requestSeries.sort()).toEqual(Object.keys(expected).filter((k) => k.startsWith('rill_http_requests_total')).sort());
    // Gauges are levels, not movements.
    expect([after.get('rill_buckets'), after.get('rill_streams'), after.get('rill_producer_records')]).toEqual([1, 2, 1]);
    expect(after.get('rill_append_duration_seconds_sum')! - (before.get('rill_append_duration_seconds_sum') ?? 0)).toBeGreaterThan(0);
    // Process and event-loop metrics come from prom-client's defaults.
    for (const name of ['rill_process_resident_memory_bytes', 'rill_nodejs_eventloop_lag_p99_seconds', 'rill_nodejs_heap_size_used_bytes']) expect(after.has(name), name).toBe(true);
  });

  it('counts live readers while they wait, and a reader that leaves as dropped', async () => {
    const stream = `${server.url}/ops-bucket/j`;
    const before = await scrape(server.url);
    const gauge = async (kind: string) => (await scrape(server.url)).get(`rill_live_readers{kind="${kind}"}`);
    const leave = new AbortController();
    const poll = fetch(`${stream}?offset=now&live=long-poll`, { signal: leave.signal }).catch(() => 'aborted');
    await expect.poll(() => gauge('long_poll'), POLL).toBe(1);
    const sse = await fetch(`${stream}?offset=now&live=sse`, { signal: leave.signal });
    expect(sse.status).toBe(200);
    await expect.poll(() => gauge('sse'), POLL).toBe(1);
    leave.abort();
    await poll;
    await expect.poll(async () => (await scrape(server.url)).get('rill_live_readers_dropped_total{kind="sse"}'), POLL).toBe((before.get('rill_live_readers_dropped_total{kind="sse"}') ?? 0) + 1);
    const after = await scrape(server.url);
    expect(moved(before, after, ['rill_live_readers_dropped_total{kind="long_poll"}'])).toEqual({ 'rill_live_readers_dropped_total{kind="long_poll"}': 1 });
    expect([after.get('rill_live_readers{kind="sse"}'), after.get('rill_live_readers{kind="long_poll"}')]).toEqual([0, 0]);
  });

  it('an append-batch on a /v1/stream name counts as an append, under the route template /v1/stream/{name}?ext=append-batch', async () => {
    const stream = `${server.url}/v1/stream/ops-batch/append-batch`;
    expect(await call(stream, { method: 'PUT', headers: { 'content-type': 'text/plain' } })).toBe(201);
    const before = await scrape(server.url);
    const oneFrame = Buffer.from([0, 0, 0, 1, 0x78]);
    expect(await call(`${stream}?ext=append-batch`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: oneFrame })).toBe(200);
    const after = await scrape(server.url);
    const expected = { rill_append_duration_seconds_count: 1, 'rill_http_requests_total{method="POST",route="/v1/stream/{name}?ext=append-batch",status="200"}': 1 };
    expect(moved(before, after, Object.keys(expected))).toEqual(expected);
  });

  it('/readyz answers 200 with the store serving', async () => {
    const res = await fetch(`${server.url}/readyz`);
    expect([res.status, await res.json()]).toEqual([200, { status: 'ready' }]);
  });
});

describe('metrics of the SQLite engine', () => {
  let server: Running;

  beforeAll(async () => {
    server = await startInProcess();
  });
  afterAll(() => server.stop());

  it('counts stream-cache hits and misses: a new name misses, a cached stream hits', async () => {
    const b = `${server.url}/cache-bucket`;
    await call(b, { method: 'PUT' });
    const before = await scrape(server.url);
    expect(await call(`${b}/s`, { method: 'PUT' })).toBe(201);
    const created = await scrape(server.url);
    expect(moved(before, created, ['rill_stream_cache_misses_total'])).toEqual({ rill_stream_cache_misses_total: 1 });
    for (let i = 0; i < 5; i++) expect(await call(`${b}/s`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: 'x' })).toBe(204);
    const appended = await scrape(server.url);
    const m = moved(created, appended, ['rill_stream_cache_misses_total', 'rill_stream_cache_hits_total']);
    expect(m.rill_stream_cache_misses_total).toBe(0);
    expect(m.rill_stream_cache_hits_total).toBe(5);
  });
});

describe('storage failures', () => {
  let server: Running;
  let store: FaultyStore;
  const dataDir = tempDataDir('rill-ops-faulty-');

  beforeAll(async () => {
    store = new FaultyStore({ dataDir, producers: DEFAULT_PRODUCER_SETTINGS });
    server = await startInProcess({}, store);
  });
  afterAll(async () => {
    await server.stop();
    removeDir(dataDir);
  });

  it('a batch that fails to commit is counted with its 503s, and /readyz answers 503 until a batch commits', async () => {
    const b = `${server.url}/faulty-bucket`;
    expect(await call(b, { method: 'PUT' })).toBe(201);
    const before = await scrape(server.url);
    store.failCommits = true;
    expect(await call(`${b}/s`, { method: 'PUT' })).toBe(503);
    const failing = await fetch(`${server.url}/readyz`);
    expect([failing.status, await failing.json()]).toEqual([503, { status: 'storage-failing' }]);
    store.failCommits = false;
    expect(await call(`${b}/s`, { method: 'PUT' })).toBe(201);
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
    const after = await scrape(server.url);
    expect(moved(before, after, ['rill_storage_errors_total', 'rill_storage_unavailable_responses_total', 'rill_http_requests_total{method="PUT",route="/{bucket}/{stream}",status="503"}'])).toEqual({
      rill_storage_errors_total: 1,
      rill_storage_unavailable_responses_total: 1,
      'rill_http_requests_total{method="PUT",route="/{bucket}/{stream}",status="503"}': 1,
    });
  });
});

describe('where metrics are served', () => {
  it('--metrics-port serves them on their own address and not on the main one; --metrics off serves none', async () => {
    const apart = await startInProcess({ metricsPort: 0 });
    const off = await startInProcess({ metrics: false });
    try {
      expect((await fetch(`${apart.url}/metrics`)).status).toBe(404);
      const own = await fetch(`${apart.rill.metricsUrl()}/metrics`);
      expect(own.status).toBe(200);
      expect(await own.text()).toContain('rill_http_requests_total');
      expect((await fetch(`${apart.rill.metricsUrl()}/`)).status).toBe(404);
      expect(off.rill.metricsUrl()).toBeNull();
      expect((await fetch(`${off.url}/metrics`)).status).toBe(404);
    } finally {
      await apart.stop();
      await off.stop();
    }
  });
});
