/**
 * The SQLite engine's subscriptions: `subscriptions`, `subscription_links` and `meta`
 * (schema.ts, version 8), over statements prepared once, on first use. Writes go to the
 * tables at once inside the batch's transaction (subscription commands are rare: nothing
 * is held).
 *
 * A stream's tail is never read from its row: a plain append leaves `streams.tail`
 * behind (stream-rows.ts), so tails come from StreamRows, which also holds the changes
 * made earlier in the same batch. Rows of `streams` do give existence and `deleted`,
 * which every change but a plain append writes at once.
 */
import type Database from 'better-sqlite3';
import type { LinkView, SubscriptionLink, SubscriptionState } from '../../core/subscription-types.js';
import { compareUtf8 } from '../../core/utf8-order.js';
import {
  LINK_COLUMNS,
  linkFromRow,
  linkRow,
  SUBSCRIPTION_COLUMNS,
  subscriptionFromRecord,
  subscriptionRow,
  type LinkRow,
  type SubscriptionRow,
} from '../subscription-columns.js';
import type { SubscriptionTxn } from '../executor.js';
import { linkedTail, pendingAt } from '../../core/subscription-queries.js';
import type { StreamRows } from './stream-rows.js';
import { preparedOnFirstUse } from './first-use.js';
import { BOUND_LIMIT } from './statements.js';

type RecordRow = { record: string };

function prepare(db: Database.Database) {
  const named = (columns: readonly string[]) => columns.map((c) => `@${c}`).join(', ');
  return preparedOnFirstUse({
    subscription: () => db.prepare<[string], RecordRow>('SELECT record FROM subscriptions WHERE key = ?'),
    putSubscription: () => db.prepare<[SubscriptionRow]>(
      `INSERT OR REPLACE INTO subscriptions (${SUBSCRIPTION_COLUMNS.join(', ')}) VALUES (${named(SUBSCRIPTION_COLUMNS)})`,
    ),
    deleteSubscription: () => db.prepare<[string]>('DELETE FROM subscriptions WHERE key = ?'),
    deleteSubscriptionLinks: () => db.prepare<[string]>('DELETE FROM subscription_links WHERE sub_key = ?'),
    countSubscriptions: () => db.prepare<[], { n: number }>('SELECT count(*) AS n FROM subscriptions'),
    patternSubscriptions: () => db.prepare<[string], RecordRow>('SELECT record FROM subscriptions WHERE scope = ? AND has_pattern = 1 ORDER BY key'),
    scopeKeys: () => db.prepare<[string], { key: string }>('SELECT key FROM subscriptions WHERE scope = ? ORDER BY key'),
    // Keys from `from` on (the scope's first key, or after the page's last), in key order.
    subscriptionsFrom: () => db.prepare<[string, string, number], RecordRow & { key: string }>(
      `SELECT key, record FROM subscriptions WHERE key >= ? AND key > ? ORDER BY key LIMIT ${BOUND_LIMIT}`,
    ),
    link: () => db.prepare<[string, string], LinkRow>('SELECT * FROM subscription_links WHERE sub_key = ? AND stream = ?'),
    putLink: () => db.prepare<[LinkRow]>(`INSERT OR REPLACE INTO subscription_links (${LINK_COLUMNS.join(', ')}) VALUES (${named(LINK_COLUMNS)})`),
    deleteLink: () => db.prepare<[string, string]>('DELETE FROM subscription_links WHERE sub_key = ? AND stream = ?'),
    deleteStreamLinks: () => db.prepare<[string]>('DELETE FROM subscription_links WHERE stream = ?'),
    countLinks: () => db.prepare<[string], { n: number }>('SELECT count(*) AS n FROM subscription_links WHERE sub_key = ?'),
    linksAfter: () => db.prepare<[string, string, number], LinkRow>(`SELECT * FROM subscription_links WHERE sub_key = ? AND path > ? ORDER BY path LIMIT ${BOUND_LIMIT}`),
    // Every link's stream and cursor, in path order, from the index alone (arrays: 10,000 rows a call).
    cursors: () => db.prepare<[string], [string, number]>('SELECT stream, acked FROM subscription_links WHERE sub_key = ? ORDER BY path').raw(),
    undeletedFrom: () => db.prepare<[string], { name: string }>('SELECT name FROM streams WHERE name >= ? AND deleted = 0 ORDER BY name'),
    linkIndex: () => db.prepare<[string, string, number], { stream: string; sub_key: string }>(
      `SELECT stream, sub_key FROM subscription_links WHERE (stream, sub_key) > (?, ?) ORDER BY stream, sub_key LIMIT ${BOUND_LIMIT}`,
    ),
    dueByTime: () => db.prepare<[number], { key: string }>('SELECT key FROM subscriptions WHERE due_ms <= ?'),
    idle: () => db.prepare<[], { key: string }>('SELECT key FROM subscriptions WHERE awake = 0'),
    meta: () => db.prepare<[string], { value: string }>('SELECT value FROM meta WHERE key = ?'),
    putMeta: () => db.prepare<[string, string]>('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)'),
  });
}

