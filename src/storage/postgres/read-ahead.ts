/**
 * Catch-up reads ahead. A reader catching up a long stream asks for one window after
 * another, each from where the last ended: while one response's bytes go out, the node
 * reads the next window, so that the reader's next request finds it loaded instead of
 * waiting for PostgreSQL again (issue 41: a 4 MiB window took as long to read as to send).
 *
 * A window read ahead is what reading it later would give: it ends below a committed
 * tail, committed chunks below a tail never change (appends go at the tail, stream ids
 * are never reused), and retention removes rows only below the earliest offset, which
 * every read is checked against before it reads. Windows are kept for a few seconds and
 * within a byte budget; one not asked for by then is dropped.
 */
import type { LoadedRows } from './copy.js';

/** Loads the rows of a window `[from, hi)` of a stream's own chunks. */
export type RowsLoad = (streamId: number, from: number, hi: number) => Promise<LoadedRows>;

interface Ahead {
  bytes: number;
  rows: Promise<LoadedRows>;
  timer: NodeJS.Timeout;
}

export class ReadAhead {
  private readonly windows = new Map<string, Ahead>();
  private heldBytes = 0;

  constructor(
    private readonly load: RowsLoad,
    private readonly maxBytes: number,
    private readonly keepMs: number,
    /** Windows read ahead, and those a request then took. */
    private readonly counts: { readAheads: number; readAheadsTaken: number },
  ) {}

  /** The window `[from, hi)` of a stream's own chunks: the one read ahead, or a load now. */
  take(streamId: number, from: number, hi: number): Promise<LoadedRows> {
    const key = `${streamId}:${from}:${hi}`;
    const ahead = this.windows.get(key);
    if (!ahead) return this.load(streamId, from, hi);
    this.forget(key);
    this.counts.readAheadsTaken++;
    // A read ahead that failed is not the request's failure: it reads for itself.
    return ahead.rows.catch(() => this.load(streamId, from, hi));
  }

  /** Whether the window `[from, hi)` is held, read ahead or being read. */
  holds(streamId: number, from: number, hi: number): boolean {
    return this.windows.has(`${streamId}:${from}:${hi}`);
  }

  /** Starts reading `[from, hi)`, expected to be asked for next, unless held already or over the budget. */
  readNext(streamId: number, from: number, hi: number): void {
    const key = `${streamId}:${from}:${hi}`;
    const bytes = hi - from;
    if (this.windows.has(key) || this.heldBytes + bytes > this.maxBytes) return;
    const rows = this.load(streamId, from, hi);
    // Unhandled until taken: a failure is met by the request that takes it, or by none.
    rows.catch(() => {});
    const timer = setTimeout(() => this.forget(key), this.keepMs);
    timer.unref();
    this.windows.set(key, { bytes, rows, timer });
    this.heldBytes += bytes;
    this.counts.readAheads++;
  }

  private forget(key: string): void {
    const ahead = this.windows.get(key);
    if (!ahead) return;
    clearTimeout(ahead.timer);
    this.windows.delete(key);
    this.heldBytes -= ahead.bytes;
  }

  clear(): void {
    for (const key of [...this.windows.keys()]) this.forget(key);
  }
}
