/**
 * WAL group commit: a commit is reported durable only after an fsync that began after
 * it, and until then readers see each changed stream as it was before.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import type { StreamState } from '../../src/core/types.js';
import { WalDurability, type Fdatasync } from '../../src/storage/sqlite/durability.js';
import { removeDir, tempDataDir } from '../helpers/server.js';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach(removeDir));

function wal(): WalDurability {
  const dir = tempDataDir('rill-wal-');
  dirs.push(dir);
  writeFileSync(join(dir, 'rill.db-wal'), 'frames');
  return new WalDurability(join(dir, 'rill.db-wal'), dir);
}

const state = (tail: number) => ({ name: 'v1/s', tail }) as unknown as StreamState;
const change = (before: StreamState | null, after: StreamState | null) => new Map([['v1/s', { before, after }]]);
const durable = (w: WalDurability) => new Promise<unknown>((resolve) => w.whenDurable((error) => resolve(error)));

describe('WAL durability', () => {
  test('readers see the state before a commit until an fsync covers it', async () => {
    const w = wal();
    w.committed(change(null, state(5)));
    expect(w.durableState('v1/s')).toBeNull();
    expect(await durable(w)).toBeUndefined();
    expect(w.durableState('v1/s')).toBeUndefined();
  });

  test('under continuous commits readers advance commit by commit, never past what is durable', async () => {
    const w = wal();
    w.committed(change(null, state(1)));
    const first = durable(w);
    // Committed while the first fsync is in flight: that fsync does not cover it.
    w.committed(change(state(1), state(2)));
    expect(await first).toBeUndefined();
    expect(w.durableState('v1/s')).toEqual(state(1));
    expect(await durable(w)).toBeUndefined();
    expect(w.durableState('v1/s')).toBeUndefined();
  });

  test('a raised earliest offset makes readers wait only when its commit deleted bytes of the stream', () => {
    const w = wal();
    const at = (earliestOffset: number) => ({ id: 7, name: 'v1/s', tail: 10, earliestOffset, snapshot: null }) as unknown as StreamState;
    // A policy trim between deletion steps: the bytes stay stored, so the state before it reads them.
    w.committed(change(at(0), at(4)), new Set());
    expect(w.pendingRemoval('v1/s')).toBeUndefined();
    w.committed(change(at(4), at(6)), new Set([7]));
    expect(w.pendingRemoval('v1/s')).toBe(w.lastCommit());
    // Told nothing, any raise may have deleted bytes.
    w.committed(change(at(6), at(8)));
    expect(w.pendingRemoval('v1/s')).toBe(w.lastCommit());
  });

  test('a dropped stream stays readable until its drop is durable', async () => {
    const w = wal();
    w.committed(change(state(9), null));
    expect(w.durableState('v1/s')).toEqual(state(9));
    await durable(w);
    expect(w.durableState('v1/s')).toBeUndefined();
  });

  test('when the WAL cannot be synced, waiters hear the error, and so does every later one', async () => {
    const dir = tempDataDir('rill-wal-');
    dirs.push(dir);
    const w = new WalDurability(join(dir, 'missing-wal'), dir);
    w.committed(change(null, state(1)));
    expect(await durable(w)).toBeInstanceOf(Error);
    w.committed(change(state(1), state(2)));
    expect(await durable(w)).toBeInstanceOf(Error);
  });
});

/** A stand-in for fdatasync whose calls the test completes, in any order. */
function manualFlush() {
  const calls: Array<(error: NodeJS.ErrnoException | null) => void> = [];
  const flush: Fdatasync = (_fd, done) => void calls.push(done);
  return { flush, calls };
}

function walWith(flush: Fdatasync): WalDurability {
  const dir = tempDataDir('rill-wal-');
  dirs.push(dir);
  writeFileSync(join(dir, 'rill.db-wal'), 'frames');
  return new WalDurability(join(dir, 'rill.db-wal'), dir, flush);
}

