/**
 * Large reads: windows of BULK_MIN_BYTES or more read as binary COPY (copy.ts) on a pool of
 * connections of their own (a COPY cannot share a pipelined connection), read ahead of a
 * catch-up's next request (read-ahead.ts), or handed on to a response as they arrive.
 */
import type pg from 'pg';
import { ownStart } from '../../core/stream.js';
import type { StreamState } from '../../core/types.js';
import type { StoredChunk } from '../chain.js';
import { windowEnd } from '../../core/window.js';
import { BULK_MIN_BYTES, type BulkLoad, type WindowReads } from './chunks.js';
import { copyWindowSql, CopyWindow, LoadedRows, WindowWriter, type CopyRowSink } from './copy.js';
import { openPool } from './pool.js';
import { ReadAhead } from './read-ahead.js';

/** Bytes of windows a node holds read ahead at once, and how long one waits for its request. */
const READ_AHEAD_BYTES = 32 * 1024 * 1024;
const READ_AHEAD_KEEP_MS = 5_000;

/**
 * What the node counts of its reads: windows read as COPY, read ahead, and read ahead then
 * taken; and the bytes of chunk rows the windows of readRange and readChunks received.
 */
export interface BulkReadStats {
  reads: number;
  bulkReads: number;
  windowBytes: number;
  readAheads: number;
  readAheadsTaken: number;
}

export class BulkReads implements WindowReads {
  private readonly pool: pg.Pool;
  private readonly ahead: ReadAhead;

  constructor(
    config: pg.PoolConfig,
    private readonly stats: BulkReadStats,
  ) {
    this.pool = openPool(config);
    this.ahead = new ReadAhead(this.rows, READ_AHEAD_BYTES, READ_AHEAD_KEEP_MS, stats);
  }

  /** A window's chunks: the one read ahead, or a COPY now (ReadSource's bulk load, chunks.ts). */
  readonly load: BulkLoad = async (streamId, from, hi) => (await this.ahead.take(streamId, from, hi)).chunks();

  received(rows: StoredChunk[]): void {
    for (const row of rows) this.stats.windowBytes += row.data.length;
  }

  /**
   * A read of a large window that stops short of the tail is likely followed by one of the
   * next (a catch-up): that one is read while this one goes out (read-ahead.ts). Only for
   * reads whose reader goes on exactly where the window ends (readChunks and streamChunks;
   * readRange's, JSON and text, go on from a message or character boundary before it);
   * only from the stream's own chunks, where the next read's load is the same window; and
   * only a window large enough to be loaded in bulk, which is what the read ahead is taken for.
   * Called once the window asked for has loaded, not before: two windows loading at once
   * share the cores with each other (and with the reader), and the one asked for now comes
   * later (docs/performance.md).
   */
  readNext(stream: StreamState, from: number, maxBytes: number): void {
    const hi = from + maxBytes;
    if (hi >= stream.tail || from < ownStart(stream) || maxBytes < BULK_MIN_BYTES) return;
    const next = windowEnd(stream.tail, hi, maxBytes);
    if (next - hi >= BULK_MIN_BYTES) this.ahead.readNext(stream.id, hi, next);
  }

  /**
   * Whether `stream` hands on `[from, hi)` as it arrives: a large window of the stream's own
   * chunks (a fork's inherited history is read through the chain, chain.ts).
   */
  streams(stream: StreamState, from: number, hi: number): boolean {
    return hi - from >= BULK_MIN_BYTES && from >= ownStart(stream);
  }

  /**
   * The bytes `[from, hi)` of a stream's own chunks, handed to `write` as the COPY's output
   * is parsed, or as they were read ahead.
   */
  async stream(streamId: number, from: number, hi: number, write: (bytes: Buffer) => void): Promise<WindowWriter> {
    if (this.ahead.holds(streamId, from, hi)) return (await this.ahead.take(streamId, from, hi)).replay(from, hi, write);
    const writer = new WindowWriter(from, hi, write);
    await this.copy(copyWindowSql(streamId, from, hi), writer);
    return writer;
  }

  private readonly rows = async (streamId: number, from: number, hi: number): Promise<LoadedRows> => {
    const rows = new LoadedRows();
    await this.copy(copyWindowSql(streamId, from, hi), rows);
    return rows;
  };

  private async copy(text: string, sink: CopyRowSink): Promise<void> {
    const client = await this.pool.connect();
    const copy = new CopyWindow(text, sink);
    let failed = true;
    try {
      void client.query(copy as never);
      await copy.done;
      failed = false;
      this.stats.reads++;
      this.stats.bulkReads++;
    } finally {
      // After a failure the connection may still be inside the COPY: it is closed, not reused.
      client.release(failed);
    }
  }

  async close(): Promise<void> {
    this.ahead.clear();
    await this.pool.end().catch(() => {});
  }
}
