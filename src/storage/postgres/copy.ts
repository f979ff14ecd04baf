/**
 * Large reads as `COPY ... TO STDOUT (FORMAT binary)`. A query's rows reach `pg` as text:
 * a BYTEA value comes as hex (twice its size), which pg-protocol decodes into a string
 * and pg-types back into bytes. For a 4 MiB catch-up response that was most of the
 * node's time (docs/performance.md, issue 41). In binary COPY the server sends the bytes
 * as stored, and they reach a response as the views of the socket's reads that
 * copy-out.ts hands on (joined only where a chunk is asked for whole). COPY takes no
 * parameters, so the statement is built from integers only, and it cannot share a
 * pipelined connection: it runs on a pool of its own (bulk-reads.ts).
 */
import type { Connection } from 'pg';
import type { StoredChunk } from '../chain.js';
import { SLICED_WINDOW_SQL } from './chunks.js';
import { readCopyOut } from './copy-out.js';

/** The signature, flags and extension length that open a binary COPY (PostgreSQL's "COPY" page). */
const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
const HEADER_BYTES = SIGNATURE.length + 8;

/** The rows of `copyWindowSql`: start (int8) and data (bytea) per chunk. */
const FIELDS = 2;
/** A row's field count, the start's length and value, and the data's length. */
const ROW_HEAD_BYTES = 2 + 4 + 8 + 4;
/** The field count that ends the output (the trailer). */
const TRAILER = -1;

function integer(value: number): string {
  if (!Number.isSafeInteger(value)) throw new Error(`invariant: COPY statement built from ${value}`);
  return String(value);
}

/** SLICED_WINDOW_SQL (chunks.ts) with its values written in, as COPY takes no parameters. */
export function copyWindowSql(streamId: number, from: number, hi: number): string {
  const values = [integer(streamId), integer(from), integer(hi)];
  return `COPY (${SLICED_WINDOW_SQL.replace(/\$([123])/g, (_, n: string) => values[Number(n) - 1]!)}) TO STDOUT (FORMAT binary)`;
}

/**
 * Bytes of a COPY's output, taken as they arrive (views of the socket's reads, which
 * nothing reuses); a field within one read is a view of it, one spanning reads is joined.
 */
export class CopyReader {
  private parts: Buffer[] = [];
  private part = 0;
  private offset = 0;
  /** Bytes pushed and not yet taken. */
  available = 0;

  push(bytes: Buffer): void {
    // An empty part would be one that takeSome cannot take from.
    if (bytes.length === 0) return;
    // Parts taken are dropped now and then, not on each step: a shift is a copy of the list.
    if (this.part > 64) {
      this.parts = this.parts.slice(this.part);
      this.part = 0;
    }
    this.parts.push(bytes);
    this.available += bytes.length;
  }

  /** The next `n` bytes, all of them available. */
  take(n: number): Buffer {
    const current = this.parts[this.part]!;
    if (this.offset + n <= current.length) return this.takeSome(n);
    const out = Buffer.allocUnsafe(n);
    for (let filled = 0; filled < n; ) filled += this.takeSome(n - filled).copy(out, filled);
    return out;
  }

  /** The next `n` bytes, all of them available, left to be taken. */
  peek(n: number): Buffer {
    const current = this.parts[this.part]!;
    if (this.offset + n <= current.length) return current.subarray(this.offset, this.offset + n);
    const out = Buffer.allocUnsafe(n);
    let filled = current.copy(out, 0, this.offset);
    for (let i = this.part + 1; filled < n; i++) filled += this.parts[i]!.copy(out, filled, 0, n - filled);
    return out;
  }

  /** Up to `max` of the next bytes, as many as the current read holds (a view of it). */
  takeSome(max: number): Buffer {
    const current = this.parts[this.part]!;
    const n = Math.min(max, current.length - this.offset);
    const view = current.subarray(this.offset, this.offset + n);
    this.offset += n;
    this.available -= n;
    if (this.offset === current.length) {
      this.parts[this.part++] = EMPTY;
      this.offset = 0;
    }
    return view;
  }
}

const EMPTY = Buffer.alloc(0);

