/**
 * Large reads as `COPY ... TO STDOUT (FORMAT binary)`. A query's rows reach `pg` as text:
 * a BYTEA value comes as hex (twice its size), which pg-protocol decodes into a string
 * and pg-types back into bytes. For a 4 MiB catch-up response that was most of the
 * node's time (docs/performance.md, issue 41). In binary COPY the server sends the bytes
 * as stored and the client copies them once. COPY takes no parameters, so the statement
 * is built from integers only, and it cannot share a pipelined connection: it runs on a
 * pool of its own (engine.ts).
 */
import type { Connection } from 'pg';
import { to as copyTo, type CopyToStreamQuery } from 'pg-copy-streams';
import type { StoredChunk } from '../chain.js';
import { WINDOW_SQL } from './chunks.js';

/** The signature, flags and extension length that open a binary COPY (PostgreSQL's "COPY" page). */
const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
const HEADER_BYTES = SIGNATURE.length + 8;

/** The rows of `copyWindowSql`: start (int8) and data (bytea) per chunk. */
const FIELDS = 2;

function integer(value: number): string {
  if (!Number.isSafeInteger(value)) throw new Error(`invariant: COPY statement built from ${value}`);
  return String(value);
}

/** WINDOW_SQL (chunks.ts) with its values written in, as COPY takes no parameters. */
export function copyWindowSql(streamId: number, from: number, hi: number): string {
  const values = [integer(streamId), integer(from), integer(hi)];
  return `COPY (${WINDOW_SQL.replace(/\$([123])/g, (_, n: string) => values[Number(n) - 1]!)}) TO STDOUT (FORMAT binary)`;
}

/**
 * Bytes of a COPY's output, taken as they arrive (views of the socket's reads, which
 * nothing reuses); a value within one part is a view of it, one spanning parts is joined.
 */
export class CopyReader {
  private readonly parts: Buffer[] = [];
  private part = 0;
  private offset = 0;

  push(bytes: Buffer): void {
    this.parts.push(bytes);
  }

  /** The next `n` bytes. */
  take(n: number): Buffer {
    const current = this.parts[this.part];
    if (current && this.offset + n <= current.length) {
      const view = current.subarray(this.offset, this.offset + n);
      this.advance(n);
      return view;
    }
    const out = Buffer.allocUnsafe(n);
    for (let filled = 0; filled < n; ) {
      const source = this.parts[this.part];
      if (!source) throw new Error('binary COPY output ended inside a value');
      const copied = source.copy(out, filled, this.offset, Math.min(source.length, this.offset + n - filled));
      filled += copied;
      this.advance(copied);
    }
    return out;
  }

  private advance(n: number): void {
    this.offset += n;
    while (this.part < this.parts.length && this.offset >= this.parts[this.part]!.length) {
      this.offset -= this.parts[this.part]!.length;
      this.parts[this.part++] = Buffer.alloc(0);
    }
  }
}

/** A field's length; both columns are NOT NULL, so never -1 (null). */
function fieldLength(reader: CopyReader): number {
  const length = reader.take(4).readInt32BE(0);
  if (length < 0) throw new Error('binary COPY row with a null field');
  return length;
}

/** The chunks in a binary COPY's output of `copyWindowSql`. */
export function chunksFromCopy(reader: CopyReader): StoredChunk[] {
  const header = reader.take(HEADER_BYTES);
  if (!header.subarray(0, SIGNATURE.length).equals(SIGNATURE)) throw new Error('binary COPY output without its signature');
  reader.take(header.readUInt32BE(SIGNATURE.length + 4));
  const chunks: StoredChunk[] = [];
  for (;;) {
    const fields = reader.take(2).readInt16BE(0);
    if (fields === -1) return chunks;
    if (fields !== FIELDS) throw new Error(`binary COPY row of ${fields} fields, expected ${FIELDS}`);
    const start = Number(reader.take(fieldLength(reader)).readBigInt64BE(0));
    const data = reader.take(fieldLength(reader));
    chunks.push({ start, data });
  }
}

/**
 * A COPY TO STDOUT run as a pg "submittable", its output read by pg-copy-streams. While
 * the COPY runs, that library takes the connection's socket from pg's parser and hands on
 * the CopyData payloads as views of the socket's reads. pg's parser would gather each row
 * (a whole chunk, up to megabytes) into a buffer it grows by doubling and reuses, which
 * had to be copied again: about 3.5 bytes allocated per byte served, and a V8 mark-compact
 * every few megabytes (docs/performance.md). Resolves with the chunks once the output has
 * ended and the server is ready again.
 */
export class CopyWindow {
  private readonly reader = new CopyReader();
  private readonly output: CopyToStreamQuery;
  private outputEnded = false;
  private serverReady = false;
  private settled = false;
  readonly done: Promise<StoredChunk[]>;
  private settle!: { resolve: (chunks: StoredChunk[]) => void; reject: (error: Error) => void };
  /** Set by pg when the client has a query timeout: told the outcome, so that it stops its timer. */
  callback?: (error?: Error) => void;

  constructor(text: string) {
    this.done = new Promise((resolve, reject) => (this.settle = { resolve, reject }));
    this.output = copyTo(text);
    this.output.on('data', (bytes: Buffer) => this.reader.push(bytes));
    this.output.on('end', () => {
      this.outputEnded = true;
      this.complete();
    });
    // The server's errors and a lost connection reach handleError through pg.
    this.output.on('error', () => {});
  }

  submit(connection: Connection): void {
    this.output.submit(connection);
  }

  handleCommandComplete(): void {}

  /** The server refused the statement, the connection failed or the client timed out: no readiness may follow. */
  handleError(error: Error): void {
    this.finish(error, []);
  }

  handleReadyForQuery(): void {
    this.serverReady = true;
    this.complete();
  }

  /**
   * Either may come first: pg-copy-streams hands the bytes after CopyDone back to pg's
   * parser before it ends its output, but ReadyForQuery may also arrive in a later read.
   */
  private complete(): void {
    if (!this.outputEnded || !this.serverReady || this.settled) return;
    let chunks: StoredChunk[] = [];
    try {
      chunks = chunksFromCopy(this.reader);
    } catch (error) {
      return this.finish(error as Error, []);
    }
    this.finish(null, chunks);
  }

  private finish(error: Error | null, chunks: StoredChunk[]): void {
    if (this.settled) return;
    this.settled = true;
    this.callback?.(error ?? undefined);
    if (error) this.settle.reject(error);
    else this.settle.resolve(chunks);
  }
}
