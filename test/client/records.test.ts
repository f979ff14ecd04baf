/**
 * JSON record coordinates through the client, against a real rill: ranges on create and
 * append, `recordMatch`, HEAD's record tails, the record iterator (catch-up, `now`, the
 * last k, per-answer limits, the envelope view, long-poll and SSE across the server's
 * reconnections), snapshots and retention by record, and the typed refusals, including
 * an answer that does not advertise the extension's token.
 */
import { describe, expect, it } from 'vitest';
import {
  JSON_RECORDS_TOKEN,
  RecordBeyondTailError,
  RecordMatchFailedError,
  RecordsNotActiveError,
  RecordTrimmedError,
  RillClient,
  type FetchLike,
  type JsonRecord,
  type RecordBatch,
  type RecordReadOptions,
  type StreamHandle,
} from '../../src/client/index.js';
import { useClientServer } from '../helpers/client-server.js';
import { seededRandom } from '../helpers/seed.js';
import { until, untilLiveReader } from '../helpers/processing.js';

// A short SSE lifetime makes a reader reconnect several times within a test.
const env = useClientServer('records', { args: ['--long-poll-timeout', '2s'], settings: { sseLifetimeMs: 200 } });
let counter = 0;

async function jsonStream(prefix: string, messages?: unknown[]): Promise<StreamHandle> {
  counter += 1;
  const stream = env.client.stream(`records/${prefix}-${counter}`);
  await stream.create({ contentType: 'application/json', ...(messages ? { messages } : {}) });
  return stream;
}

async function collect<T>(items: AsyncIterable<T>, limit = 10_000): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) {
    out.push(item);
    if (out.length >= limit) break;
  }
  return out;
}

const failure = (promise: Promise<unknown>) => promise.then(() => undefined, (e: unknown) => e);
const ordinals = (records: JsonRecord[]) => records.map((r) => r.record);
const valuesOf = (records: JsonRecord[]) => records.map((r) => r.value);

/** A fetch that counts the live connections it opens and may drop Stream-Extensions from every answer. */
function proxyFetch(options: { dropExtensions?: boolean } = {}): { fetch: FetchLike; opened: (live: string) => number } {
  const counts = new Map<string, number>();
  const proxy: FetchLike = async (input, init) => {
    const live = new URL(String(input)).searchParams.get('live');
    if (live !== null) counts.set(live, (counts.get(live) ?? 0) + 1);
    const res = await fetch(input, init);
    if (!options.dropExtensions) return res;
    const headers = new Headers(res.headers);
    headers.delete('stream-extensions');
    return new Response(res.body, { status: res.status, headers });
  };
  return { fetch: proxy, opened: (live) => counts.get(live) ?? 0 };
}

describe('record ranges and tails', () => {
  it('answers the range of every create and append, and HEAD says F, N and the token', async () => {
    const stream = await jsonStream('ranges', [{ a: 0 }, { a: 1 }]);
    const again = await stream.create({ contentType: 'application/json' });
    expect(again).toMatchObject({ created: false, records: { start: 2, next: 2 } });
    expect((await stream.appendMessages([{ a: 2 }, { a: 3 }, { a: 4 }])).records).toEqual({ start: 2, next: 5 });
    expect((await stream.appendJson([1, 2])).records).toEqual({ start: 5, next: 6 });
    expect((await stream.close()).records).toEqual({ start: 6, next: 6 });
    const info = await stream.head();
    expect(info).toMatchObject({ recordsActive: true, recordFirst: 0, recordNext: 6, extensions: [JSON_RECORDS_TOKEN] });
    expect(stream.recordsActive).toBe(true);
  });

  it('gives a stream of another type no records, and no record fields', async () => {
    const text = env.client.stream(`records/text-${++counter}`);
    const created = await text.create({ contentType: 'text/plain', body: 'abc' });
    expect(created.records).toBeUndefined();
    expect((await text.append('def')).records).toBeUndefined();
    expect(await text.head()).toMatchObject({ recordsActive: false, recordFirst: undefined, recordNext: undefined, extensions: [] });
  });

  it('gives each frame of an append batch its own range', async () => {
    const stream = await jsonStream('batch', [0]);
    const acks = await stream.appendBatch(['[1,2]', '{"broken"', '3']);
    expect(acks.map((a) => a.records)).toEqual([{ start: 1, next: 3 }, undefined, { start: 3, next: 4 }]);
  });
});

