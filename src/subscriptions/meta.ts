/**
 * The small durable values of subscriptions (signing keys, the wake-token secret) live in
 * the storage engine's meta table. Several nodes may share one engine and start at once,
 * so every value is created and changed by compare-and-set: whoever loses re-reads.
 */

/** The two meta operations of the storage engines' `SubscriptionReads`. */
export interface MetaStore {
  getMeta(key: string): Promise<string | undefined>;
  /** Stores `value` only when the current value is `expected` (undefined: absent); answers whether it did. */
  compareAndSetMeta(key: string, expected: string | undefined, value: string): Promise<boolean>;
}

/** How often a compare-and-set is retried against other nodes' writes before giving up. */
const MAX_CAS_ROUNDS = 16;

/** The value under `key`, creating it with `create()` if absent; every node ends with the same one. */
export async function ensureMeta(meta: MetaStore, key: string, create: () => string): Promise<string> {
  const current = await meta.getMeta(key);
  if (current !== undefined) return current;
  const created = create();
  if (await meta.compareAndSetMeta(key, undefined, created)) return created;
  const winner = await meta.getMeta(key);
  if (winner === undefined) throw new Error(`meta ${key} was neither created here nor by anyone else`);
  return winner;
}

/**
 * Replaces the value under `key` with `change(current)` by compare-and-set, re-reading
 * and recomputing when another node changed it first. Answers the value stored.
 */
export async function updateMeta(meta: MetaStore, key: string, change: (current: string | undefined) => string): Promise<string> {
  for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
    const current = await meta.getMeta(key);
    const next = change(current);
    if (await meta.compareAndSetMeta(key, current, next)) return next;
  }
  throw new Error(`meta ${key} changed under ${MAX_CAS_ROUNDS} compare-and-set attempts in a row`);
}
