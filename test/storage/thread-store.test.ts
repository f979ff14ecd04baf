/**
 * The stores of one process share its storage thread (src/storage/thread/host.ts): closing
 * one answers what was asked of it before, refuses what is asked after, and leaves the
 * others serving. A server runs SQLite there only with --sqlite-thread on.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { DEFAULT_PRODUCER_SETTINGS } from '../../src/core/types.js';
import { v1StreamKey } from '../../src/protocol/ids.js';
import { storageRefusal } from '../../src/storage/errors.js';
import { ThreadStore } from '../../src/storage/thread/host.js';
import { serveSettingsOf } from '../../src/cli/serve-options.js';
import { openStore } from '../../src/storage/open.js';
import { SqliteStore } from '../../src/storage/sqlite/engine.js';
import { DEFAULT_SETTINGS, type ServerSettings } from '../../src/http/settings.js';
import { appendRequest, createRequest, expectAppended, expectCreated } from './fixtures.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function openThreadStore(): Promise<ThreadStore> {
  const dataDir = mkdtempSync(join(tmpdir(), 'rill-thread-store-'));
  dirs.push(dataDir);
  return ThreadStore.open({ dataDir, producers: DEFAULT_PRODUCER_SETTINGS });
}

it('closing one store answers what was asked before, refuses what is asked after, and leaves the others serving', async () => {
  const [closing, staying] = await Promise.all([openThreadStore(), openThreadStore()]);
  const name = v1StreamKey('s');
  for (const store of [closing, staying]) expectCreated(await store.run('createStream', createRequest(name, { ttlSeconds: 60 })));
  const stream = (await closing.getStream(name))!;
  const before = closing.run('append', { name, request: appendRequest('before close') });
  const closed = closing.close();
  const after = closing.run('append', { name, request: appendRequest('after close') }).catch((error: unknown) => error);
  // A read's renewal after close is dropped: nothing reaches the thread for a closed store.
  closing.touch(stream, Date.now());
  expectAppended(await before);
  expect(storageRefusal(await after)?.code).toBe('STORAGE_UNAVAILABLE');
  await expect(closing.getStream(name)).rejects.toSatisfy((error: unknown) => storageRefusal(error)?.code === 'STORAGE_UNAVAILABLE');
  await closed;
  expectAppended(await staying.run('append', { name, request: appendRequest('still here') }));
  expect((await staying.readRange((await staying.getStream(name))!, 0, 100)).toString()).toBe('still here');
  await staying.close();
});

it('a server opens SQLite on the storage thread with --sqlite-thread on, and on the event loop otherwise', async () => {
  const settingsOf = async (extra: string[]): Promise<ServerSettings> => {
    const dataDir = mkdtempSync(join(tmpdir(), 'rill-thread-store-'));
    dirs.push(dataDir);
    return { ...DEFAULT_SETTINGS, ...(await serveSettingsOf(['--data', dataDir, ...extra], {})).settings };
  };
  const stores = [await openStore(await settingsOf(['--sqlite-thread', 'on']), { nowMs: Date.now }), await openStore(await settingsOf([]), { nowMs: Date.now })];
  try {
    expect(stores[0]).toBeInstanceOf(ThreadStore);
    expect(stores[1]).toBeInstanceOf(SqliteStore);
    const name = v1StreamKey('s');
    for (const store of stores) {
      expectCreated(await store.run('createStream', createRequest(name)));
      expectAppended(await store.run('append', { name, request: appendRequest('both ways') }));
      expect((await store.readRange((await store.getStream(name))!, 0, 100)).toString()).toBe('both ways');
      // Stats' sums cross to the thread as any read does.
      expect(await store.heldTotals()).toEqual({ bytes: 9, messages: 1 });
    }
  } finally {
    await Promise.all(stores.map((store) => store.close()));
  }
});