/** Where a COPY's rows go as they are parsed: each row's start and length, then its value in order, in pieces. */
export interface CopyRowSink {
  row(start: number, bytes: number): void;
  data(piece: Buffer): void;
}

/**
 * Parses the binary COPY output of `copyWindowSql` as it arrives, handing each value on
 * as the pieces it came in: a response can send the first rows while the last arrive.
 */
export class CopyRowParser {
  private readonly reader = new CopyReader();
  private step: 'header' | 'extension' | 'row' | 'value' | 'ended' = 'header';
  /** Bytes of the header extension or of the current value still to come. */
  private left = 0;

  constructor(private readonly sink: CopyRowSink) {}

  /** Whether the output's trailer has been read. */
  get ended(): boolean {
    return this.step === 'ended';
  }

  push(bytes: Buffer): void {
    if (this.step === 'ended') throw new Error('binary COPY output after its trailer');
    this.reader.push(bytes);
    while (this.advance());
  }

  /** Takes the next step the bytes at hand allow; false when it needs more. */
  private advance(): boolean {
    const reader = this.reader;
    switch (this.step) {
      case 'header': {
        if (reader.available < HEADER_BYTES) return false;
        const header = reader.take(HEADER_BYTES);
        if (!header.subarray(0, SIGNATURE.length).equals(SIGNATURE)) throw new Error('binary COPY output without its signature');
        this.left = header.readUInt32BE(SIGNATURE.length + 4);
        this.step = 'extension';
        return true;
      }
      case 'extension':
        while (this.left > 0 && reader.available > 0) this.left -= reader.takeSome(this.left).length;
        if (this.left > 0) return false;
        this.step = 'row';
        return true;
      case 'row':
        return this.rowHead();
      case 'value':
        while (this.left > 0 && reader.available > 0) {
          const piece = reader.takeSome(this.left);
          this.left -= piece.length;
          this.sink.data(piece);
        }
        if (this.left > 0) return false;
        this.step = 'row';
        return true;
      case 'ended':
        return false;
    }
  }

  /** A row's head (its field count, its start, its value's length), or the trailer. */
  private rowHead(): boolean {
    const reader = this.reader;
    if (reader.available < 2) return false;
    if (reader.peek(2).readInt16BE(0) === TRAILER) {
      reader.take(2);
      this.step = 'ended';
      return false;
    }
    if (reader.available < ROW_HEAD_BYTES) return false;
    const head = reader.take(ROW_HEAD_BYTES);
    const fields = head.readInt16BE(0);
    if (fields !== FIELDS) throw new Error(`binary COPY row of ${fields} fields, expected ${FIELDS}`);
    if (head.readInt32BE(2) !== 8) throw new Error('binary COPY row whose start is not an int8');
    const start = Number(head.readBigInt64BE(6));
    this.left = head.readInt32BE(14);
    if (this.left < 0) throw new Error('binary COPY row with a null value');
    this.sink.row(start, this.left);
    this.step = 'value';
    return true;
  }
}

/**
 * A COPY's rows as they came: their values in the pieces the parser handed on (views of
 * the socket's reads), and each row's start and length. Kept so, a window read ahead is
 * sent as it is (replay) or made into chunks for the reads that take chunks (chunks).
 */
export class LoadedRows implements CopyRowSink {
  private readonly starts: number[] = [];
  private readonly lengths: number[] = [];
  private readonly pieces: Buffer[] = [];

  row(start: number, bytes: number): void {
    this.starts.push(start);
    this.lengths.push(bytes);
  }

  data(piece: Buffer): void {
    this.pieces.push(piece);
  }

  /** Each row's pieces in order, to `row` then `data` (a piece never holds two rows' bytes). */
  private visit(sink: CopyRowSink): void {
    let piece = 0;
    for (let i = 0; i < this.starts.length; i++) {
      sink.row(this.starts[i]!, this.lengths[i]!);
      for (let left = this.lengths[i]!; left > 0; piece++) {
        sink.data(this.pieces[piece]!);
        left -= this.pieces[piece]!.length;
      }
    }
  }

