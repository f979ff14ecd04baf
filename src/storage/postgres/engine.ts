/**
 * The PostgreSQL engine: any number of rill nodes in front of one database. A node holds
 * no state another node needs. Each batch is one transaction on one connection: it
 * locks and loads the streams its commands name, runs the shared executor and core
 * rules against them (batch.ts), writes the changes in bulk and commits; its commands
 * are answered once COMMIT has returned. A batch of plain appends to streams the node
 * knows as committed skips the loads: it runs on those rows and sends BEGIN, a guard that
 * locks them and fails unless they are unchanged, its writes and COMMIT in one round trip
 * (optimistic.ts), or runs the usual way when the guard fails. Reads query committed
 * rows. Commits are hinted to other nodes with NOTIFY (notify.ts).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { LinkView, SubscriptionState } from '../../core/subscription-types.js';
import type { StreamState } from '../../core/types.js';
import { windowEnd } from '../../core/window.js';
import { bucketSettingsFromStored, withSettings, type BucketSettings } from '../../core/bucket-settings.js';
import { BatchedStore } from '../batched.js';
import { CommitOutcomeUnknownError, ReadUnavailableError } from '../errors.js';
import { chunkFromChain, chunksFromChain, readFromChain, type StoredChunk } from '../chain.js';
import type { Txn } from '../executor.js';
import type { BucketInfo, BucketListing, Command, HeldTotals, ProducerListing, RemoteCommits, StoreOptions, StoreTotals, StreamListing } from '../store.js';
import { PRODUCER_COLUMNS, producerFromValues, type ProducerValues } from '../producer-columns.js';
import { rowToStream, type StreamRow } from '../stream-columns.js';
import { linkFromRow, subscriptionFromRecord, type LinkRow } from '../subscription-columns.js';
import { PgBatch, type PgColdChunks } from './batch.js';
import { PgColdRows } from './cold-rows.js';
import { preparing, ReadSource, withLoads, type Queryable } from './chunks.js';
import { BulkReads } from './bulk-reads.js';
import { openPool } from './pool.js';
import { hintPayloads, HintListener } from './notify.js';
import { KnownRows, type KnownProducers, type KnownRow } from './known-rows.js';
import { gated, GUARD_FAILED, GUARD_SQL, knownRowsFor, NotOptimistic } from './optimistic.js';
import { migrate } from './schema.js';
import { POSTGRES_DEFAULTS, redactedUrl } from './settings.js';


export interface PostgresStoreOptions extends StoreOptions {
  url: string;
  /** Connections this node opens for batches and reads (the hint listener has one more, large reads a quarter as many: BULK_SHARE). */
  poolSize?: number;
  /** Longest a statement may run before PostgreSQL cancels it. */
  statementTimeoutMs?: number;
  /** Longest a request waits for a connection (or for the database to answer one) before it is refused. */
  connectTimeoutMs?: number;
}


/** A batch that lost a race with another node's (deadlock, concurrent creation) runs again, up to this many times. */
const MAX_ATTEMPTS = 5;
/** SQLSTATEs of a transaction that lost a race and may simply run again. */
const RETRYABLE = new Set(['40001', '40P01', '23505']);

function isRetryable(error: unknown): boolean {
  return error instanceof pg.DatabaseError && error.code !== undefined && RETRYABLE.has(error.code);
}

/**
 * Runs `send`, which sends statements on `client` without waiting (pipelined), with the
 * connection's socket corked: pg writes each statement's messages with a system call of
 * its own, and a batch's round trip holds two to four statements (issue 41: in one profile,
 * 16% of a node's samples, idle ones included, went to those writes). Everything `send`
 * sends before its first await goes out in one write.
 */
function together<T>(client: pg.PoolClient, send: () => T): T {
  // pg's own socket, not part of its typed API: without one (another pg), statements go out as before.
  const socket = (client as unknown as { connection?: { stream?: { cork?: () => void; uncork?: () => void } } }).connection?.stream;
  if (typeof socket?.cork !== 'function' || typeof socket.uncork !== 'function') return send();
  socket.cork();
  try {
    return send();
  } finally {
    socket.uncork();
  }
}