describe('recordMatch', () => {
  it('appends when it names the record tail; otherwise RecordMatchFailedError with both tails, and nothing is written', async () => {
    const stream = await jsonStream('match', [1, 2, 3]);
    expect((await stream.appendJson(4, { recordMatch: 3 })).records).toEqual({ start: 3, next: 4 });
    const stale = await failure(stream.appendJson(5, { recordMatch: 3 }));
    expect(stale).toBeInstanceOf(RecordMatchFailedError);
    expect(stale).toMatchObject({ code: 'RECORD_MATCH_FAILED', status: 412, recordNext: 4 });
    expect((stale as RecordMatchFailedError).fields.nextOffset).toBe('00000000000000000008');
    expect((await stream.head()).recordNext).toBe(4);
    // Writers racing for the same tail: exactly one wins.
    const racers = await Promise.allSettled([0, 1, 2].map((w) => stream.appendJson({ w }, { recordMatch: 4 })));
    expect(racers.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(racers.filter((r) => r.status === 'rejected').every((r) => (r as PromiseRejectedResult).reason instanceof RecordMatchFailedError)).toBe(true);
  });

  it('is not sent to a stream without records, and a bad ordinal is refused before any request', async () => {
    const text = env.client.stream(`records/text-${++counter}`);
    await text.create({ contentType: 'text/plain', body: 'abc' });
    const handle = env.client.stream(text.url);
    const refused = await failure(handle.append('def', { recordMatch: 0 }));
    expect(refused).toBeInstanceOf(RecordsNotActiveError);
    expect(refused).toMatchObject({ code: 'RECORDS_NOT_ACTIVE', status: undefined });
    expect((await text.head()).nextOffset).toBe('00000000000000000003');
    const json = await jsonStream('bad-match', [1]);
    await expect(json.appendJson(2, { recordMatch: -1 })).rejects.toThrow(RangeError);
    await expect(json.appendJson(2, { recordMatch: 1.5 })).rejects.toThrow(/non-negative integer/);
  });
});

describe('record reads, catch-up', () => {
  it('starts at a record, at now or at the last k, and pages with maxRecords', async () => {
    const stream = await jsonStream('catchup', Array.from({ length: 10 }, (_, i) => ({ i })));
    expect(ordinals(await collect(stream.records()))).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(valuesOf(await collect(stream.records({ record: 7 })))).toEqual([{ i: 7 }, { i: 8 }, { i: 9 }]);
    expect(await collect(stream.records({ record: 'now' }))).toEqual([]);
    expect(await collect(stream.records({ record: 10 }))).toEqual([]);
    expect(ordinals(await collect(stream.records({ tailRecords: 3 })))).toEqual([7, 8, 9]);
    expect(ordinals(await collect(stream.records({ tailRecords: 50 })))).toHaveLength(10);
    const pages = await collect(stream.recordBatches({ record: 1, maxRecords: 4 }));
    expect(pages.map((p) => [p.recordStart, p.recordNext, p.records.length, p.upToDate])).toEqual([
      [1, 5, 4, false],
      [5, 9, 4, false],
      [9, 10, 1, true],
    ]);
    expect(pages.at(-1)).toMatchObject({ recordFirst: 0, nextOffset: (await stream.head()).nextOffset });
  });

  it('yields what offset reads yield, in the same order, whatever the limits (seeded)', async () => {
    const rng = seededRandom();
    const stream = await jsonStream('random');
    for (let i = 0; i < 30; i++) {
      await stream.appendMessages(Array.from({ length: rng.int(1, 6) }, (_, k) => ({ i, k, pad: 'p'.repeat(rng.int(0, 400)) })));
    }
    const byOffset = (await collect(stream.messages())).map((m) => m.value);
    for (let round = 0; round < 5; round++) {
      const options: RecordReadOptions = { maxRecords: rng.int(1, 20), maxBytes: rng.int(1, 3000), envelope: rng.next() < 0.5 };
      const records = await collect(stream.records(options));
      expect(ordinals(records), JSON.stringify(options)).toEqual(byOffset.map((_, i) => i));
      expect(valuesOf(records)).toEqual(byOffset);
    }
  });

  it('keeps each stored text byte for byte, in both views', async () => {
    const odd = ['{"a":1,"a":2}', '12345678901234567890.5e-3', '"\\ud800 lone"', '{"z":0,"y":[1.50e3]}'];
    const stream = await jsonStream('verbatim');
    await stream.append(`[${odd.join(',')}]`, { contentType: 'application/json' });
    for (const envelope of [false, true]) {
      const records = await collect(stream.records({ envelope }));
      expect(records.map((r) => r.text)).toEqual(odd);
      expect(records[0]!.value).toEqual({ a: 2 });
    }
  });

  it('refuses a trimmed record and one past the tail with typed errors carrying F and N', async () => {
    const stream = await jsonStream('trim', [0, 1, 2, 3]);
    const published = await stream.publishSnapshot({ record: 2 }, '{"folded":2}');
    expect(published.offset).toBe('00000000000000000004');
    expect(await stream.retain({ record: 2 })).toEqual({ earliestOffset: '00000000000000000004', recordFirst: 2, recordNext: 4 });
    const trimmed = await failure(collect(stream.records({ record: 1 })));
    expect(trimmed).toBeInstanceOf(RecordTrimmedError);
    expect(trimmed).toMatchObject({ code: 'RECORD_TRIMMED', status: 410, recordFirst: 2 });
    expect(ordinals(await collect(stream.records({ record: (trimmed as RecordTrimmedError).recordFirst! })))).toEqual([2, 3]);
    const beyond = await failure(collect(stream.records({ record: 9 })));
    expect(beyond).toBeInstanceOf(RecordBeyondTailError);
    expect((beyond as RecordBeyondTailError).fields).toMatchObject({ recordNext: 4 });
  });

  it('refuses record reads of a stream without records, and any answer without the token', async () => {
    const text = env.client.stream(`records/text-${++counter}`);
    await text.create({ contentType: 'text/plain', body: 'abc' });
    const refused = await failure(collect(text.records()));
    expect(refused).toBeInstanceOf(RecordsNotActiveError);
    expect(refused).toMatchObject({ code: 'RECORDS_NOT_ACTIVE', status: 400 });
    // A server that does not advertise the extension: its answers are not read as records.
    const stream = await jsonStream('no-token', [1, 2]);
    const older = new RillClient({ url: env.client.baseUrl, fetch: proxyFetch({ dropExtensions: true }).fetch }).stream(stream.url);
    for (const live of [false, 'sse'] as const) {
      const error = await failure(collect(older.records({ live })));
      expect(error, String(live)).toBeInstanceOf(RecordsNotActiveError);
      expect((error as RecordsNotActiveError).status).toBe(200);
      expect((error as Error).message).toContain(JSON_RECORDS_TOKEN);
    }
    expect((await older.head()).recordsActive).toBe(false);
    expect(await failure(older.appendJson(3, { recordMatch: 2 }))).toBeInstanceOf(RecordsNotActiveError);
    expect((await stream.head()).recordNext).toBe(2);
  });

  it('refuses options the server would refuse, before any request', async () => {
    const stream = await jsonStream('options', [1]);
    const bad: RecordReadOptions[] = [{ record: -1 }, { record: 1.5 }, { tailRecords: -2 }, { record: 0, tailRecords: 1 }, { maxRecords: 0 }, { maxBytes: 0 }, { maxRecords: 5, live: 'sse' }];
    for (const options of bad) await expect(collect(stream.records(options)), JSON.stringify(options)).rejects.toThrow(RangeError);
  });
});

describe('record reads, live', () => {
  it('long-polls from now: empty waits keep the boundary, an append arrives with its ordinal, the close ends it', async () => {
    const stream = await jsonStream('longpoll', [0, 1, 2]);
    const batches: RecordBatch[] = [];
    const reading = (async () => {
      for await (const batch of stream.recordBatches({ record: 'now', live: 'long-poll', longPollTimeoutMs: 100, heartbeats: true })) batches.push(batch);
    })();
    // Two empty waits run out before anything is appended.
    await until(() => batches.length >= 2, 'two empty long-polls');
    await stream.appendMessages([3, 4]);
    await until(() => batches.some((b) => b.records.length > 0), 'the appended records');
    await stream.close();
    await reading;
    expect(batches.slice(0, 2).every((b) => b.records.length === 0 && b.recordNext === 3 && b.upToDate)).toBe(true);
    const records = batches.flatMap((b) => b.records);
    expect(records.map((r) => [r.record, r.value])).toEqual([
      [3, 3],
      [4, 4],
    ]);
    expect(batches.at(-1)).toMatchObject({ closed: true, recordNext: 5 });
  });

  it('tails the last k with SSE across the server ending each connection, resuming from streamNextRecord', async () => {
    const stream = await jsonStream('sse', [0, 1, 2, 3]);
    const proxy = proxyFetch();
    const reader = new RillClient({ url: env.client.baseUrl, fetch: proxy.fetch }).stream(stream.url);
    const writer = (async () => {
      // The server ends each connection after 200 ms: one append on each of three connections.
      for (let c = 1; c <= 3; c++) {
        await until(() => proxy.opened('sse') >= c, `SSE connection ${c}`);
        await untilLiveReader(stream.url);
        await stream.appendMessages([3 + 2 * c - 1, 3 + 2 * c]);
      }
      await stream.close();
    })();
    const records = await collect(reader.records({ tailRecords: 2, live: 'sse' }));
    await writer;
    expect(proxy.opened('sse')).toBeGreaterThanOrEqual(3);
    expect(records.map((r) => [r.record, r.value])).toEqual([2, 3, 4, 5, 6, 7, 8, 9].map((n) => [n, n]));
  });

  it('reads the envelope view over SSE, one record per event, and from now', async () => {
    const stream = await jsonStream('sse-envelope', [{ n: 0 }]);
    const seen: JsonRecord[] = [];
    const reading = (async () => {
      for await (const record of stream.records({ record: 'now', live: 'sse', envelope: true })) seen.push(record);
    })();
    await untilLiveReader(stream.url);
    await stream.appendMessages([{ n: 1 }, { n: 2 }]);
    await until(() => seen.length === 2, 'the two appended records');
    await stream.close();
    await reading;
    expect(seen.map((r) => [r.record, r.text])).toEqual([
      [1, '{"n":1}'],
      [2, '{"n":2}'],
    ]);
  });
});