  /** The rows as chunks: a value that came in one piece is a view of it, one in several is joined once. */
  chunks(): StoredChunk[] {
    const chunks: StoredChunk[] = [];
    let pieces: Buffer[] = [];
    let start = 0;
    let left = 0;
    this.visit({
      row: (rowStart, bytes) => {
        [start, left, pieces] = [rowStart, bytes, []];
        if (bytes === 0) chunks.push({ start, data: EMPTY });
      },
      data: (piece) => {
        pieces.push(piece);
        left -= piece.length;
        if (left === 0) chunks.push({ start, data: pieces.length === 1 ? piece : Buffer.concat(pieces) });
      },
    });
    return chunks;
  }

  /** The rows' bytes `[from, hi)` handed to `write` as a WindowWriter hands them on. */
  replay(from: number, hi: number, write: (bytes: Buffer) => void): WindowWriter {
    const writer = new WindowWriter(from, hi, write);
    this.visit(writer);
    return writer;
  }
}

/**
 * Hands on the bytes `[from, hi)` of a COPY's rows as they arrive: the rows of
 * `copyWindowSql(id, from, hi)` run from the one holding `from` to the one holding
 * `hi - 1`, so the first and the last may be cut.
 */
export class WindowWriter implements CopyRowSink {
  private position = 0;
  private written = 0;

  constructor(
    private readonly from: number,
    private readonly hi: number,
    private readonly write: (bytes: Buffer) => void,
  ) {}

  row(start: number): void {
    this.position = start;
  }

  data(piece: Buffer): void {
    const lo = Math.max(this.from - this.position, 0);
    const hi = Math.min(this.hi - this.position, piece.length);
    this.position += piece.length;
    if (hi <= lo) return;
    this.written += hi - lo;
    this.write(lo === 0 && hi === piece.length ? piece : piece.subarray(lo, hi));
  }

  /** Every byte of the window was handed on: a stream's own appends leave no gap below its tail. */
  assertWhole(): void {
    if (this.written !== this.hi - this.from) throw new Error(`invariant: a window [${this.from}, ${this.hi}) gave ${this.written} bytes`);
  }
}

/**
 * A COPY TO STDOUT run as a pg "submittable", so that pg's query timeout and error
 * handling hold for it as for any query; its output is read by copy-out.ts, and its rows go
 * to `sink` as they are parsed. `done` resolves once the output has ended and the server is
 * ready again.
 */
export class CopyWindow {
  private readonly parser: CopyRowParser;
  private outputEnded = false;
  private serverReady = false;
  private settled = false;
  readonly done: Promise<void>;
  private settle!: { resolve: () => void; reject: (error: Error) => void };
  /** Set by pg when the client has a query timeout: told the outcome, so that it stops its timer. */
  callback?: (error?: Error) => void;

  constructor(
    private readonly text: string,
    sink: CopyRowSink,
  ) {
    this.done = new Promise((resolve, reject) => (this.settle = { resolve, reject }));
    this.parser = new CopyRowParser(sink);
  }

  submit(connection: Connection): void {
    readCopyOut(connection, this.text, {
      data: (bytes) => this.parse(bytes),
      end: () => {
        this.outputEnded = true;
        this.complete();
      },
    });
  }

  handleCommandComplete(): void {}

  /** The server refused the statement, the connection failed or the client timed out: no readiness may follow. */
  handleError(error: Error): void {
    this.finish(error);
  }

  handleReadyForQuery(): void {
    this.serverReady = true;
    this.complete();
  }

  private parse(bytes: Buffer): void {
    if (this.settled) return;
    try {
      this.parser.push(bytes);
    } catch (error) {
      // The connection is still inside the COPY: the caller closes it (engine.ts).
      this.finish(error as Error);
    }
  }

  /** CopyDone comes first, ReadyForQuery in the same read of the socket or a later one. */
  private complete(): void {
    if (!this.outputEnded || !this.serverReady) return;
    this.finish(this.parser.ended ? null : new Error('binary COPY output ended inside a row'));
  }

  private finish(error: Error | null): void {
    if (this.settled) return;
    this.settled = true;
    this.callback?.(error ?? undefined);
    if (error) this.settle.reject(error);
    else this.settle.resolve();
  }
}