/** A subscription's cursors in path order, with where each stream's entry is. */
interface Cursors {
  order: Array<[string, number]>;
  at: Map<string, number>;
}

/** Most cursors kept in memory across subscriptions; past it the cache starts over. */
const MAX_CACHED_CURSORS = 1_000_000;

export class SqliteSubscriptions implements SubscriptionTxn {
  private readonly sql: ReturnType<typeof prepare>;
  /**
   * Each subscription's cursors as stored (committed, or written by the open transaction):
   * every wake, claim and finished wake scans them all (10,000 rows read from SQLite took
   * 9-18 ms a scan; the loop over them in memory takes 3-4). Kept in step by every link
   * change, and forgotten when a transaction rolls back (`forgetCached`).
   */
  private readonly cursorCache = new Map<string, Cursors>();
  private cachedCursors = 0;

  constructor(
    private readonly db: Database.Database,
    private readonly streams: StreamRows,
  ) {
    this.sql = prepare(db);
  }

  getSubscription(key: string): SubscriptionState | undefined {
    const row = this.sql.subscription.get(key);
    return row ? subscriptionFromRecord(row.record) : undefined;
  }

  putSubscription(subscription: SubscriptionState): void {
    this.sql.putSubscription.run(subscriptionRow(subscription));
  }

  dropSubscription(key: string): void {
    this.sql.deleteSubscription.run(key);
    this.sql.deleteSubscriptionLinks.run(key);
    this.uncache(key);
  }

  countSubscriptions(): number {
    return this.sql.countSubscriptions.get()!.n;
  }

  patternSubscriptions(scope: string): SubscriptionState[] {
    return this.sql.patternSubscriptions.all(scope).map((row) => subscriptionFromRecord(row.record));
  }

  scopeSubscriptionKeys(scope: string): string[] {
    return this.sql.scopeKeys.all(scope).map((row) => row.key);
  }

  getLink(subKey: string, stream: string): SubscriptionLink | undefined {
    const row = this.sql.link.get(subKey, stream);
    return row ? linkFromRow(row) : undefined;
  }

  putLink(link: SubscriptionLink): void {
    this.sql.putLink.run(linkRow(link));
    const cached = this.cursorCache.get(link.subKey);
    const index = cached?.at.get(link.stream);
    // A new link takes its place in path order: the next scan reads them again.
    if (index === undefined) this.uncache(link.subKey);
    else cached!.order[index]![1] = link.ackedOffset;
  }

  dropLink(subKey: string, stream: string): void {
    this.sql.deleteLink.run(subKey, stream);
    this.uncache(subKey);
  }

  dropStreamLinks(stream: string): void {
    if (this.sql.deleteStreamLinks.run(stream).changes > 0) this.forgetCached();
  }

  /** The transaction rolled back: what the cache took from it may never have been stored. */
  forgetCached(): void {
    this.cursorCache.clear();
    this.cachedCursors = 0;
  }

