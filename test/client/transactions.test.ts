/**
 * Group transactions and affinity stream handles through the client, against a real rill:
 * acknowledgements across streams, chaining on one stream, refusals typed with the index of
 * the operation refused (every stream left as it was), producer retries, `recordMatch`,
 * a stream handle on an affinity path, and a real server without transactions (the
 * reference Durable Streams server) answering with TransactionsNotSupportedError.
 */
import { DurableStreamTestServer } from '@durable-streams/server';
import { describe, expect, it } from 'vitest';
import {
  NotFoundError,
  RecordMatchFailedError,
  RillClient,
  RillError,
  StreamClosedError,
  TransactionPartlyAppliedError,
  TransactionsNotSupportedError,
  type StreamHandle,
  type TransactionOperation,
} from '../../src/client/index.js';
import { encodeOffset } from '../../src/protocol/offset.js';
import { useClientServer } from '../helpers/client-server.js';
import { readAll } from '../helpers/processing.js';
import { seededRandom } from '../helpers/seed.js';

const BUCKET = 'txclient';
const env = useClientServer(BUCKET);
let counter = 0;

/** A fresh affinity key with a JSON stream `journal` (one message) and a binary stream `blobs` (empty). */
async function group(): Promise<{ key: string; journal: StreamHandle; blobs: StreamHandle }> {
  counter += 1;
  const key = `key-${counter}`;
  const bucket = env.client.bucket(BUCKET);
  const journal = bucket.affinityStream(key, 'journal');
  const blobs = bucket.affinityStream(key, 'blobs');
  await journal.create({ contentType: 'application/json', messages: [{ first: true }] });
  await blobs.create({ contentType: 'application/octet-stream' });
  return { key, journal, blobs };
}

const transact = (key: string, operations: TransactionOperation[]) => env.client.bucket(BUCKET).transaction(key, operations);
const failure = (promise: Promise<unknown>) => promise.then(() => undefined, (e: unknown) => e);

/** What a reader and a HEAD see of a stream, to compare before and after a refusal. */
async function stateOf(stream: StreamHandle) {
  const info = await stream.head();
  const bytes: number[] = [];
  for await (const batch of stream.read()) bytes.push(...batch.data);
  return { bytes, nextOffset: info.nextOffset, recordNext: info.recordNext, closed: info.closed };
}

