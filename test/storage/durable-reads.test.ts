/**
 * Reads while a commit waits for its fsync. Readers see durable state only; a commit that
 * destroys stored bytes (a trim, a drop, a replaced snapshot body) must not let a reader
 * pair the stream's durable state with bytes that are already gone, and bucket reads must
 * not answer what a crash could still undo. The fsync is a stand-in the test holds.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { bucketStreamKey, v1StreamKey } from '../../src/protocol/ids.js';
import { MAX_REMOVAL_WAITS, SqliteStore } from '../../src/storage/sqlite/engine.js';
import { ReadNotSettledError, storageRefusal } from '../../src/storage/errors.js';
import { statusOf } from '../../src/protocol/errors.js';
import { JSON_TYPE, appendRequest, createRequest } from './fixtures.js';
import { HeldStores, ticks, watch, type HeldFlush } from './held-flush.js';

const stores = new HeldStores();
afterEach(() => stores.closeAll());

const open = () => stores.open('rill-durable-reads-');

/**
 * Starts `writes` in turn with the fsync held, then `read`; releases the fsync and answers
 * what the read saw once everything settled.
 */
async function readWhileHeld<T>(disk: HeldFlush, writes: Array<() => Promise<unknown>>, read: () => Promise<T>): Promise<T> {
  disk.hold();
  const pending: Array<Promise<unknown>> = [];
  for (const write of writes) {
    pending.push(write());
    await ticks();
  }
  const seen = read();
  await ticks();
  disk.release();
  await Promise.all(pending);
  return seen;
}

/** The stream's bytes from 0 as a reader would get them, or null when it finds no stream. */
async function wholeOrNothing(store: SqliteStore, name: string): Promise<string | null> {
  const stream = await store.getStream(name);
  return stream ? (await store.readRange(stream, 0, 100)).toString() : null;
}

const publish = (store: SqliteStore, name: string, offset: number, body: string) =>
  store.run('publishSnapshot', {
    name,
    request: { offset, contentType: 'text/x-fold', digest: `d-${body}`, match: null, incarnation: null },
    body: Buffer.from(body),
  });

describe('reads while a destructive commit waits for its fsync', () => {
  it('a trim: the state a reader gets and the bytes it reads always agree', async () => {
    const { store, disk } = open();
    const name = v1StreamKey('trimmed');
    const content = '1\n2\n3\n4\n';
    await store.run('createStream', createRequest(name, { contentType: JSON_TYPE, data: Buffer.from('1\n2\n3\n') }));
    await store.run('append', { name, request: appendRequest('4\n', { contentType: JSON_TYPE }) });
    await publish(store, name, 4, 'folded');
    const seen = await readWhileHeld(disk, [() => store.run('setRetention', { name, request: { offset: 4, incarnation: null } })], async () => {
      const stream = (await store.getStream(name))!;
      return { earliest: stream.earliestOffset, bytes: (await store.readRange(stream, stream.earliestOffset, 100)).toString() };
    });
    expect(seen.bytes).toBe(content.slice(seen.earliest));
  });

  it('a replaced snapshot: the body read is the one the stream state names', async () => {
    const { store, disk } = open();
    const name = v1StreamKey('snap');
    await store.run('createStream', createRequest(name, { data: Buffer.from('aaaa') }));
    await store.run('append', { name, request: appendRequest('bbbb') });
    expect((await publish(store, name, 4, 'first')).kind).toBe('published');
    const seen = await readWhileHeld(disk, [() => publish(store, name, 8, 'second')], async () => {
      const stream = (await store.getStream(name))!;
      return { digest: stream.snapshot!.digest, body: (await store.snapshotBody(stream))!.toString() };
    });
    expect(seen.digest).toBe(`d-${seen.body}`);
  });

  it('a drop: a reader finds the stream whole or not at all', async () => {
    const { store, disk } = open();
    const name = v1StreamKey('dropped');
    await store.run('createStream', createRequest(name, { data: Buffer.from('kept until durable') }));
    const seen = await readWhileHeld(disk, [() => store.run('deleteStream', { name, incarnation: null })], () => wholeOrNothing(store, name));
    if (seen !== null) expect(seen).toBe('kept until durable');
  });

  it('a recreation at the same name: a reader gets the old stream whole, nothing, or the new one', async () => {
    const { store, disk } = open();
    const name = v1StreamKey('again');
    await store.run('createStream', createRequest(name, { data: Buffer.from('old bytes') }));
    const writes = [
      () => store.run('deleteStream', { name, incarnation: null }),
      () => store.run('createStream', createRequest(name, { data: Buffer.from('new') })),
    ];
    expect([null, 'old bytes', 'new']).toContain(await readWhileHeld(disk, writes, () => wholeOrNothing(store, name)));
    expect(await wholeOrNothing(store, name)).toBe('new');
  });

  it('appends do not hold readers back: the durable state is answered at once', async () => {
    const { store, disk } = open();
    const name = v1StreamKey('hot');
    await store.run('createStream', createRequest(name, { data: Buffer.from('ab') }));
    disk.hold();
    const append = store.run('append', { name, request: appendRequest('cd') });
    await ticks();
    const read = watch(store.getStream(name));
    await ticks();
    expect(read.answered()).toBe(true);
    expect(read.value()!.tail).toBe(2);
    disk.release();
    await append;
  });
});

