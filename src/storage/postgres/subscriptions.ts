/**
 * The PostgreSQL batch's subscriptions (PgBatch delegates here). As for streams, point
 * lookups load one row under a row lock (two nodes changing one subscription or link
 * wait for each other) and stop the step with MissingState until they have it; changes
 * are kept here and in PendingWrites, undone with the step, and sent in bulk.
 *
 * Questions over many rows (counts, link pages, pending links, prefix scans) are asked
 * of PostgreSQL after the earlier steps' changes were sent; what the step under way
 * changed since (it cannot be sent: the step may still be undone) is laid over the
 * answer here. So the rows asked for exclude what the step changed, and the step's own
 * links and the batch's own stream states (tails, deletions) take their place.
 *
 * An answer is kept for the rest of the step under a key naming everything the query
 * depended on: the sends so far (`flushes`), the subscription changes so far
 * (`version`, undone with the step) and the streams the batch holds (`byName` only grows
 * within a step). A step rerun from its start asks the same questions in the same order.
 */
import type { LinkView, SubscriptionLink, SubscriptionState } from '../../core/subscription-types.js';
import type { StreamState } from '../../core/types.js';
import { compareUtf8 } from '../../core/utf8-order.js';
import type { MissingState } from '../missing.js';
import {
  firstByPath,
  linkFromRow,
  subscriptionFromRecord,
  type LinkRow,
} from '../subscription-columns.js';
import type { SubscriptionTxn } from '../executor.js';
import { isPending, linkedTail } from '../../core/subscription-queries.js';
import type { Queryable } from './chunks.js';
import { linkKey, type LinkWrite, type PendingWrites, type UndoLog } from './writes.js';

/**
 * Taken shared by a question for the scope's pattern subscriptions (a stream being
 * created) and exclusive by a prefix scan (a pattern subscription being created), so
 * that of two such batches on different nodes the later one sees what the earlier
 * committed: without it, a stream created while a pattern subscription is, would be
 * linked by neither.
 */
const PATTERN_LOCK = 0x72696c6d;

/** What the batch lends: its undo log, unsent writes, stream view and ways to ask. */
export interface BatchAccess {
  readonly undo: UndoLog;
  writes(): PendingWrites;
  /** How many times the batch sent its changes so far. */
  flushes(): number;
  /** The batch's own state of a stream it loaded or changed (null: none); undefined when it holds nothing for the name. */
  knownStream(name: string): StreamState | null | undefined;
  knownStreamNames(): string[];
  ask<T>(key: string, load: () => Promise<T>): T;
  missing(flushFirst: boolean, load: () => Promise<void>): MissingState;
  db: Queryable;
}

type TailRow = LinkRow & { tail: number | null; deleted: number | null };

export class PgSubscriptions implements SubscriptionTxn {
  /** Subscriptions loaded (locked) or written by the batch; null when known absent. */
  private readonly subscriptions = new Map<string, SubscriptionState | null>();
  /** Whether a row is stored, as far as the batch knows (loaded, or as last sent). */
  private readonly stored = new Map<string, boolean>();
  private readonly knownLinks = new Map<string, LinkWrite>();
  /** Subscriptions and streams whose links this batch dropped: a link of theirs it has not written is gone. */
  private readonly droppedSubs = new Map<string, true>();
  private readonly droppedStreams = new Map<string, true>();
  /** Counts the step's subscription changes (undone with it), for the keys of kept answers. */
  private version = 0;

  constructor(private readonly batch: BatchAccess) {}

  // ---- point lookups and writes ------------------------------------------------------

  getSubscription(key: string): SubscriptionState | undefined {
    const known = this.subscriptions.get(key);
    if (known !== undefined) return known ?? undefined;
    throw this.batch.missing(false, async () => {
      const { rows } = await this.batch.db.query<{ record: string }>('SELECT record FROM subscriptions WHERE key = $1 FOR UPDATE', [key]);
      if (this.subscriptions.has(key)) return;
      this.subscriptions.set(key, rows[0] ? subscriptionFromRecord(rows[0].record) : null);
      this.stored.set(key, rows.length > 0);
    });
  }

