/**
 * The usage record: per bucket and token subject, messages appended, bytes stored, stream
 * bytes served and live readers held, on this node since it started (nothing is stored:
 * a restart begins at zero).
 *
 * The table is bounded (`maxKeys` rows): a new key past it folds the least recently
 * active row into the `(other)` row, so that what was counted is never lost and the sum
 * of the rows stays exact. Per-bucket totals (the metrics' series) live as long as a row of
 * their bucket does; the last row of a bucket folded takes its totals to `(other)` too,
 * so there are never more bucket series than rows.
 *
 * Counting is a Map lookup and a few pointer moves: no allocation for a key seen before
 * (the append path is hot).
 */
import { messagesOfWrite } from './records.js';

/** The subject of a request with auth off, or of a token without `sub`. */
export const NO_SUBJECT = '-';
/** Bucket and subject of the row that holds folded keys, and the metrics' label for folded buckets. */
export const OTHER = '(other)';
export const DEFAULT_USAGE_MAX_KEYS = 10_000;
/** Bounds of `--usage-max-keys`: one key at least; past a million the table is no longer small. */
export const MAX_USAGE_MAX_KEYS = 1_000_000;

/** Messages one stored payload counts as: the rule of records.ts, one for stats and the record. */
export const messagesWritten = messagesOfWrite;

/** The row subject of a token subject: `-` for none (auth off, or a token without `sub`). */
export function usageSubject(subject: string | undefined): string {
  return subject === undefined || subject === '' ? NO_SUBJECT : subject;
}

export interface UsageCounts {
  appends: number;
  bytesIn: number;
  bytesOut: number;
}

export interface UsageRow extends UsageCounts {
  bucket: string;
  subject: string;
  liveReaders: number;
}

/** A row of the table, a node of its recency list. `into`: the row that took it over when it was folded. */
export interface UsageHold {
  readonly bucket: string;
  readonly subject: string;
}

class Row implements UsageHold {
  appends = 0;
  bytesIn = 0;
  bytesOut = 0;
  live = 0;
  newer: Row | null = null;
  older: Row | null = null;
  into: Row | null = null;

  constructor(
    readonly bucket: string,
    readonly subject: string,
    readonly group: BucketGroup | null,
  ) {}
}

interface BucketGroup {
  totals: UsageCounts;
  subjects: Map<string, Row>;
}

const zero = (): UsageCounts => ({ appends: 0, bytesIn: 0, bytesOut: 0 });

function addCounts(to: UsageCounts, from: UsageCounts): void {
  to.appends += from.appends;
  to.bytesIn += from.bytesIn;
  to.bytesOut += from.bytesOut;
}

export class UsageTable {
  private readonly groups = new Map<string, BucketGroup>();
  private readonly other = new Row(OTHER, OTHER, null);
  /** Totals of buckets no row holds any more: the metrics' `(other)` series. */
  private readonly otherTotals = zero();
  /** The node's totals since it started, every bucket's and the folded ones'. */
  private readonly all = zero();
  private size = 0;
  /** Most and least recently active rows. */
  private newest: Row | null = null;
  private oldest: Row | null = null;

  constructor(readonly maxKeys: number) {}

  /** A write stored `messages` messages of `bytes` bytes. */
  wrote(bucket: string, subject: string, messages: number, bytes: number): void {
    const row = this.touch(bucket, subject);
    row.appends += messages;
    row.bytesIn += bytes;
    const totals = row.group!.totals;
    totals.appends += messages;
    totals.bytesIn += bytes;
    this.all.appends += messages;
    this.all.bytesIn += bytes;
  }

  /** A read answered `bytes` stream bytes. */
  served(bucket: string, subject: string, bytes: number): void {
    if (bytes === 0) return;
    const row = this.touch(bucket, subject);
    row.bytesOut += bytes;
    row.group!.totals.bytesOut += bytes;
    this.all.bytesOut += bytes;
  }

  /** A live reader starts: counted on its row until `release` (on the row it was folded into, if it was). */
  hold(bucket: string, subject: string): UsageHold {
    const row = this.touch(bucket, subject);
    row.live++;
    return row;
  }

  release(hold: UsageHold): void {
    let row = hold as Row;
    while (row.into !== null) row = row.into;
    if (row.live > 0) row.live--;
  }