describe('bucket reads while a commit waits for its fsync', () => {
  it('a bucket whose creation is not durable is not reported', async () => {
    const { store, disk } = open();
    disk.hold();
    const created = store.run('createBucket', { id: 'pending' });
    await ticks();
    const read = watch(store.getBucket('pending'));
    await ticks();
    if (read.answered()) expect(read.value()).toBeUndefined();
    disk.release();
    await created;
    await ticks();
    expect(read.answered()).toBe(true);
    expect(await store.getBucket('pending')).toMatchObject({ id: 'pending', streamCount: 0 });
  });

  it('a name dropped and recreated without pause: its reader is refused (503) after a bounded wait, not held forever', async () => {
    const { store, disk } = open();
    const name = v1StreamKey('churned');
    await store.run('createStream', createRequest(name, { data: Buffer.from('v0') }));
    disk.hold();
    const writes: Array<Promise<unknown>> = [];
    const recreate = async (n: number) => {
      writes.push(store.run('deleteStream', { name, incarnation: null }));
      writes.push(store.run('createStream', createRequest(name, { data: Buffer.from(`v${n}`) })));
      await ticks();
    };
    await recreate(1);
    const read = watch(store.getStream(name).then(() => 'answered', (error: unknown) => error));
    // Each time the fsyncs the reader waits for end, another recreation is already pending.
    for (let n = 2; n <= MAX_REMOVAL_WAITS + 2 && !read.answered(); n++) {
      const earlier = disk.heldCount;
      await recreate(n);
      disk.releaseFirst(earlier);
      await ticks();
    }
    expect(read.answered()).toBe(true);
    const refusal = read.value();
    expect(refusal).toBeInstanceOf(ReadNotSettledError);
    // The server answers it as it answers every typed storage refusal: 503 with Retry-After.
    const answer = storageRefusal(refusal);
    expect(answer?.code).toBe('UNAVAILABLE');
    expect(statusOf(answer!.code)).toBe(503);
    expect(answer?.fields?.retryAfterSeconds).toBe(1);
    // Once the churn stops, the same read is answered with the newest stream.
    disk.release();
    await Promise.all(writes);
    expect(await wholeOrNothing(store, name)).toMatch(/^v\d+$/);
  });

  it('a stream whose deletion is not durable is still listed and counted', async () => {
    const { store, disk } = open();
    await store.run('createBucket', { id: 'shelf' });
    for (const id of ['a', 'b']) await store.run('createStream', createRequest(bucketStreamKey('shelf', id), { bucket: 'shelf' }));
    disk.hold();
    const drop = store.run('deleteStream', { name: bucketStreamKey('shelf', 'a'), incarnation: null });
    await ticks();
    const listing = watch(store.listStreams('shelf', '', null, 10));
    const info = watch(store.getBucket('shelf'));
    await ticks();
    if (listing.answered()) expect(listing.value().names).toEqual(['a', 'b']);
    if (info.answered()) expect(info.value()!.streamCount).toBe(2);
    disk.release();
    await drop;
    await ticks();
    expect(listing.answered() && info.answered()).toBe(true);
    expect((await store.listStreams('shelf', '', null, 10)).names).toEqual(['b']);
    expect((await store.getBucket('shelf'))!.streamCount).toBe(1);
  });

  it("a read's TTL renewal, stored by a commit whose fsync is held, still reaches readers", async () => {
    let nowMs = 1_700_000_000_000;
    const { store, disk } = stores.open('rill-durable-reads-', () => nowMs);
    const name = v1StreamKey('renewed');
    await store.run('createStream', createRequest(name, { ttlSeconds: 2 }));
    nowMs += 1_500;
    store.touch((await store.getStream(name))!, nowMs);
    // The next batch (another command's) stores the renewal; its fsync is held.
    const seen = await readWhileHeld(disk, [() => store.run('createStream', createRequest(v1StreamKey('other')))], () => store.getStream(name));
    // Read while the fsync was held: the stream as renewed, not as created (which expired at +2 s).
    expect(seen?.lastAccessMs).toBe(nowMs);
  });
});
