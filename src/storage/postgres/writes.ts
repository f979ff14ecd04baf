/**
 * What a batch has changed and not yet sent to PostgreSQL, kept as the final value of
 * each key (a stream, a producer record, a snapshot, a bucket) so that a batch of a
 * thousand appends is written with a handful of statements: rows travel as arrays
 * (`unnest`), and the common ones (streams, chunks, producers) go in one statement.
 */
import type { BucketState } from '../../core/bucket.js';
import type { SubscriptionLink, SubscriptionState } from '../../core/subscription-types.js';
import type { ProducerRecord, StreamState } from '../../core/types.js';
import { PRODUCER_COLUMNS, producerRow } from '../producer-columns.js';
import { sameBesideAppend, STREAM_ROW_COLUMNS, STREAM_VALUE_COLUMNS, streamColumnValues } from '../stream-columns.js';
import { LINK_COLUMNS, linkRow, SUBSCRIPTION_COLUMNS, subscriptionRow } from '../subscription-columns.js';
import type { Queryable } from './chunks.js';
import { HINT_CHANNEL } from './notify.js';

/** Undoes the changes of the step under way (see PgBatch). */
export class UndoLog {
  private steps: Array<() => void> = [];

  set<K, V>(map: Map<K, V>, key: K, value: V): void {
    const had = map.has(key);
    const previous = map.get(key);
    map.set(key, value);
    this.steps.push(() => (had ? map.set(key, previous as V) : map.delete(key)));
  }

  push<T>(list: T[], value: T): void {
    list.push(value);
    this.steps.push(() => list.pop());
  }

  onRewind(step: () => void): void {
    this.steps.push(step);
  }

  rewind(): void {
    for (let i = this.steps.length - 1; i >= 0; i--) this.steps[i]!();
    this.steps = [];
  }

  clear(): void {
    this.steps = [];
  }
}

/** A link as a batch last wrote it: `link` null when dropped. */
export interface LinkWrite {
  subKey: string;
  stream: string;
  link: SubscriptionLink | null;
}

/** The key of a link in the batch's maps (keys and stream names hold no NUL). */
export function linkKey(subKey: string, stream: string): string {
  return `${subKey}\u0000${stream}`;
}

/** Appends larger than this are inserted on their own, not copied into the batch's one parameter of chunk bytes (insertChunks). */
const LARGE_CHUNK_BYTES = 256 * 1024;
/** The most bytes that parameter carries; the appends past it are inserted on their own too. */
const COMMON_CHUNK_BYTES = 16 * 1024 * 1024;

export class PendingWrites {
  /** A stream's final state, or null when dropped. */
  readonly streams = new Map<number, StreamState | null>();
  readonly chunks: Array<{ streamId: number; start: number; data: Buffer }> = [];
  /** By `streamId/producerId`: the final record, or null when deleted. */
  readonly producers = new Map<string, { streamId: number; producerId: string; record: ProducerRecord | null }>();
  /** Producers last seen at or before the time are forgotten, by stream. */
  readonly forgets = new Map<number, number>();
  readonly snapshots = new Map<number, Buffer>();
  /** Chunks before the position are trimmed, by stream. */
  readonly trims = new Map<number, number>();
  readonly buckets = new Map<string, BucketState | null>();
  /**
   * A subscription's final state, or null when dropped. `insert` when the batch found no
   * row for it: should another node have created one meanwhile, the INSERT conflicts and
   * the batch runs again, instead of overwriting it.
   */
  readonly subscriptions = new Map<string, { state: SubscriptionState | null; insert: boolean }>();
  /** By linkKey: a link's final state, or null when dropped. */
  readonly links = new Map<string, LinkWrite>();
  /** Subscriptions whose every stored link goes (they were dropped), before `links` are written. */
  readonly subscriptionLinkDrops = new Map<string, true>();
  /** Streams whose every stored link goes (deleted or expired), before `links` are written. */
  readonly streamLinkDrops = new Map<string, true>();

  get empty(): boolean {
    return (
      this.subscriptions.size === 0 &&
      this.links.size === 0 &&
      this.subscriptionLinkDrops.size === 0 &&
      this.streamLinkDrops.size === 0 &&
      this.streams.size === 0 &&
      this.chunks.length === 0 &&
      this.producers.size === 0 &&
      this.forgets.size === 0 &&
      this.snapshots.size === 0 &&
      this.trims.size === 0 &&
      this.buckets.size === 0
    );
  }
}