  private uncache(subKey: string): void {
    const cached = this.cursorCache.get(subKey);
    if (!cached) return;
    this.cachedCursors -= cached.order.length;
    this.cursorCache.delete(subKey);
  }

  private cursorsOf(subKey: string): Array<[string, number]> {
    const cached = this.cursorCache.get(subKey);
    if (cached) return cached.order;
    const order = this.sql.cursors.all(subKey);
    if (this.cachedCursors + order.length > MAX_CACHED_CURSORS) this.forgetCached();
    this.cursorCache.set(subKey, { order, at: new Map(order.map(([stream], i) => [stream, i])) });
    this.cachedCursors += order.length;
    return order;
  }

  countLinks(subKey: string): number {
    return this.sql.countLinks.get(subKey)!.n;
  }

  links(subKey: string, afterPath: string | null, limit: number): LinkView[] {
    return this.sql.linksAfter.all(subKey, afterPath ?? '', limit).map((row) => this.view(row));
  }

  /**
   * Scans the subscription's cursors in path order: whether a link is pending is known only
   * from its stream's tail (StreamRows), so the scan is in JavaScript, on the index alone.
   */
  pendingLinks(subKey: string, limit: number): LinkView[] {
    const pending: LinkView[] = [];
    if (limit <= 0) return pending;
    for (const [stream, acked] of this.cursorsOf(subKey)) {
      const tail = linkedTail(this.streams.byName(stream));
      if (!pendingAt(tail, acked)) continue;
      if (pending.push({ link: this.getLink(subKey, stream)!, tail }) === limit) break;
    }
    return pending;
  }

  streamsByPrefix(keyPrefix: string, limit: number): Array<{ name: string; tail: number }> {
    const found: Array<{ name: string; tail: number }> = [];
    if (limit <= 0) return found;
    // Names with the prefix are one contiguous run from the prefix on (BINARY collation).
    for (const { name } of this.sql.undeletedFrom.iterate(keyPrefix)) {
      if (!name.startsWith(keyPrefix)) break;
      found.push({ name, tail: this.streams.byName(name)!.tail });
      if (found.length === limit) break;
    }
    return found;
  }

  // ---- reads outside a batch (the engine answers them once what they saw is durable) ---

  listSubscriptions(scope: string | null, afterKey: string | null, limit: number): SubscriptionState[] {
    const prefix = scope === null ? '' : `${scope}/`;
    return this.sql.subscriptionsFrom
      .all(prefix, afterKey ?? '', limit)
      .filter((row) => row.key.startsWith(prefix))
      .map((row) => subscriptionFromRecord(row.record));
  }

  linkIndex(after: { stream: string; subKey: string } | null, limit: number): Array<{ stream: string; subKey: string }> {
    return this.sql.linkIndex.all(after?.stream ?? '', after?.subKey ?? '', limit).map((row) => ({ stream: row.stream, subKey: row.sub_key }));
  }

  /** Those due by time, and those with no wake in flight whose some link is pending; in key order. */
  /** isDue (core/subscription-queries.ts): `due_ms` is dueAtMs; an idle one is due with a pendingLinks answer. */
  dueSubscriptions(nowMs: number, limit: number): string[] {
    const due = this.sql.dueByTime.all(nowMs).map((row) => row.key);
    for (const { key } of this.sql.idle.all()) if (this.pendingLinks(key, 1).length > 0) due.push(key);
    return due.sort(compareUtf8).slice(0, limit);
  }

  getMeta(key: string): string | undefined {
    return this.sql.meta.get(key)?.value;
  }

  /** In a transaction of its own: the engine makes it durable before answering. */
  compareAndSetMeta(key: string, expected: string | undefined, value: string): boolean {
    return this.db.transaction(() => {
      if (this.getMeta(key) !== expected) return false;
      this.sql.putMeta.run(key, value);
      return true;
    })();
  }

  private view(row: LinkRow): LinkView {
    return { link: linkFromRow(row), tail: linkedTail(this.streams.byName(row.stream)) };
  }
}