  putSubscription(subscription: SubscriptionState): void {
    this.write(() => {
      this.batch.undo.set(this.subscriptions, subscription.key, subscription);
      this.batch.undo.set(this.batch.writes().subscriptions, subscription.key, { state: subscription, insert: this.stored.get(subscription.key) === false });
    });
  }

  dropSubscription(key: string): void {
    this.write(() => {
      const { undo } = this.batch;
      const writes = this.batch.writes();
      undo.set(this.subscriptions, key, null);
      undo.set(writes.subscriptions, key, { state: null, insert: false });
      undo.set(this.droppedSubs, key, true);
      undo.set(writes.subscriptionLinkDrops, key, true);
      this.unlinkWhere((w) => w.subKey === key);
    });
  }

  getLink(subKey: string, stream: string): SubscriptionLink | undefined {
    const known = this.knownLinks.get(linkKey(subKey, stream));
    if (known !== undefined) return known.link ?? undefined;
    if (this.droppedSubs.has(subKey) || this.droppedStreams.has(stream)) return undefined;
    throw this.batch.missing(false, async () => {
      const { rows } = await this.batch.db.query<LinkRow>('SELECT * FROM subscription_links WHERE sub_key = $1 AND stream = $2 FOR UPDATE', [subKey, stream]);
      const key = linkKey(subKey, stream);
      if (!this.knownLinks.has(key)) this.knownLinks.set(key, { subKey, stream, link: rows[0] ? linkFromRow(rows[0]) : null });
    });
  }

  putLink(link: SubscriptionLink): void {
    this.setLink({ subKey: link.subKey, stream: link.stream, link });
  }

  dropLink(subKey: string, stream: string): void {
    this.setLink({ subKey, stream, link: null });
  }

  dropStreamLinks(stream: string): void {
    this.write(() => {
      this.batch.undo.set(this.droppedStreams, stream, true);
      this.batch.undo.set(this.batch.writes().streamLinkDrops, stream, true);
      this.unlinkWhere((w) => w.stream === stream);
    });
  }

  /** The batch's writes were sent: what it wrote is now what is stored. */
  sent(writes: PendingWrites): void {
    for (const [key, { state }] of writes.subscriptions) this.stored.set(key, state !== null);
  }

  // ---- questions over many rows ------------------------------------------------------

  countSubscriptions(): number {
    const unsent = [...this.batch.writes().subscriptions];
    const keys = unsent.map(([key]) => key);
    const { n, present } = this.ask('count', async () => {
      const { rows } = await this.batch.db.query<{ n: number; present: string[] }>(
        'SELECT count(*)::bigint AS n, array(SELECT key FROM subscriptions WHERE key = ANY($1::text[])) AS present FROM subscriptions',
        [keys],
      );
      return rows[0]!;
    });
    return n - present.length + unsent.filter(([, w]) => w.state !== null).length;
  }

  patternSubscriptions(scope: string): SubscriptionState[] {
    const unsent = [...this.batch.writes().subscriptions];
    const stored = this.ask(`pattern ${scope}`, async () => {
      // Sent together; the SELECT starts once the lock is held, so it sees what its holder committed.
      const [, found] = await Promise.all([
        this.batch.db.query('SELECT pg_advisory_xact_lock_shared($1)', [PATTERN_LOCK]),
        this.batch.db.query<{ record: string }>(
          'SELECT record FROM subscriptions WHERE scope = $1 AND has_pattern = 1 AND NOT (key = ANY($2::text[])) ORDER BY key',
          [scope, unsent.map(([key]) => key)],
        ),
      ]);
      return found.rows.map((row) => subscriptionFromRecord(row.record));
    });
    const mine = unsent.flatMap(([, w]) => (w.state !== null && w.state.scope === scope && w.state.config.pattern !== null ? [w.state] : []));
    return [...stored, ...mine];
  }