const STREAM_COLUMN_TYPES: Record<string, string> = {
  name: 'text',
  bucket: 'text',
  incarnation: 'text',
  content_type: 'text',
  closed: 'smallint',
  deleted: 'smallint',
  fork_refs: 'integer',
  last_stream_seq: 'text',
  attrs: 'text',
  snapshot_content_type: 'text',
  snapshot_digest: 'text',
  retention_policy: 'text',
  time_marks: 'text',
};
const SUBSCRIPTION_COLUMN_TYPES: Record<string, string> = { key: 'text', scope: 'text', record: 'text', awake: 'smallint', has_pattern: 'smallint' };
const LINK_COLUMN_TYPES: Record<string, string> = { sub_key: 'text', stream: 'text', path: 'text', explicit: 'smallint', glob: 'smallint' };
const PRODUCER_COLUMN_TYPES: Record<string, string> = { producer_id: 'text', receipt_closed: 'smallint', digest: 'text', claim_digest: 'text' };

/**
 * A part of the common statement: its parameters, and its text given the number of its
 * first parameter. The text is made only for a shape of statement not made before.
 */
interface Part {
  arrays: unknown[];
  sql(firstParam: number): string;
}

/** One array parameter per column (for `unnest`): `valueAt(row, i)` of every row for column i. */
function columnArrays<R>(rows: readonly R[], columnCount: number, valueAt: (row: R, column: number) => unknown): unknown[][] {
  const arrays: unknown[][] = [];
  for (let i = 0; i < columnCount; i++) arrays.push(new Array(rows.length));
  for (let r = 0; r < rows.length; r++) for (let i = 0; i < columnCount; i++) arrays[i]![r] = valueAt(rows[r]!, i);
  return arrays;
}

/** `SELECT * FROM unnest($n::type[], ...)`: the rows of the column arrays from parameter `firstParam` on. */
function unnestSelect(columns: readonly string[], types: Record<string, string>, firstParam: number): string {
  const casts = columns.map((column, i) => `$${firstParam + i}::${types[column] ?? 'bigint'}[]`);
  return `SELECT * FROM unnest(${casts.join(', ')})`;
}

/** Columns an append changes; a stream whose stored row differs in these only is updated narrowly. */
const APPEND_COLUMNS = ['tail', 'last_access_ms', 'expiry_ms', 'record_next'] as const;
const APPEND_COLUMN_AT = APPEND_COLUMNS.map((c) => STREAM_VALUE_COLUMNS.indexOf(c));

/** A stream to write and its columns (streamColumnValues), computed once per batch: a batch of appends writes hundreds. */
interface StreamWrite {
  stream: StreamState;
  values: unknown[];
}

/** The columns these parts write, the row's key first (STREAM_ROW_COLUMNS for a whole stream row). */
const APPENDED_ROW_COLUMNS = ['id', ...APPEND_COLUMNS];
const PRODUCER_ROW_COLUMNS = ['stream_id', ...PRODUCER_COLUMNS];

function updateAppended(states: StreamWrite[]): Part {
  const columns = APPENDED_ROW_COLUMNS;
  return {
    arrays: columnArrays(states, columns.length, (w, i) => (i === 0 ? w.stream.id : w.values[APPEND_COLUMN_AT[i - 1]!])),
    sql: (first) => {
      const sets = APPEND_COLUMNS.map((c) => `${c} = v.${c}`).join(', ');
      return `UPDATE streams s SET ${sets} FROM (${unnestSelect(columns, {}, first)}) v(${columns.join(', ')}) WHERE s.id = v.id`;
    },
  };
}

function upsertStreams(states: StreamWrite[]): Part {
  const columns = STREAM_ROW_COLUMNS;
  return {
    arrays: columnArrays(states, columns.length, (w, i) => (i === 0 ? w.stream.id : w.values[i - 1])),
    sql: (first) => {
      const updates = STREAM_VALUE_COLUMNS.map((c) => `${c} = EXCLUDED.${c}`).join(', ');
      return `INSERT INTO streams (${columns.join(', ')}) ${unnestSelect(columns, STREAM_COLUMN_TYPES, first)} ON CONFLICT (id) DO UPDATE SET ${updates}`;
    },
  };
}

function upsertProducers(records: Array<{ streamId: number; record: ProducerRecord }>): Part {
  const columns = PRODUCER_ROW_COLUMNS;
  const rows = records.map(({ streamId, record }) => producerRow(streamId, record));
  return {
    arrays: columnArrays(rows, columns.length, (row, i) => row[i]),
    sql: (first) => {
      const updates = PRODUCER_COLUMNS.slice(1).map((c) => `${c} = EXCLUDED.${c}`).join(', ');
      return `INSERT INTO producers (${columns.join(', ')}) ${unnestSelect(columns, PRODUCER_COLUMN_TYPES, first)} ON CONFLICT (stream_id, producer_id) DO UPDATE SET ${updates}`;
    },
  };
}

