/**
 * Faults while recent appends are indexed (storage/sqlite/recent.ts). Indexing runs after
 * a batch has committed and been answered, so a fault there must neither lose nor
 * un-acknowledge anything: when the storage fails, the appends stay recent and readable
 * and a later commit indexes them; a broken invariant stops the store, and a restart
 * finds every acknowledged append.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_PRODUCER_SETTINGS } from '../../src/core/types.js';
import { SqliteStore } from '../../src/storage/sqlite/engine.js';
import { StorageUnavailableError } from '../../src/storage/errors.js';
import { appendRequest, createRequest, readAll } from '../storage/fixtures.js';
import { removeDir, tempDataDir } from '../helpers/server.js';
import { FaultyStore, InjectedBug } from './faulty-store.js';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach(removeDir));

const RECENT = { sealRows: 4, sealBytes: 1 << 30, stepRows: 2 };

function open(): { store: FaultyStore; dataDir: string } {
  const dataDir = tempDataDir('rill-indexing-');
  dirs.push(dataDir);
  return { store: new FaultyStore({ dataDir, producers: DEFAULT_PRODUCER_SETTINGS, recentIndexing: RECENT }), dataDir };
}

/** Appends `count` numbered parts to `name`; answers what the stream holds afterwards. */
async function appendParts(store: SqliteStore, name: string, from: number, count: number): Promise<string> {
  for (let i = from; i < from + count; i++) {
    const outcome = await store.run('append', { name, request: appendRequest(`<${i}>`) });
    expect(outcome.kind).toBe('appended');
  }
  return Array.from({ length: from + count }, (_, i) => `<${i}>`).join('');
}

describe('faults while recent appends are indexed', () => {
  it('keeps appends recent and readable when the storage fails, and indexes them once it works again', async () => {
    const { store, dataDir } = open();
    await store.run('createStream', createRequest('s'));
    store.failIndexing = 'full';
    let expected = await appendParts(store, 's', 0, 12);
    expect(store.indexingFailures).toBeGreaterThan(3);
    expect((await readAll(store, 's')).toString()).toBe(expected);
    store.failIndexing = null;
    expected = await appendParts(store, 's', 12, 12);
    expect((await readAll(store, 's')).toString()).toBe(expected);
    await store.close();
    const reopened = new SqliteStore({ dataDir, producers: DEFAULT_PRODUCER_SETTINGS });
    expect((await readAll(reopened, 's')).toString()).toBe(expected);
    await reopened.close();
  });

  it('stops the store on a broken invariant; a restart finds every acknowledged append', async () => {
    const { store, dataDir } = open();
    const fatal: unknown[] = [];
    store.onFatal((error) => fatal.push(error));
    await store.run('createStream', createRequest('s'));
    const expected = await appendParts(store, 's', 0, 3);
    store.failIndexing = 'bug';
    // The fourth append seals; indexing it fails after the append was committed.
    expect((await store.run('append', { name: 's', request: appendRequest('<3>') })).kind).toBe('appended');
    expect(fatal).toHaveLength(1);
    expect(fatal[0]).toBeInstanceOf(InjectedBug);
    await expect(store.run('append', { name: 's', request: appendRequest('<4>') })).rejects.toBeInstanceOf(StorageUnavailableError);
    await store.close();
    const reopened = new SqliteStore({ dataDir, producers: DEFAULT_PRODUCER_SETTINGS });
    expect((await readAll(reopened, 's')).toString()).toBe(`${expected}<3>`);
    await reopened.close();
  });
});