describe('bucket.transaction', () => {
  it('commits across two streams, answering typed acknowledgements in request order', async () => {
    const { key, journal, blobs } = await group();
    const rng = seededRandom();
    const blob = Uint8Array.from({ length: rng.int(1, 300) }, () => rng.int(0, 255));
    const acks = await transact(key, [
      { stream: 'journal', json: { step: 1 }, recordMatch: 1 },
      { stream: 'blobs', body: blob },
      { stream: 'journal', messages: [['an', 'array'], { step: 2 }] },
    ]);
    const first = '{"first":true}\n'.length;
    const step = '{"step":1}\n'.length;
    expect(acks).toEqual([
      { stream: 'journal', offset: encodeOffset(first), nextOffset: encodeOffset(first + step), closed: false, duplicate: false, records: { start: 1, next: 2 }, producer: undefined },
      { stream: 'blobs', offset: encodeOffset(0), nextOffset: encodeOffset(blob.length), closed: false, duplicate: false, records: undefined, producer: undefined },
      {
        stream: 'journal',
        offset: encodeOffset(first + step),
        nextOffset: encodeOffset(first + step + '["an","array"]\n{"step":2}\n'.length),
        closed: false,
        duplicate: false,
        records: { start: 2, next: 4 },
        producer: undefined,
      },
    ]);
    expect(await readAll(journal)).toEqual([{ first: true }, { step: 1 }, ['an', 'array'], { step: 2 }]);
    expect((await stateOf(blobs)).bytes).toEqual([...blob]);
  });

  it('chains operations on one stream: each sees the record tail the one before left, and closeAfter closes', async () => {
    const { key, journal } = await group();
    const acks = await transact(key, [
      { stream: 'journal', json: 'a', recordMatch: 1 },
      { stream: 'journal', json: 'b', recordMatch: 2 },
      { stream: 'journal', json: 'c', recordMatch: 3, closeAfter: true },
    ]);
    expect(acks.map((a) => [a.records?.start, a.records?.next, a.closed])).toEqual([[1, 2, false], [2, 3, false], [3, 4, true]]);
    expect(await readAll(journal)).toEqual([{ first: true }, 'a', 'b', 'c']);
    const closed = await failure(transact(key, [{ stream: 'journal', json: 'd' }]));
    expect(closed).toBeInstanceOf(StreamClosedError);
    expect((closed as RillError).operation).toBe(0);
  });

  it('a refused operation leaves every stream as it was, and the error names the operation', async () => {
    const { key, journal, blobs } = await group();
    const before = await Promise.all([stateOf(journal), stateOf(blobs)]);
    const stale = await failure(transact(key, [{ stream: 'blobs', body: 'x' }, { stream: 'journal', json: 'late', recordMatch: 0 }]));
    expect(stale).toBeInstanceOf(RecordMatchFailedError);
    expect((stale as RecordMatchFailedError).operation).toBe(1);
    expect((stale as RecordMatchFailedError).recordNext).toBe(1);
    expect((stale as RillError).status).toBe(412);
    expect((stale as Error).message).toMatch(/^operation 1 \(journal\): /);
    const missing = await failure(transact(key, [{ stream: 'journal', json: 'x' }, { stream: 'blobs', body: 'y' }, { stream: 'absent', json: 1 }]));
    expect(missing).toBeInstanceOf(NotFoundError);
    expect([(missing as RillError).code, (missing as RillError).operation]).toEqual(['STREAM_NOT_FOUND', 2]);
    const mismatch = await failure(transact(key, [{ stream: 'blobs', json: 'not bytes' }]));
    expect([(mismatch as RillError).code, (mismatch as RillError).operation]).toEqual(['CONTENT_TYPE_MISMATCH', 0]);
    expect(await Promise.all([stateOf(journal), stateOf(blobs)])).toEqual(before);
  });

  it('a producer retry answers the original acknowledgements as duplicates; a partial retry is refused', async () => {
    const { key, journal, blobs } = await group();
    const producer = { id: 'writer', epoch: 3, seq: 0 };
    const operations: TransactionOperation[] = [
      { stream: 'journal', json: { order: 7 }, producer },
      { stream: 'blobs', body: 'order 7', producer },
    ];
    const original = await transact(key, operations);
    expect(original.map((a) => [a.duplicate, a.producer])).toEqual([[false, { epoch: 3, seq: 0 }], [false, { epoch: 3, seq: 0 }]]);
    const before = await Promise.all([stateOf(journal), stateOf(blobs)]);
    expect(await transact(key, operations)).toEqual(original.map((ack) => ({ ...ack, duplicate: true })));
    const partial = await failure(transact(key, [...operations, { stream: 'journal', json: 'no producer' }]));
    expect(partial).toBeInstanceOf(TransactionPartlyAppliedError);
    expect([(partial as RillError).status, (partial as RillError).operation]).toEqual([409, 2]);
    expect(await Promise.all([stateOf(journal), stateOf(blobs)])).toEqual(before);
  });

  it('refuses operations it cannot encode before sending anything', async () => {
    const { key } = await group();
    await expect(transact(key, [])).rejects.toThrow(RangeError);
    await expect(transact(key, [{ stream: 'journal', messages: [] }])).rejects.toThrow(RangeError);
    await expect(transact(key, [{ stream: 'journal', json: 1, body: '1' } as unknown as TransactionOperation])).rejects.toThrow(/exactly one of body, json and messages/);
  });
});

describe('bucket.affinityStream', () => {
  it('creates, appends, reads, heads and deletes a stream at /{bucket}/{key}/{stream}', async () => {
    const bucket = env.client.bucket(BUCKET);
    const stream = bucket.affinityStream('tenant-9', 'events');
    expect(stream.url).toBe(`${env.server.url}/${BUCKET}/tenant-9/events`);
    expect((await stream.create({ contentType: 'application/json' })).created).toBe(true);
    const appended = await stream.appendMessages([{ n: 1 }, { n: 2 }]);
    expect(appended.records).toEqual({ start: 0, next: 2 });
    expect(await readAll(stream)).toEqual([{ n: 1 }, { n: 2 }]);
    const info = await stream.head();
    expect(info.extensions).toContain('path-affinity-v1');
    expect(info.recordNext).toBe(2);
    expect((await bucket.list({ prefix: 'tenant-9/' })).streams).toEqual(['tenant-9/events']);
    await stream.delete();
    expect(await failure(stream.head())).toBeInstanceOf(NotFoundError);
  });
});

describe('a server without group transactions', () => {
  it('answers with TransactionsNotSupportedError, not a missing stream', async () => {
    const reference = new DurableStreamTestServer({ port: 0 });
    const url = await reference.start();
    try {
      const client = new RillClient({ url });
      const error = await failure(client.bucket('demo').transaction('key', [{ stream: 'journal', json: 1 }]));
      expect(error).toBeInstanceOf(TransactionsNotSupportedError);
      expect((error as RillError).code).toBe('TRANSACTIONS_NOT_SUPPORTED');
      expect((error as Error).message).toContain('does not serve group transactions');
    } finally {
      await reference.stop();
    }
  });
});