/**
 * The chunks' bytes go as one binary parameter, each chunk cut from it by position and
 * length. As a bytea[] they were hex text: twice their size, made by the node and parsed
 * again by PostgreSQL (issue 41).
 */
function insertChunks(chunks: PendingWrites['chunks']): Part {
  const positions: number[] = [];
  const lengths: number[] = [];
  let position = 1;
  for (const c of chunks) {
    positions.push(position);
    lengths.push(c.data.length);
    position += c.data.length;
  }
  return {
    arrays: [chunks.map((c) => c.streamId), chunks.map((c) => c.start), positions, lengths, Buffer.concat(chunks.map((c) => c.data), position - 1)],
    sql: (first) => {
      const [ids, starts, at, length, bytes] = [0, 1, 2, 3, 4].map((i) => `$${first + i}`);
      return `INSERT INTO chunks (stream_id, start, data) SELECT sid, start, substring(${bytes}::bytea FROM at FOR length)
      FROM unnest(${ids}::bigint[], ${starts}::bigint[], ${at}::integer[], ${length}::integer[]) c(sid, start, at, length)`;
    },
  };
}

function notifyHints(hints: string[]): Part {
  return { arrays: [hints], sql: (first) => `SELECT count(pg_notify('${HINT_CHANNEL}', p)) FROM unnest($${first}::text[]) p` };
}

/** The chunks that go in the common statement (small ones, up to COMMON_CHUNK_BYTES in all) and those inserted one by one. */
function chunksByStatement(chunks: PendingWrites['chunks']) {
  const together: PendingWrites['chunks'] = [];
  const alone: PendingWrites['chunks'] = [];
  let room = COMMON_CHUNK_BYTES;
  for (const c of chunks) {
    const small = c.data.length <= LARGE_CHUNK_BYTES && c.data.length <= room;
    (small ? together : alone).push(c);
    if (small) room -= c.data.length;
  }
  return { together, alone };
}

/** One statement and its parameters. */
export interface Statement {
  text: string;
  values: unknown[];
}

/**
 * Streams whose producer records change while their rows are not written. A stream row's
 * version stands for its producer records (known-rows.ts), so such a row is rewritten
 * as it is: a new version. Appends, the one command that changes records, always write
 * their stream's row; only steps driven by tests come here.
 */
function streamsOnlyProducersChanged(writes: PendingWrites): number[] {
  const ids = new Set<number>();
  for (const { streamId } of writes.producers.values()) if (!writes.streams.has(streamId)) ids.add(streamId);
  for (const streamId of writes.forgets.keys()) if (!writes.streams.has(streamId)) ids.add(streamId);
  return [...ids];
}

/** The common statement's text by its shape (a bit for each part it has): made once, then the same string each time. */
const commonTexts = new Map<number, string>();

/**
 * The stream rows, small chunks and producer records in one statement: data-modifying
 * WITH clauses all run, on distinct rows, so their order does not matter. The hints ride
 * along: NOTIFY is delivered only if the transaction commits.
 */
function commonStatement(
  streams: { appended: StreamWrite[]; others: StreamWrite[] },
  chunks: PendingWrites['chunks'],
  producers: Array<{ streamId: number; record: ProducerRecord }>,
  hints: string[],
): Statement | null {
  const parts: Part[] = [];
  let shape = 0;
  const add = (bit: number, part: Part) => {
    parts.push(part);
    shape |= bit;
  };
  if (streams.appended.length > 0) add(1, updateAppended(streams.appended));
  if (streams.others.length > 0) add(2, upsertStreams(streams.others));
  if (chunks.length > 0) add(4, insertChunks(chunks));
  if (producers.length > 0) add(8, upsertProducers(producers));
  if (hints.length > 0) add(16, notifyHints(hints));
  if (parts.length === 0) return null;
  let text = commonTexts.get(shape);
  if (text === undefined) commonTexts.set(shape, (text = commonText(parts)));
  const values: unknown[] = [];
  for (const part of parts) values.push(...part.arrays);
  return { text, values };
}

/** The parts as one statement, each numbering its parameters after the parts before it. */
function commonText(parts: Part[]): string {
  let first = 1;
  const sqls = parts.map((part) => {
    const sql = part.sql(first);
    first += part.arrays.length;
    return sql;
  });
  const clauses = sqls.slice(0, -1).map((sql, i) => `w${i} AS (${sql})`);
  return clauses.length === 0 ? sqls[0]! : `WITH ${clauses.join(', ')} ${sqls[sqls.length - 1]}`;
}

