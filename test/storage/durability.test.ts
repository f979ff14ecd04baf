/**
 * WAL group commit: a commit is reported durable only after an fsync that began after
 * it, and until then readers see each changed stream as it was before.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import type { StreamState } from '../../src/core/types.js';
import { WalDurability } from '../../src/storage/sqlite/durability.js';
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

describe('a store that loses durability', () => {
  test('answers the writes it could not make durable as unknown, then refuses everything and reports it', async () => {
    const { SqliteStore } = await import('../../src/storage/sqlite/engine.js');
    const { DurabilityLostError, StorageUnavailableError } = await import('../../src/storage/batched.js');
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