/** The guard of an optimistic batch failed its transaction: the rows were not as known. */
function isGuardFailure(outcome: PromiseSettledResult<unknown>): boolean {
  return outcome.status === 'rejected' && outcome.reason instanceof pg.DatabaseError && outcome.reason.code === GUARD_FAILED;
}

/** Longest a ROLLBACK may take before its connection is given up instead of returned to the pool. */
const ROLLBACK_TIMEOUT_MS = 1_000;

/** False when the connection could not roll back in time (it died, or a timed-out statement still runs on it). */
async function rolledBack(client: pg.PoolClient): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ROLLBACK_TIMEOUT_MS)));
  const rollback = client.query('ROLLBACK').then(
    () => true,
    () => false,
  );
  try {
    return await Promise.race([rollback, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** BIGINT columns hold offsets, times and ids, all below 2^53: read them as numbers. */
const types = {
  getTypeParser: ((oid: number, format?: string) =>
    oid === pg.types.builtins.INT8 ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

/** Stream rows a node keeps known for optimistic batches (known-rows.ts): about 1 KiB each. */
const KNOWN_ROWS = 16_384;
/** Producer records kept with them, in all: a few hundred bytes each. */
const KNOWN_PRODUCER_RECORDS = 65_536;

/** Of the pool's size, the share this node opens besides for large reads (copy.ts), at least one. */
const BULK_SHARE = 4;

export class PostgresStore extends BatchedStore {
  private readonly pool: pg.Pool;
  /** Large reads, on connections of their own (bulk-reads.ts). */
  private readonly bulk: BulkReads;
  /** The pool, its statements prepared (chunks.ts). */
  private readonly reads: Queryable;
  private readonly hints: HintListener;
  /** Tells this node's own hints from other nodes'. */
  readonly nodeId = randomBytes(6).toString('hex');
  /** A batch is in its transaction; commands arriving meanwhile wait and form the next. */
  private inFlight = false;
  /**
   * Batches committed and round trips they made; queries outside batches (reads), windows
   * of them read as binary COPY, and read ahead (read-ahead.ts): for the bench, and for
   * tests that count reads.
   */
  readonly stats = { batches: 0, commands: 0, roundTrips: 0, reads: 0, bulkReads: 0, windowBytes: 0, readAheads: 0, readAheadsTaken: 0, optimistic: 0, stale: 0 };
  /** Stream rows as committed, for optimistic batches (optimistic.ts). */
  private readonly known = new KnownRows(KNOWN_ROWS, () => performance.now(), KNOWN_PRODUCER_RECORDS);
  readonly remote: RemoteCommits;
  /** How this node connects, for a connection of the cold tier's own (cold-rows.ts). */
  private readonly clientConfig: pg.ClientConfig;
  /** The cold tier's history as batches read it (setColdChunks), or null without one. */
  private coldChunks: PgColdChunks | null = null;
  private coldRowsOnce: PgColdRows | null = null;

  /** Connects, migrates the schema and starts listening for other nodes' commits. */
  static async open(options: PostgresStoreOptions): Promise<PostgresStore> {
    const store = new PostgresStore(options);
    try {
      const client = await store.pool.connect();
      try {
        await migrate(client);
      } finally {
        client.release();
      }
      await store.hints.start();
    } catch (error) {
      await store.shutDown();
      const reason = error instanceof Error ? error.message : String(error);
      throw new Error(`cannot open the PostgreSQL store at ${redactedUrl(options.url)}: ${reason}`, { cause: error });
    }
    return store;
  }

  private constructor(options: PostgresStoreOptions) {
    super(options);
    const settings = { ...POSTGRES_DEFAULTS, ...options };
    const config: pg.PoolConfig = {
      connectionString: options.url,
      max: settings.poolSize,
      connectionTimeoutMillis: settings.connectTimeoutMs,
      statement_timeout: settings.statementTimeoutMs,
      // A client-side bound as well: a database that stops answering must not hold a request forever.
      query_timeout: settings.statementTimeoutMs + settings.connectTimeoutMs,
      idle_in_transaction_session_timeout: settings.statementTimeoutMs * 3,
      keepAlive: true,
      types,
    };
    this.clientConfig = { ...config };
    this.bulk = new BulkReads({ ...config, max: Math.ceil(settings.poolSize / BULK_SHARE) }, this.stats);
    // Statements sent together go out together instead of one per round trip.
    Object.assign(config, { pipeline: true });
    this.pool = openPool(config);
    const prepared = preparing(this.pool);
    this.reads = {
      query: (text, values) => {
        this.stats.reads++;
        return prepared.query(text, values);
      },
    };
    this.hints = new HintListener({ ...config, types }, this.nodeId, prepared);
    // Rows another node changed would fail an optimistic batch's guard: not tried on them.
    this.hints.onHint((names) => this.known.forget(names));
    this.remote = {
      onHint: (listener) => this.hints.onHint(listener),
      versions: (names) => this.versions(names),
    };
    this.transactAsync = (commands, streamIds, body) => this.runBatch(commands, streamIds, body);
  }

  /** The cold tier's view of the database's rows (storage/cold/host.ts), made when a cold tier asks. */
  coldRows(): PgColdRows {
    this.coldRowsOnce ??= new PgColdRows({
      db: preparing(this.pool),
      read: (work) => this.read(work),
      connect: () => {
        const client = new pg.Client(this.clientConfig);
        return client;
      },
    });
    return this.coldRowsOnce;
  }

  /** History a cold tier moved out of `chunks`, as batches read it (batch.ts). */
  setColdChunks(source: PgColdChunks): void {
    this.coldChunks = source;
  }

  protected transact(): void {
    throw new Error('invariant: the PostgreSQL engine runs batches asynchronously');
  }

  protected override mayCommit(): boolean {
    return !this.inFlight;
  }

  private async runBatch(commands: readonly Command[], streamIds: Iterable<number>, body: (txn: Txn) => Promise<void>): Promise<void> {
    this.inFlight = true;
    const ids = [...streamIds];
    try {
      for (let attempt = 1; ; attempt++) {
        try {
          return await this.attempt(commands, ids, body);
        } catch (error) {
          if (!isRetryable(error) || attempt >= MAX_ATTEMPTS) throw error;
        }
      }
    } finally {
      this.inFlight = false;
      this.commitHeld();
    }
  }

  private async attempt(commands: readonly Command[], streamIds: number[], body: (txn: Txn) => Promise<void>): Promise<void> {
    const client = await this.pool.connect();
    let broken = false;
    try {
      const known = knownRowsFor(commands, streamIds, this.known);
      const batch = (known && (await this.runKnown(client, known, body))) || (await this.runLoaded(client, commands, streamIds, body));
      this.stats.batches++;
      this.stats.commands += commands.length;
      this.stats.roundTrips += batch.roundTrips;
    } catch (error) {
      broken = error instanceof CommitOutcomeUnknownError || !(await rolledBack(client));
      throw error;
    } finally {
      client.release(broken);
    }
  }

  /** The usual batch: BEGIN and the locking loads in one round trip, then the writes and COMMIT. */
  private async runLoaded(client: pg.PoolClient, commands: readonly Command[], streamIds: number[], body: (txn: Txn) => Promise<void>): Promise<PgBatch> {
    const db = preparing(client);
    const batch = new PgBatch(db, this.coldChunks);
    // Pipelined: BEGIN and the loads go out in one round trip, and one write.
    const knownAt = (id: number, version: string) => {
      const row = this.known.byIdFresh(id);
      return row?.version === version ? row.producers : undefined;
    };
    await together(client, () => Promise.all([client.query('BEGIN'), batch.preload(commands, streamIds, knownAt)]));
    await body(batch);
    const outcome = await this.commit(client, db, batch, null);
    if (outcome === 'stale') throw new Error('invariant: a batch without a guard found its rows stale');
    // Its id, as its locking loads gave it: a batch that locked no row leaves what it wrote unknown.
    this.remember(batch, batch.transactionId);
    return batch;
  }

  /**
   * An optimistic batch (optimistic.ts): run on the known rows, then BEGIN, the guard, the
   * writes and COMMIT in one round trip. Null, having committed nothing, when the batch
   * needed state it did not hold or the guard found a row changed: it runs the usual way.
   */
  private async runKnown(client: pg.PoolClient, known: readonly KnownRow[], body: (txn: Txn) => Promise<void>): Promise<PgBatch | null> {
    const gate = gated(preparing(client));
    const batch = new PgBatch(gate.db, this.coldChunks);
    batch.preloadKnown(known);
    try {
      await body(batch);
    } catch (error) {
      if (error instanceof NotOptimistic) return null;
      throw error;
    }
    gate.open();
    const xid = await this.commit(client, gate.db, batch, known);
    if (xid === 'stale') {
      // Its round trip counts beside the usual batch's.
      this.stats.roundTrips++;
      this.stats.stale++;
      this.known.forget(known.map((row) => row.stream.name));
      return null;
    }
    // Committed: never run again from here, whatever the guard answered.
    this.stats.optimistic++;
    batch.roundTrips = 1;
    this.remember(batch, xid);
    return batch;
  }

  /** Whether this node hints its commits (another node listens, notify.ts), and a count of the nodes now: for tests. */
  get hinting(): boolean {
    return this.hints.othersListening;
  }

  countNodes(): Promise<void> {
    return this.hints.countNodes();
  }

  /** A stream as this node knows it committed (known-rows.ts), for tests. */
  knownStream(name: string): StreamState | undefined {
    return this.known.byNameFresh(name)?.stream;
  }

  /** A stream's producer records as this node knows them with its row, for tests. */
  knownProducers(name: string): KnownProducers | undefined {
    return this.known.byNameFresh(name)?.producers;
  }

  /** A batch committed as `xid`: its rows are known as it left them. */
  private remember(batch: PgBatch, xid: string | null): void {
    const { rows, gone } = batch.committedRows(xid);
    this.known.remember(rows, gone);
  }

  /**
   * Sends the batch's last writes and COMMIT. When the batch sent no writes before (the
   * common case), they go out in one round trip: should a write fail to be sent at all,
   * the COMMIT that follows it commits no change. Otherwise COMMIT waits for the writes,
   * so that it can never commit the earlier ones without the last. With `guard` (an
   * optimistic batch, which sent nothing yet), BEGIN and the guard go first in the same
   * round trip, and the answer is the transaction's id as the guard gave it, or 'stale'
   * when the guard failed the transaction (it committed nothing); null without a guard.
   */
  private async commit(client: pg.PoolClient, db: Queryable, batch: PgBatch, guard: readonly KnownRow[] | null): Promise<string | null | 'stale'> {
    // A node alone hints nobody (notify.ts).
    const hints = this.hints.othersListening ? hintPayloads(this.nodeId, batch.touched) : [];
    const alone = batch.sentWrites;
    if (alone) await batch.flush(hints);
    const sent = together(client, () => {
      const begun = guard ? client.query('BEGIN') : Promise.resolve();
      const checked = guard ? db.query<{ xid: string }>(GUARD_SQL, [guard.map((r) => r.stream.id), guard.map((r) => r.version)]) : null;
      const written = alone ? Promise.resolve() : batch.flush(hints);
      return [begun, written, checked ?? Promise.resolve(null), client.query('COMMIT')] as const;
    });
    batch.roundTrips += alone ? 1 : 0;
    const outcomes = await Promise.allSettled(sent);
    const [, , xid, commit] = outcomes;
    if (guard && isGuardFailure(xid) && commit.status === 'fulfilled' && commit.value.command === 'ROLLBACK') return 'stale';
    // A statement the server refused rolled the transaction back (its COMMIT answers ROLLBACK).
    for (const outcome of outcomes) if (outcome.status === 'rejected' && outcome.reason instanceof pg.DatabaseError) throw outcome.reason;
    // The connection failed once COMMIT was sent: the batch may or may not have applied.
    for (const outcome of outcomes) if (outcome.status === 'rejected') throw new CommitOutcomeUnknownError(outcome.reason);
    const tag = (commit as PromiseFulfilledResult<pg.QueryResult>).value.command;
    if (tag !== 'COMMIT') throw new Error(`invariant: COMMIT answered ${tag}`);
    return (xid as PromiseFulfilledResult<{ rows: Array<{ xid: string }> } | null>).value?.rows[0]!.xid ?? null;
  }

  /** A read of committed rows; the database being unreachable answers 503. */
  private async read<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      if (error instanceof pg.DatabaseError && !error.code?.startsWith('57') && !error.code?.startsWith('08')) throw error;
      throw new ReadUnavailableError(error);
    }
  }

  private query<R extends object>(text: string, values?: unknown[]) {
    return this.read(() => this.reads.query<R>(text, values));
  }

  async getStream(name: string): Promise<StreamState | undefined> {
    const { rows } = await this.query<StreamRow>('SELECT * FROM streams WHERE name = $1', [name]);
    return rows[0] ? this.withPendingTouch(rowToStream(rows[0])) : undefined;
  }

  async readRange(stream: StreamState, from: number, maxBytes: number): Promise<Buffer> {
    const source = new ReadSource(this.reads, windowEnd(stream.tail, from, maxBytes), this.bulk);
    return this.read(() => withLoads(() => readFromChain(source, stream, from, maxBytes)));
  }

  async readChunks(stream: StreamState, from: number, maxBytes: number): Promise<StoredChunk[]> {
    const source = new ReadSource(this.reads, windowEnd(stream.tail, from, maxBytes), this.bulk);
    const chunks = await this.read(() => withLoads(() => chunksFromChain(source, stream, from, maxBytes)));
    this.bulk.readNext(stream, from, maxBytes);
    return chunks;
  }

  /**
   * readChunks' bytes handed on as they arrive (store.ts): a large window of the stream's
   * own chunks goes from its COPY's output to `write` as it is parsed, so that a response
   * sends its first megabytes while PostgreSQL sends the last. Not backpressured: the COPY
   * runs at the database's pace and its connection goes back to the pool as soon, whatever
   * the reader's pace, and what waits to be sent is the window a reply would hold anyway.
   */
  async streamChunks(stream: StreamState, from: number, maxBytes: number, write: (bytes: Buffer) => void): Promise<void> {
    const hi = windowEnd(stream.tail, from, maxBytes);
    if (!this.bulk.streams(stream, from, hi)) {
      for (const chunk of await this.readChunks(stream, from, maxBytes)) write(chunk.data);
      return;
    }
    // Outside read(): a broken invariant is not the database being unreachable (503).
    (await this.read(() => this.bulk.stream(stream.id, from, hi, write))).assertWhole();
    this.bulk.readNext(stream, from, maxBytes);
  }

  async chunkAt(stream: StreamState, position: number): Promise<StoredChunk | null> {
    const source = new ReadSource(this.reads, position + 1);
    return this.read(() => withLoads(() => chunkFromChain(source, stream, position)));
  }

  async snapshotBody(stream: StreamState): Promise<Buffer | null> {
    const { rows } = await this.query<{ data: Buffer }>('SELECT data FROM snapshots WHERE stream_id = $1', [stream.id]);
    return rows[0]?.data ?? null;
  }

  async bucketSettings(id: string): Promise<BucketSettings | undefined> {
    const { rows } = await this.query<{ settings: unknown }>('SELECT settings FROM buckets WHERE id = $1', [id]);
    return bucketSettingsFromStored(rows[0]?.settings);
  }

  /** Counts the streams isListed (core/stream.ts) takes, as do listStreams and listBuckets below. */
  async getBucket(id: string): Promise<BucketInfo | undefined> {
    const { rows } = await this.query<{ id: string; created_at_ms: number; n: number; settings: unknown }>(
      `SELECT id, created_at_ms, settings, (SELECT count(*)::bigint FROM streams
         WHERE bucket = $1 AND deleted = 0 AND (expiry_ms IS NULL OR expiry_ms > $2)) AS n FROM buckets WHERE id = $1`,
      [id, this.now()],
    );
    const row = rows[0];
    return row ? withSettings({ id: row.id, createdAtMs: row.created_at_ms, streamCount: row.n }, row.settings) : undefined;
  }

  async listStreams(bucket: string, prefix: string, after: string | null, limit: number): Promise<StreamListing> {
    const keyPrefix = `b/${bucket}/`;
    // Names with the prefix are one contiguous run from `keyPrefix + prefix` on ("C" collation).
    const { rows } = await this.query<{ name: string }>(
      `SELECT name FROM streams WHERE bucket = $1 AND name >= $2 AND name > $3 AND deleted = 0
         AND (expiry_ms IS NULL OR expiry_ms > $4) ORDER BY name LIMIT $5`,
      [bucket, keyPrefix + prefix, keyPrefix + (after ?? ''), this.now(), limit + 1],
    );
    const ids = rows.map((r) => r.name.slice(keyPrefix.length)).filter((id) => id.startsWith(prefix));
    const names = ids.slice(0, limit);
    return { names, nextAfter: ids.length > limit ? names[names.length - 1]! : null };
  }

  async listBuckets(after: string | null, limit: number): Promise<BucketListing> {
    const { rows } = await this.query<{ id: string; created_at_ms: number; n: number }>(
      `SELECT b.id, b.created_at_ms, (SELECT count(*)::bigint FROM streams s
         WHERE s.bucket = b.id AND s.deleted = 0 AND (s.expiry_ms IS NULL OR s.expiry_ms > $2)) AS n
       FROM buckets b WHERE b.id > $1 ORDER BY b.id LIMIT $3`,
      [after ?? '', this.now(), limit + 1],
    );
    const buckets = rows.slice(0, limit).map((row) => ({ id: row.id, createdAtMs: row.created_at_ms, streamCount: row.n }));
    return { buckets, nextAfter: rows.length > limit ? buckets[buckets.length - 1]!.id : null };
  }

  async totals(): Promise<StoreTotals> {
    const { rows } = await this.query<StoreTotals>(
      `SELECT (SELECT count(*)::bigint FROM buckets) AS buckets, (SELECT count(*)::bigint FROM streams WHERE deleted = 0) AS streams,
         (SELECT count(*)::bigint FROM producers) AS producers`,
    );
    return rows[0]!;
  }

  /** Messages are N - F of each row (core/records.ts, messagesHeld), summed by PostgreSQL. */
  async heldTotals(): Promise<HeldTotals> {
    const { rows } = await this.query<HeldTotals>(
      `SELECT coalesce(sum(tail - earliest_offset), 0)::bigint AS bytes, coalesce(sum(record_next - record_first), 0)::bigint AS messages
         FROM streams WHERE deleted = 0`,
    );
    return rows[0]!;
  }

  /** ownStart (core/stream.ts) as SQL: a fork's own bytes begin at its fork point. */
  async bucketHeldBytes(bucket: string): Promise<number> {
    const { rows } = await this.query<{ bytes: number }>(
      `SELECT coalesce(sum(tail - greatest(earliest_offset, coalesce(fork_offset, 0))), 0)::bigint AS bytes
         FROM streams WHERE bucket = $1 AND deleted = 0`,
      [bucket],
    );
    return rows[0]!.bytes;
  }

  async countProducers(stream: StreamState): Promise<number> {
    const { rows } = await this.query<{ n: number }>('SELECT count(*)::bigint AS n FROM producers WHERE stream_id = $1', [stream.id]);
    return rows[0]!.n;
  }

  async listProducers(stream: StreamState, after: string | null, limit: number): Promise<ProducerListing> {
    // producer_id is "C"-collated: this order is the UTF-8 byte order the other engines list in.
    const { rows } = await this.query<Record<string, unknown>>(
      `SELECT ${PRODUCER_COLUMNS.join(', ')} FROM producers WHERE stream_id = $1 AND producer_id > $2 ORDER BY producer_id LIMIT $3`,
      [stream.id, after ?? '', limit + 1],
    );
    const producers = rows.slice(0, limit).map((row) => producerFromValues(PRODUCER_COLUMNS.map((column) => row[column]) as ProducerValues));
    return { producers, nextAfter: rows.length > limit ? producers[producers.length - 1]!.id : null };
  }

  // ---- subscriptions ------------------------------------------------------------------

  async getSubscription(key: string): Promise<SubscriptionState | undefined> {
    const { rows } = await this.query<{ record: string }>('SELECT record FROM subscriptions WHERE key = $1', [key]);
    return rows[0] ? subscriptionFromRecord(rows[0].record) : undefined;
  }

  async listSubscriptions(scope: string | null, afterKey: string | null, limit: number): Promise<SubscriptionState[]> {
    const prefix = scope === null ? '' : `${scope}/`;
    // The scope's keys are one contiguous run from its prefix on ("C" collation).
    const { rows } = await this.query<{ key: string; record: string }>(
      'SELECT key, record FROM subscriptions WHERE key >= $1 AND key > $2 ORDER BY key LIMIT $3',
      [prefix, afterKey ?? '', limit],
    );
    return rows.filter((row) => row.key.startsWith(prefix)).map((row) => subscriptionFromRecord(row.record));
  }

  async subscriptionLinks(subKey: string, afterPath: string | null, limit: number): Promise<LinkView[]> {
    const { rows } = await this.query<LinkRow & { tail: number | null }>(
      `SELECT l.*, CASE WHEN s.deleted = 0 THEN s.tail END AS tail FROM subscription_links l LEFT JOIN streams s ON s.name = l.stream
       WHERE l.sub_key = $1 AND l.path > $2 ORDER BY l.path LIMIT $3`,
      [subKey, afterPath ?? '', limit],
    );
    return rows.map((row) => ({ link: linkFromRow(row), tail: row.tail }));
  }

  async linkIndex(after: { stream: string; subKey: string } | null, limit: number): Promise<Array<{ stream: string; subKey: string }>> {
    const { rows } = await this.query<{ stream: string; sub_key: string }>(
      'SELECT stream, sub_key FROM subscription_links WHERE (stream, sub_key) > ($1, $2) ORDER BY stream, sub_key LIMIT $3',
      [after?.stream ?? '', after?.subKey ?? '', limit],
    );
    return rows.map((row) => ({ stream: row.stream, subKey: row.sub_key }));
  }

  /**
   * isDue (core/subscription-queries.ts): `due_ms` is dueAtMs; an idle one (`awake = 0`) is due
   * when a link is pending (isPending of linkedTail: stream not deleted, tail beyond `acked`).
   */
  async dueSubscriptions(nowMs: number, limit: number): Promise<string[]> {
    const { rows } = await this.query<{ key: string }>(
      `SELECT key FROM subscriptions WHERE due_ms <= $1
       UNION SELECT u.key FROM subscriptions u WHERE u.awake = 0 AND EXISTS (SELECT 1 FROM subscription_links l JOIN streams s ON s.name = l.stream
         WHERE l.sub_key = u.key AND s.deleted = 0 AND s.tail > l.acked)
       ORDER BY key LIMIT $2`,
      [nowMs, limit],
    );
    return rows.map((row) => row.key);
  }

  async getMeta(key: string): Promise<string | undefined> {
    const { rows } = await this.query<{ value: string }>('SELECT value FROM rill_meta WHERE key = $1', [key]);
    return rows[0]?.value;
  }

  /** One statement, atomic across nodes: of two setting the same absent key, one inserts and the other finds it taken. */
  async compareAndSetMeta(key: string, expected: string | undefined, value: string): Promise<boolean> {
    const { rows } =
      expected === undefined
        ? await this.query('INSERT INTO rill_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING RETURNING key', [key, value])
        : await this.query('UPDATE rill_meta SET value = $2 WHERE key = $1 AND value = $3 RETURNING key', [key, value, expected]);
    return rows.length === 1;
  }

  private async versions(names: string[]): Promise<Map<string, string>> {
    const { rows } = await this.query<{ name: string; v: string }>(
      `SELECT name, incarnation || ':' || tail || ':' || closed || ':' || deleted AS v FROM streams WHERE name = ANY($1::text[])`,
      [names],
    );
    return new Map(rows.map((r) => [r.name, r.v]));
  }

  protected closeEngine(): Promise<void> {
    return this.shutDown();
  }

  private async shutDown(): Promise<void> {
    await this.hints.close();
    await Promise.all([this.pool.end().catch(() => {}), this.bulk.close()]);
  }
}