/**
 * The statements that write `writes` inside the caller's transaction, in an order their
 * constraints allow, with the commit hints (notify.ts) for other nodes when given;
 * `stored` holds the rows as the transaction sees them, so that a stream an append moved
 * has only its append columns written; `appended` names those streams. Building them
 * sends nothing.
 */
export function writeStatements(writes: PendingWrites, stored: ReadonlyMap<number, StreamState>, hints: string[] = []): { statements: Statement[]; appended: Set<number> } {
  const out: Statement[] = [];
  const upserts = [...writes.buckets.entries()].filter(([, b]) => b !== null);
  if (upserts.length > 0) {
    out.push({
      // settings as JSON text (NULL: none), cast per row: unnest of a jsonb[] would need each element quoted.
      text: `INSERT INTO buckets (id, created_at_ms, settings) SELECT id, at, s::jsonb FROM unnest($1::text[], $2::bigint[], $3::text[]) AS u(id, at, s)
             ON CONFLICT (id) DO UPDATE SET created_at_ms = EXCLUDED.created_at_ms, settings = EXCLUDED.settings`,
      values: [upserts.map(([id]) => id), upserts.map(([, b]) => b!.createdAtMs), upserts.map(([, b]) => (b!.settings === undefined ? null : JSON.stringify(b!.settings)))],
    });
  }
  const dropped = [...writes.streams.entries()].filter(([, s]) => s === null).map(([id]) => id);
  // Before the upserts: a name dropped and created again in one batch moves to a new id.
  if (dropped.length > 0) {
    out.push({
      text: `WITH c AS (DELETE FROM chunks WHERE stream_id = ANY($1::bigint[])), p AS (DELETE FROM producers WHERE stream_id = ANY($1::bigint[])),
            s AS (DELETE FROM snapshots WHERE stream_id = ANY($1::bigint[])) DELETE FROM streams WHERE id = ANY($1::bigint[])`,
      values: [dropped],
    });
  }
  if (writes.forgets.size > 0) {
    out.push({
      // Each stream's own rows through producers_seen: a join with the list read the whole
      // table, about 0.5 ms a new producer at 5,000 rows (docs/performance.md).
      text: `DELETE FROM producers p WHERE (p.stream_id, p.producer_id) IN (SELECT q.stream_id, q.producer_id FROM unnest($1::bigint[], $2::bigint[]) f(sid, cutoff)
               CROSS JOIN LATERAL (SELECT stream_id, producer_id FROM producers WHERE stream_id = f.sid AND last_seen_ms <= f.cutoff OFFSET 0) q)`,
      values: [[...writes.forgets.keys()], [...writes.forgets.values()]],
    });
  }
  const producers = [...writes.producers.values()];
  const deleted = producers.filter((p) => p.record === null);
  if (deleted.length > 0) {
    out.push({
      text: `DELETE FROM producers p USING unnest($1::bigint[], $2::text[]) d(sid, pid) WHERE p.stream_id = d.sid AND p.producer_id = d.pid`,
      values: [deleted.map((p) => p.streamId), deleted.map((p) => p.producerId)],
    });
  }
  const untouched = streamsOnlyProducersChanged(writes);
  if (untouched.length > 0) out.push({ text: 'UPDATE streams SET id = id WHERE id = ANY($1::bigint[])', values: [untouched] });
  const live = (id: number) => writes.streams.get(id) !== null;
  const chunks = writes.chunks.filter((c) => live(c.streamId));
  const appended: StreamWrite[] = [];
  const others: StreamWrite[] = [];
  for (const stream of writes.streams.values()) {
    if (stream === null) continue;
    const before = stored.get(stream.id);
    const write = { stream, values: streamColumnValues(stream) };
    (before !== undefined && sameBesideAppend(before, stream) ? appended : others).push(write);
  }
  const { together, alone } = chunksByStatement(chunks);
  const common = commonStatement(
    { appended, others },
    together,
    producers.filter((p) => p.record !== null && live(p.streamId)).map((p) => ({ streamId: p.streamId, record: p.record! })),
    hints,
  );
  if (common) out.push(common);
  for (const c of alone) out.push({ text: 'INSERT INTO chunks (stream_id, start, data) VALUES ($1, $2, $3)', values: [c.streamId, c.start, c.data] });
  // After the inserts: a trim may cut into appends of the same batch.
  for (const [streamId, position] of writes.trims) if (live(streamId)) out.push(...trimStatements(streamId, position));
  for (const [streamId, body] of writes.snapshots) {
    if (live(streamId)) {
      out.push({ text: 'INSERT INTO snapshots (stream_id, data) VALUES ($1, $2) ON CONFLICT (stream_id) DO UPDATE SET data = EXCLUDED.data', values: [streamId, body] });
    }
  }
  const bucketDrops = [...writes.buckets.entries()].filter(([, b]) => b === null).map(([id]) => id);
  if (bucketDrops.length > 0) out.push({ text: 'DELETE FROM buckets WHERE id = ANY($1::text[])', values: [bucketDrops] });
  out.push(...subscriptionStatements(writes));
  return { statements: out, appended: new Set(appended.map((w) => w.stream.id)) };
}