describe('WAL durability with fsyncs overlapping', () => {
  test('a commit made during an fsync starts the next one at once; at most two run', () => {
    const { flush, calls } = manualFlush();
    const w = walWith(flush);
    w.committed(change(null, state(1)));
    w.whenDurable(() => {});
    expect(calls).toHaveLength(1);
    w.committed(change(state(1), state(2)));
    w.whenDurable(() => {});
    expect(calls).toHaveLength(2);
    w.committed(change(state(2), state(3)));
    w.whenDurable(() => {});
    expect(calls).toHaveLength(2);
    // The first ends: the third commit gets its fsync.
    calls[0]!(null);
    expect(calls).toHaveLength(3);
  });

  test('a later fsync that ends first releases everything before it; the earlier one then changes nothing', () => {
    const { flush, calls } = manualFlush();
    const w = walWith(flush);
    const heard: string[] = [];
    w.committed(change(null, state(1)));
    w.whenDurable((e) => heard.push(`first ${e ?? 'ok'}`));
    w.committed(change(state(1), state(2)));
    w.whenDurable((e) => heard.push(`second ${e ?? 'ok'}`));
    expect(w.durableState('v1/s')).toBeNull();
    calls[1]!(null);
    expect(heard).toEqual(['first ok', 'second ok']);
    expect(w.durableState('v1/s')).toBeUndefined();
    w.committed(change(state(2), state(3)));
    w.whenDurable((e) => heard.push(`third ${e ?? 'ok'}`));
    calls[0]!(null);
    // The first fsync covered only commit 1: commit 3 is not durable yet.
    expect(w.durableState('v1/s')).toEqual(state(2));
    expect(heard).toHaveLength(2);
    calls[2]!(null);
    expect(heard).toEqual(['first ok', 'second ok', 'third ok']);
    expect(w.durableState('v1/s')).toBeUndefined();
  });

  test('after one fsync fails, another that succeeds makes nothing durable', () => {
    const { flush, calls } = manualFlush();
    const w = walWith(flush);
    const heard: unknown[] = [];
    w.committed(change(null, state(1)));
    w.whenDurable((e) => heard.push(e));
    w.committed(change(state(1), state(2)));
    w.whenDurable((e) => heard.push(e));
    calls[0]!(Object.assign(new Error('EIO'), { code: 'EIO' }));
    calls[1]!(null);
    expect(heard).toHaveLength(2);
    expect(heard.every((e) => e instanceof Error)).toBe(true);
    expect(w.durableState('v1/s')).toBeNull();
  });
});

describe('a store that loses durability', () => {
  test('answers the writes it could not make durable as unknown, then refuses everything and reports it', async () => {
    const { SqliteStore } = await import('../../src/storage/sqlite/engine.js');
    const { DurabilityLostError, StorageUnavailableError } = await import('../../src/storage/errors.js');
    const { DEFAULT_PRODUCER_SETTINGS } = await import('../../src/core/types.js');
    class BrokenDisk extends SqliteStore {
      protected override whenDurable(done: (error?: unknown) => void): void {
        done(new Error('EIO: fsync failed'));
      }
    }
    const dir = tempDataDir('rill-broken-');
    dirs.push(dir);
    const store = new BrokenDisk({ dataDir: dir, producers: DEFAULT_PRODUCER_SETTINGS });
    const fatal: unknown[] = [];
    store.onFatal((error) => fatal.push(error));
    const request = { name: 'v1/x', bucket: null, contentType: 'text/plain', ttlSeconds: null, expiresAtMs: null, close: false, data: Buffer.alloc(0), streamSeq: null, incarnation: null, fork: null };
    await expect(store.run('createStream', request)).rejects.toBeInstanceOf(DurabilityLostError);
    expect(fatal).toHaveLength(1);
    await expect(store.run('createStream', { ...request, name: 'v1/y' })).rejects.toBeInstanceOf(StorageUnavailableError);
    await store.close();
  });
});
