/**
 * A meta table in memory: the two operations the storage engines implement for
 * subscriptions' durable values, with an await between every step so that concurrent
 * callers interleave as they do against a database. It counts lost compare-and-sets, so
 * tests can show a race really happened.
 */
import type { MetaStore } from '../../src/subscriptions/meta.js';

export class MemoryMeta implements MetaStore {
  readonly values = new Map<string, string>();
  casLost = 0;

  async getMeta(key: string): Promise<string | undefined> {
    await Promise.resolve();
    return this.values.get(key);
  }

  async compareAndSetMeta(key: string, expected: string | undefined, value: string): Promise<boolean> {
    await Promise.resolve();
    if (this.values.get(key) !== expected) {
      this.casLost++;
      return false;
    }
    this.values.set(key, value);
    return true;
  }
}