  /** Every row with something counted, `(other)` included, ordered by bucket then subject. */
  rows(): UsageRow[] {
    const out: UsageRow[] = [];
    const add = (r: Row) => out.push({ bucket: r.bucket, subject: r.subject, appends: r.appends, bytesIn: r.bytesIn, bytesOut: r.bytesOut, liveReaders: r.live });
    for (const group of this.groups.values()) for (const row of group.subjects.values()) add(row);
    const o = this.other;
    if (o.appends > 0 || o.bytesIn > 0 || o.bytesOut > 0 || o.live > 0) add(o);
    return out.sort(compareRows);
  }

  /** Totals per bucket held, and `(other)` for buckets folded: at most `maxKeys + 1` entries. */
  bucketTotals(): Map<string, UsageCounts> {
    const out = new Map<string, UsageCounts>();
    for (const [bucket, group] of this.groups) out.set(bucket, { ...group.totals });
    const o = this.otherTotals;
    if (o.appends > 0 || o.bytesIn > 0 || o.bytesOut > 0) out.set(OTHER, { ...o });
    return out;
  }

  /** What the node counted since it started, over every bucket and subject. */
  totals(): UsageCounts {
    return { ...this.all };
  }

  get keys(): number {
    return this.size;
  }

  /** The row of (bucket, subject), made (folding the oldest past the cap) if new, now the most recent. */
  private touch(bucket: string, subject: string): Row {
    let group = this.groups.get(bucket);
    let row = group?.subjects.get(subject);
    if (row === undefined) {
      if (this.size >= this.maxKeys) {
        this.foldOldest();
        // The fold may have removed this very bucket's group (its last row).
        group = this.groups.get(bucket);
      }
      if (group === undefined) this.groups.set(bucket, (group = { totals: zero(), subjects: new Map() }));
      row = new Row(bucket, subject, group);
      group.subjects.set(subject, row);
      this.size++;
    } else if (row === this.newest) {
      return row;
    } else {
      this.unlink(row);
    }
    this.pushNewest(row);
    return row;
  }

  private foldOldest(): void {
    const row = this.oldest;
    if (row === null) return;
    this.unlink(row);
    const group = row.group!;
    group.subjects.delete(row.subject);
    this.size--;
    addCounts(this.other, row);
    this.other.live += row.live;
    row.live = 0;
    row.into = this.other;
    if (group.subjects.size === 0) {
      this.groups.delete(row.bucket);
      addCounts(this.otherTotals, group.totals);
    }
  }

  private unlink(row: Row): void {
    if (row.newer !== null) row.newer.older = row.older;
    else this.newest = row.older;
    if (row.older !== null) row.older.newer = row.newer;
    else this.oldest = row.newer;
    row.newer = row.older = null;
  }

  private pushNewest(row: Row): void {
    row.older = this.newest;
    if (this.newest !== null) this.newest.newer = row;
    this.newest = row;
    if (this.oldest === null) this.oldest = row;
  }
}

type Key = { bucket: string; subject: string };

function compareRows(a: Key, b: Key): number {
  if (a.bucket !== b.bucket) return a.bucket < b.bucket ? -1 : 1;
  return a.subject < b.subject ? -1 : a.subject > b.subject ? 1 : 0;
}

/** The cursor of a row for `after`: bucket ids hold no space, so the first space ends the bucket. */
export function usageCursor(row: { bucket: string; subject: string }): string {
  return `${row.bucket} ${row.subject}`;
}

/**
 * One page of rows (sorted by `rows()`): those of `bucket` (null: all), after the row whose
 * cursor is `after` (null: from the first), at most `limit`; `next` is the cursor to ask
 * for the rest, null at the end.
 */
export function usagePage(rows: readonly UsageRow[], bucket: string | null, after: string | null, limit: number): { rows: UsageRow[]; next: string | null } {
  const space = after === null ? -1 : after.indexOf(' ');
  const from: Key | null = after === null ? null : space < 0 ? { bucket: after, subject: '' } : { bucket: after.slice(0, space), subject: after.slice(space + 1) };
  const page: UsageRow[] = [];
  for (const row of rows) {
    if (bucket !== null && row.bucket !== bucket) continue;
    if (from !== null && compareRows(row, from) <= 0) continue;
    if (page.length === limit) return { rows: page, next: usageCursor(page[page.length - 1]!) };
    page.push(row);
  }
  return { rows: page, next: null };
}