  scopeSubscriptionKeys(scope: string): string[] {
    const unsent = [...this.batch.writes().subscriptions];
    const stored = this.ask(`scope ${scope}`, async () => {
      const { rows } = await this.batch.db.query<{ key: string }>('SELECT key FROM subscriptions WHERE scope = $1 AND NOT (key = ANY($2::text[])) ORDER BY key', [
        scope,
        unsent.map(([key]) => key),
      ]);
      return rows.map((row) => row.key);
    });
    const mine = unsent.flatMap(([key, w]) => (w.state !== null && w.state.scope === scope ? [key] : []));
    return [...stored, ...mine];
  }

  countLinks(subKey: string): number {
    const { superseded, mine } = this.unsentLinks(subKey);
    const stored = this.superseded(subKey)
      ? 0
      : this.ask(`links ${subKey}`, async () => {
          const { rows } = await this.batch.db.query<{ n: number }>(
            'SELECT count(*)::bigint AS n FROM subscription_links WHERE sub_key = $1 AND NOT (stream = ANY($2::text[]))',
            [subKey, superseded],
          );
          return rows[0]!.n;
        });
    return stored + mine.length;
  }

  links(subKey: string, afterPath: string | null, limit: number): LinkView[] {
    const after = afterPath ?? '';
    const { superseded, mine } = this.unsentLinks(subKey);
    const myStreams = mine.map((link) => link.stream);
    const allDropped = this.superseded(subKey);
    const { rows, tails } = this.ask(`page ${subKey} ${after} ${limit}`, async () => {
      const page = allDropped
        ? Promise.resolve({ rows: [] as TailRow[] })
        : this.batch.db.query<TailRow>(
            `SELECT l.*, s.tail, s.deleted FROM subscription_links l LEFT JOIN streams s ON s.name = l.stream
             WHERE l.sub_key = $1 AND l.path > $2 AND NOT (l.stream = ANY($3::text[])) ORDER BY l.path LIMIT $4`,
            [subKey, after, superseded, limit],
          );
      const [{ rows }, tails] = await Promise.all([page, this.storedTails(myStreams)]);
      return { rows, tails };
    });
    const views = rows.map((row) => this.view(linkFromRow(row), row));
    for (const link of mine) if (compareUtf8(link.path, after) > 0) views.push(this.view(link, tails.get(link.stream)));
    return firstByPath(views, limit);
  }

  /**
   * Pending links come from three places: stored links the batch changed nothing about,
   * pending as stored (at most `limit` of them are needed); stored links to streams the
   * batch holds, judged by the batch's tails; and the step's own links.
   */
  pendingLinks(subKey: string, limit: number): LinkView[] {
    if (limit <= 0) return [];
    const { superseded, mine } = this.unsentLinks(subKey);
    const held = this.batch.knownStreamNames();
    const myStreams = mine.map((link) => link.stream);
    const allDropped = this.superseded(subKey);
    const { rows, tails } = this.ask(`pending ${subKey} ${limit}`, async () => {
      if (allDropped) return { rows: [] as TailRow[], tails: await this.storedTails(myStreams) };
      // isPending of linkedTail (core/subscription-queries.ts), in SQL: not deleted, tail beyond `acked`.
      const untouched = this.batch.db.query<TailRow>(
        `SELECT l.*, s.tail, s.deleted FROM subscription_links l JOIN streams s ON s.name = l.stream
         WHERE l.sub_key = $1 AND s.deleted = 0 AND s.tail > l.acked AND NOT (l.stream = ANY($2::text[])) ORDER BY l.path LIMIT $3`,
        [subKey, [...superseded, ...held], limit],
      );
      const heldLinks = this.batch.db.query<TailRow>(
        `SELECT l.*, NULL AS tail, NULL AS deleted FROM subscription_links l
         WHERE l.sub_key = $1 AND l.stream = ANY($2::text[]) AND NOT (l.stream = ANY($3::text[]))`,
        [subKey, held, superseded],
      );
      const [pending, linked, tails] = await Promise.all([untouched, heldLinks, this.storedTails(myStreams)]);
      return { rows: [...pending.rows, ...linked.rows], tails };
    });
    const views = rows.map((row) => this.view(linkFromRow(row), row));
    for (const link of mine) views.push(this.view(link, tails.get(link.stream)));
    return firstByPath(views.filter(isPending), limit);
  }

