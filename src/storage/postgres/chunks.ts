/**
 * Chunk rows loaded for reads. Reads run the shared fork-chain logic (chain.ts), which
 * asks synchronous questions; here each question is answered from rows already loaded,
 * or stops with MissingState naming the query that loads them. A read loads, for each
 * stream of its chain, one window: every chunk from the one holding its first position
 * up to the read's end, so a plain read is one round trip.
 */
import type { StreamState } from '../../core/types.js';
import type { ChunkSource, StoredChunk } from '../chain.js';
import { MissingState } from '../missing.js';
import { withArrayParams } from './array-params.js';
import { rowToStream, type StreamRow } from '../stream-columns.js';

/** A pool or a client inside a transaction. */
export interface Queryable {
  query<R extends object>(text: string, values?: unknown[]): Promise<{ rows: R[] }>;
}

/** Names given to statement texts, so that a connection prepares each once. */
const statementNames = new Map<string, string>();
/** Texts are built from a handful of shapes; past this many, new ones run unnamed. */
const MAX_STATEMENT_NAMES = 512;

function statementName(text: string): string | undefined {
  let name = statementNames.get(text);
  if (name === undefined && statementNames.size < MAX_STATEMENT_NAMES) statementNames.set(text, (name = `rill_${statementNames.size}`));
  return name;
}

/**
 * A connection whose statements are prepared: PostgreSQL parses and plans each text once
 * per connection instead of once per batch. Their array parameters are sent in the text
 * form arrayParam makes.
 */
export function preparing(client: { query(config: { name?: string; text: string; values?: unknown[] }): Promise<{ rows: unknown[] }> }): Queryable {
  return { query: (text, values) => client.query({ name: statementName(text), text, values: values && withArrayParams(values) }) as never };
}

/** Every chunk of a stream starting at or after the one that holds `from`, and before `hi`. */
interface Window {
  from: number;
  hi: number;
  rows: StoredChunk[];
}

// The order names the table's column: a bare `start` would be the sliced query's output
// column (its cut start), which no index gives in order, and PostgreSQL would sort every
// row of the window before sending the first.
const WINDOW_ROWS = `FROM chunks WHERE stream_id = $1 AND start < $3
  AND start >= coalesce((SELECT max(start) FROM chunks WHERE stream_id = $1 AND start <= $2), $2) ORDER BY chunks.start`;

/** A window's rows as stored, whole appends: for what needs an append's bounds (chunkAt, a batch's reads). */
export const WINDOW_SQL = `SELECT start, data ${WINDOW_ROWS}`;

/**
 * A window's rows cut to `[$2, $3)` by the database, for reads of bytes: a 64 KiB read
 * inside a 32 MiB append took all 32 MiB from PostgreSQL, to cut it here (about 2 s a
 * read). PostgreSQL reads a slice of a value stored out of line without the rest (or, if
 * compressed, decompresses up to its end). The reads' chain (chain.ts) cuts its first and
 * last appends to the window itself, so it hands out the same parts either way. Rows
 * wholly inside go as they are; the length never goes below 0, which SUBSTRING refuses.
 */
export const SLICED_WINDOW_SQL = `SELECT greatest(start, $2) AS start,
  CASE WHEN start >= $2 AND start + length(data) <= $3 THEN data
    ELSE substring(data FROM (greatest($2 - start, 0) + 1)::integer FOR greatest(least(start + length(data), $3) - greatest(start, $2), 0)::integer) END AS data
  ${WINDOW_ROWS}`;

/** Loads a window of at least BULK_MIN_BYTES by other means than a query (copy.ts). */
export type BulkLoad = (streamId: number, from: number, hi: number) => Promise<StoredChunk[]>;

/**
 * Windows spanning this many bytes or more go to the bulk load when there is one: below,
 * a prepared query on the pipelined pool costs less than a COPY (parsed and planned each
 * time, on a connection of its own). Live readers at the tail read a few bytes; catch-up
 * responses, megabytes.
 */
export const BULK_MIN_BYTES = 256 * 1024;

/** Given to a read of bytes, whose windows come cut to it: how it loads the large ones (bulk-reads.ts). */
export interface WindowReads {
  load: BulkLoad;
  /** Told the rows of each window loaded, to count their bytes. */
  received(rows: StoredChunk[]): void;
}

export class ChunkWindows {
  private readonly windows = new Map<number, Window[]>();

  constructor(
    private readonly db: Queryable,
    private readonly reads?: WindowReads,
  ) {}

  /** The chunk with the greatest start at or before `position`; loads up to `hi` when missing. */
  containing(streamId: number, position: number, hi: number): StoredChunk | null {
    const window = this.find(streamId, position, position + 1);
    if (!window) throw new MissingState(() => this.load(streamId, position, Math.max(hi, position + 1)));
    let found: StoredChunk | null = null;
    for (const row of window.rows) {
      if (row.start > position) break;
      found = row;
    }
    return found;
  }

  /** The chunks with `from <= start < before`, in order. */
  from(streamId: number, from: number, before: number): StoredChunk[] {
    const window = this.find(streamId, from, before);
    if (!window) throw new MissingState(() => this.load(streamId, from, before));
    return window.rows.filter((row) => row.start >= from && row.start < before);
  }

  private find(streamId: number, from: number, before: number): Window | undefined {
    return this.windows.get(streamId)?.find((w) => w.from <= from && before <= w.hi);
  }

  private async load(streamId: number, from: number, hi: number): Promise<void> {
    const rows =
      this.reads === undefined ? (await this.db.query<StoredChunk>(WINDOW_SQL, [streamId, from, hi])).rows
      : hi - from >= BULK_MIN_BYTES ? await this.reads.load(streamId, from, hi)
      : (await this.db.query<StoredChunk>(SLICED_WINDOW_SQL, [streamId, from, hi])).rows;
    this.reads?.received(rows);
    let list = this.windows.get(streamId);
    if (!list) this.windows.set(streamId, (list = []));
    list.push({ from, hi, rows });
  }
}

/** Runs `read` (synchronous, over loaded rows), loading what it misses, until it completes. */
export async function withLoads<T>(read: () => T): Promise<T> {
  for (;;) {
    try {
      return read();
    } catch (error) {
      if (!(error instanceof MissingState)) throw error;
      await error.load();
    }
  }
}

/**
 * The committed chunks and streams a read needs, for chain.ts; `hi` is where the read
 * ends. A read of bytes gives `reads`, and its windows come cut to it; without, whole appends.
 */
export class ReadSource implements ChunkSource {
  private readonly streams = new Map<number, StreamState | null>();
  private readonly windows: ChunkWindows;

  constructor(
    private readonly db: Queryable,
    private readonly hi: number,
    reads?: WindowReads,
  ) {
    this.windows = new ChunkWindows(db, reads);
  }

  streamById(id: number): StreamState | undefined {
    const known = this.streams.get(id);
    if (known !== undefined) return known ?? undefined;
    throw new MissingState(async () => {
      const { rows } = await this.db.query<StreamRow>('SELECT * FROM streams WHERE id = $1', [id]);
      this.streams.set(id, rows[0] ? rowToStream(rows[0]) : null);
    });
  }

  chunkContaining(streamId: number, position: number): StoredChunk | null {
    return this.windows.containing(streamId, position, this.hi);
  }

  chunksFrom(streamId: number, from: number, before: number): Iterable<StoredChunk> {
    return this.windows.from(streamId, from, before);
  }
}