/** Subscriptions and links: whole drops first, then single deletes, then inserts and updates. */
function subscriptionStatements(writes: PendingWrites): Statement[] {
  const out: Statement[] = [];
  const dropsBy = (column: string, keys: Map<string, true>) => {
    if (keys.size > 0) out.push({ text: `DELETE FROM subscription_links WHERE ${column} = ANY($1::text[])`, values: [[...keys.keys()]] });
  };
  dropsBy('sub_key', writes.subscriptionLinkDrops);
  dropsBy('stream', writes.streamLinkDrops);
  const subscriptions = [...writes.subscriptions.entries()];
  const dropped = subscriptions.filter(([, w]) => w.state === null).map(([key]) => key);
  if (dropped.length > 0) out.push({ text: 'DELETE FROM subscriptions WHERE key = ANY($1::text[])', values: [dropped] });
  const links = [...writes.links.values()];
  const unlinked = links.filter((w) => w.link === null);
  if (unlinked.length > 0) {
    out.push({
      text: 'DELETE FROM subscription_links l USING unnest($1::text[], $2::text[]) d(k, s) WHERE l.sub_key = d.k AND l.stream = d.s',
      values: [unlinked.map((w) => w.subKey), unlinked.map((w) => w.stream)],
    });
  }
  const valuesOf = (state: SubscriptionState) => {
    const row = subscriptionRow(state);
    return SUBSCRIPTION_COLUMNS.map((c) => row[c]);
  };
  const rowsOf = (insert: boolean) => subscriptions.flatMap(([, w]) => (w.state !== null && w.insert === insert ? [valuesOf(w.state)] : []));
  const inserts = rowsOf(true);
  if (inserts.length > 0) out.push(insertRows('subscriptions', SUBSCRIPTION_COLUMNS, SUBSCRIPTION_COLUMN_TYPES, inserts, null));
  const upserts = rowsOf(false);
  if (upserts.length > 0) out.push(insertRows('subscriptions', SUBSCRIPTION_COLUMNS, SUBSCRIPTION_COLUMN_TYPES, upserts, 'key'));
  const linked = links.flatMap((w) => {
    if (w.link === null) return [];
    const row = linkRow(w.link);
    return [LINK_COLUMNS.map((c) => row[c])];
  });
  if (linked.length > 0) out.push(insertRows('subscription_links', LINK_COLUMNS, LINK_COLUMN_TYPES, linked, 'sub_key, stream'));
  return out;
}

/** Rows inserted from arrays; with `conflictKey`, a row already stored under that key is updated instead. */
function insertRows(table: string, columns: readonly string[], types: Record<string, string>, rows: unknown[][], conflictKey: string | null): Statement {
  const arrays = columnArrays(rows, columns.length, (row, i) => row[i]);
  const select = unnestSelect(columns, types, 1);
  const keyColumns = conflictKey?.split(', ') ?? [];
  const updates = columns.filter((c) => !keyColumns.includes(c)).map((c) => `${c} = EXCLUDED.${c}`);
  const onConflict = conflictKey === null ? '' : ` ON CONFLICT (${conflictKey}) DO UPDATE SET ${updates.join(', ')}`;
  return { text: `INSERT INTO ${table} (${columns.join(', ')}) ${select}${onConflict}`, values: arrays };
}

/**
 * Sends the statements in order without waiting between them (one round trip on a
 * pipelining connection) and waits for all; the first refusal rejects.
 */
export async function sendAll(db: Queryable, statements: readonly Statement[]): Promise<void> {
  await Promise.all(statements.map((s) => db.query(s.text, s.values)));
}

/** Deletes whole appends before `position`; an append cut by it keeps only its part from there. */
function trimStatements(streamId: number, position: number): Statement[] {
  return [
    { text: 'DELETE FROM chunks WHERE stream_id = $1 AND start < $2 AND start + length(data) <= $2', values: [streamId, position] },
    { text: 'UPDATE chunks SET data = substring(data FROM ($2 - start + 1)::integer), start = $2 WHERE stream_id = $1 AND start < $2', values: [streamId, position] },
  ];
}
