/**
 * The messages of a `COPY ... TO STDOUT`, read from the connection's socket in place of
 * pg's parser while the COPY runs (PostgreSQL's protocol, "COPY Operations"): the server
 * answers with CopyOutResponse, one CopyData per row, then CopyDone, after which pg reads
 * CommandComplete and ReadyForQuery as after any query; an ErrorResponse may come at any
 * point instead.
 *
 * Why not pg's parser: it gathers each message into one buffer, which it grows by doubling
 * and reuses, so a row of a megabyte passed through buffers of up to two and was copied
 * again. Why not pg-copy-streams (used before): it hands on the rows' bytes as one byte
 * stream, and joins the pieces of every socket read that holds the end of one row and the
 * start of the next into a new buffer, which is most of them; that copy was 17% of the
 * node's CPU in a catch-up (docs/performance.md). Here each CopyData payload is passed on
 * as views of the socket's reads, and nothing is copied.
 */
import type { Connection } from 'pg';

const COPY_DATA = 0x64; // 'd'
const COPY_DONE = 0x63; // 'c'
/** Messages a COPY's output may hold besides its rows: its start, and ones a server may send at any time. */
const PASSED_OVER = new Set([0x48 /* 'H' CopyOutResponse */, 0x4e /* 'N' NoticeResponse */, 0x53 /* 'S' ParameterStatus */, 0x41 /* 'A' NotificationResponse */]);
/** A message's type byte and its length (which counts itself). */
const LENGTH_BYTES = 4;

/** Frames of a COPY's output across socket reads. */
export class CopyOutFrames {
  /** Bytes of the current message's length read so far; -1 at a message's type byte. */
  private lengthRead = -1;
  private length = 0;
  private type = 0;
  /** Bytes of the current message's body still to come. */
  private left = 0;
  /** CopyDone was read: the rest is pg's. */
  ended = false;

  constructor(private readonly data: (bytes: Buffer) => void) {}

  /**
   * Reads the COPY's messages in `chunk`: where pg's begin (at CopyDone's end, or at a
   * message that is not the COPY's), or -1 when the whole chunk was the COPY's.
   */
  read(chunk: Buffer): number {
    let at = 0;
    while (at < chunk.length) {
      if (this.left > 0) {
        const n = Math.min(this.left, chunk.length - at);
        if (this.type === COPY_DATA) this.data(chunk.subarray(at, at + n));
        this.left -= n;
        at += n;
      } else if (this.lengthRead < 0) {
        const type = chunk[at]!;
        if (type !== COPY_DATA && type !== COPY_DONE && !PASSED_OVER.has(type)) return at;
        this.type = type;
        this.lengthRead = 0;
        this.length = 0;
        at++;
      } else {
        this.length = this.length * 256 + chunk[at++]!;
        if (++this.lengthRead < LENGTH_BYTES) continue;
        this.lengthRead = -1;
        this.left = this.length - LENGTH_BYTES;
        if (this.left < 0) throw new Error(`a COPY message of length ${this.length}`);
        if (this.type === COPY_DONE) {
          this.ended = true;
          return at;
        }
      }
    }
    return -1;
  }
}

/** Where readCopyOut hands a COPY's output: each CopyData body in pieces, then the end (CopyDone). */
export interface CopyOutput {
  data(bytes: Buffer): void;
  end(): void;
}

/**
 * Sends the COPY `text` on `connection` and reads its output from the socket, until
 * CopyDone or a message of pg's (an ErrorResponse): from there the socket is pg's again,
 * with what it has not read. Output that breaks the protocol fails the connection, which
 * pg reports to the query as any lost connection.
 */
export function readCopyOut(connection: Connection, text: string, output: CopyOutput): void {
  const socket = connection.stream;
  const listeners = socket.listeners('data');
  // pg reads its socket through one listener (pg-protocol's parse): the COPY takes its place.
  if (listeners.length !== 1) throw new Error(`invariant: pg's socket has ${listeners.length} data listeners`);
  const pgRead = listeners[0] as (chunk: Buffer) => void;
  const frames = new CopyOutFrames((bytes) => output.data(bytes));
  const read = (chunk: Buffer): void => {
    let rest: number;
    try {
      rest = frames.read(chunk);
    } catch (error) {
      socket.destroy(error as Error);
      return;
    }
    if (rest < 0) return;
    socket.removeListener('data', read);
    socket.on('data', pgRead);
    if (frames.ended) output.end();
    if (rest < chunk.length) pgRead(chunk.subarray(rest));
  };
  socket.removeListener('data', pgRead);
  socket.on('data', read);
  connection.query(text);
}
