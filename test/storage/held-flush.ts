/** An fsync stand-in for tests that hold commits between COMMIT and durable, and helpers to step them. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_PRODUCER_SETTINGS } from '../../src/core/types.js';
import type { Fdatasync } from '../../src/storage/sqlite/durability.js';
import { SqliteStore } from '../../src/storage/sqlite/engine.js';

/** An fsync stand-in: completes at once unless held; held calls complete on release. */
export class HeldFlush {
  private held: Array<(error: NodeJS.ErrnoException | null) => void> | null = null;
  readonly flush: Fdatasync = (_fd, done) => {
    if (this.held) this.held.push(done);
    else setImmediate(() => done(null));
  };
  hold(): void {
    this.held = [];
  }
  release(): void {
    const calls = this.held ?? [];
    this.held = null;
    for (const done of calls) done(null);
  }
  /** Calls held now. */
  get heldCount(): number {
    return this.held?.length ?? 0;
  }
  /** Completes the oldest `count` held calls and keeps holding the rest and later ones. */
  releaseFirst(count: number, error: NodeJS.ErrnoException | null = null): void {
    const calls = this.held?.splice(0, count) ?? [];
    for (const done of calls) done(error);
  }
}

/** Lets timers, immediates and the stand-in fsyncs run a few rounds. */
export async function ticks(n = 5): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** Records a promise's answer when it comes, so a test can ask whether it came yet. */
export function watch<T>(promise: Promise<T>): { answered: () => boolean; value: () => T } {
  let done = false;
  let result: T;
  void promise.then((value) => {
    done = true;
    result = value;
  });
  return { answered: () => done, value: () => result };
}

/** SQLite stores on held fsyncs, each in a temp directory of its own, closed and removed together. */
export class HeldStores {
  private readonly opened: Array<{ store: SqliteStore; disk: HeldFlush; dir: string }> = [];

  /** `nowMs`: the store's clock, when the test moves time. */
  open(prefix: string, nowMs?: () => number): { store: SqliteStore; disk: HeldFlush; dir: string } {
    const dir = mkdtempSync(join(tmpdir(), prefix));
    const disk = new HeldFlush();
    const store = new SqliteStore({ dataDir: dir, producers: DEFAULT_PRODUCER_SETTINGS, fdatasync: disk.flush, ...(nowMs ? { nowMs } : {}) });
    const entry = { store, disk, dir };
    this.opened.push(entry);
    return entry;
  }

  /** For afterEach: a failed assertion may leave commits held, and closing waits for them. */
  async closeAll(): Promise<void> {
    for (const { store, disk, dir } of this.opened.splice(0)) {
      disk.release();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }
}