  streamsByPrefix(keyPrefix: string, limit: number): Array<{ name: string; tail: number }> {
    const held = this.batch.knownStreamNames();
    const stored = this.ask(`prefix ${keyPrefix} ${limit}`, async () => {
      const [, found] = await Promise.all([
        this.batch.db.query('SELECT pg_advisory_xact_lock($1)', [PATTERN_LOCK]),
        // Names with the prefix are one contiguous run from the prefix on ("C" collation).
        this.batch.db.query<{ name: string; tail: number }>(
          `SELECT name, tail FROM streams WHERE name >= $1 AND starts_with(name, $1) AND deleted = 0
           AND NOT (name = ANY($2::text[])) ORDER BY name LIMIT $3`,
          [keyPrefix, held, limit],
        ),
      ]);
      return found.rows;
    });
    const mine = held.flatMap((name) => {
      const stream = this.batch.knownStream(name);
      return stream && !stream.deleted && name.startsWith(keyPrefix) ? [{ name, tail: stream.tail }] : [];
    });
    return [...stored, ...mine].sort((a, b) => compareUtf8(a.name, b.name)).slice(0, limit);
  }

  // ---- helpers -----------------------------------------------------------------------

  /** A subscription change: counted (and the count undone with the step). */
  private write(change: () => void): void {
    this.version++;
    this.batch.undo.onRewind(() => this.version--);
    change();
  }

  private setLink(entry: LinkWrite): void {
    this.write(() => {
      const key = linkKey(entry.subKey, entry.stream);
      this.batch.undo.set(this.knownLinks, key, entry);
      this.batch.undo.set(this.batch.writes().links, key, entry);
    });
  }

  /** Drops the links the batch holds or will write that `match` picks (the stored ones go by a statement). */
  private unlinkWhere(match: (w: LinkWrite) => boolean): void {
    for (const map of [this.knownLinks, this.batch.writes().links]) {
      for (const [key, w] of map) if (w.link !== null && match(w)) this.batch.undo.set(map, key, { ...w, link: null });
    }
  }

  /** The subscription's stored links all go when the unsent writes are sent. */
  private superseded(subKey: string): boolean {
    return this.batch.writes().subscriptionLinkDrops.has(subKey);
  }

  /** Streams whose stored link of `subKey` the unsent writes replace or drop, and the links they write. */
  private unsentLinks(subKey: string): { superseded: string[]; mine: SubscriptionLink[] } {
    const writes = this.batch.writes();
    const superseded = [...writes.streamLinkDrops.keys()];
    const mine: SubscriptionLink[] = [];
    for (const w of writes.links.values()) {
      if (w.subKey !== subKey) continue;
      superseded.push(w.stream);
      if (w.link !== null) mine.push(w.link);
    }
    return { superseded, mine };
  }

  /**
   * Asked of PostgreSQL once for the step, under a key that names all it depended on.
   * `load` runs after the step was undone: what it uses of the step's state is taken
   * when the question is asked, never read inside it.
   */
  private ask<T>(question: string, load: () => Promise<T>): T {
    return this.batch.ask(`subscriptions ${question} ${this.batch.flushes()} ${this.version} ${this.batch.knownStreamNames().length}`, load);
  }

  /** Stored tails of streams the batch does not hold. */
  private async storedTails(names: string[]): Promise<Map<string, { tail: number | null; deleted: number | null }>> {
    const wanted = names.filter((name) => this.batch.knownStream(name) === undefined);
    if (wanted.length === 0) return new Map();
    const { rows } = await this.batch.db.query<{ name: string; tail: number; deleted: number }>('SELECT name, tail, deleted FROM streams WHERE name = ANY($1::text[])', [
      wanted,
    ]);
    return new Map(rows.map((row) => [row.name, row]));
  }

  /** A link with its stream's tail: the batch's state of the stream when it holds one, else the stored row's. */
  private view(link: SubscriptionLink, stored: { tail: number | null; deleted: number | null } | undefined): LinkView {
    const held = this.batch.knownStream(link.stream);
    if (held !== undefined) return { link, tail: linkedTail(held) };
    return { link, tail: stored && stored.tail !== null && stored.deleted === 0 ? stored.tail : null };
  }
}
