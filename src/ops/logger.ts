/**
 * The server's logger: JSON lines through pino, or pino-pretty's readable lines when
 * stdout is a terminal. Secrets are redacted by pino before a line is written, whatever
 * a caller passes: Authorization and Cookie headers, and any field named `token`.
 *
 * JSON lines are written asynchronously: a line is queued and written with the others
 * queued meanwhile, rather than by a write(2) of its own, which cost each request of a
 * busy server its own system call (the access log is on by default). pino writes what is
 * queued before the process exits, a fatal exit included; a SIGKILL loses the lines of
 * its last moments, as it loses everything else in flight.
 */
import { writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { hostname } from 'node:os';
import { pino, type DestinationStream, type Logger } from 'pino';
import type PinoPretty from 'pino-pretty';

/** pino-pretty is loaded only for a terminal: commands that never log should not pay for it. */
const loadPretty = (): typeof PinoPretty => createRequire(import.meta.url)('pino-pretty') as typeof PinoPretty;

import type { LogLevel } from './log-levels.js';

export { LOG_LEVELS, type LogLevel } from './log-levels.js';

export const REDACTED = '[redacted]';

const REDACT_PATHS = [
  'authorization',
  'token',
  'headers.authorization',
  'headers.cookie',
  'req.headers.authorization',
  'req.headers.cookie',
  '*.authorization',
  '*.token',
];

export interface LoggerOptions {
  level: LogLevel;
  /** Human-readable lines instead of JSON; defaults to whether stdout is a terminal. */
  pretty?: boolean;
  /** Where lines go (tests); stdout when absent. */
  destination?: DestinationStream;
}

export function createLogger(options: LoggerOptions): Logger {
  const config = { level: options.level, redact: { paths: REDACT_PATHS, censor: REDACTED } };
  const readable = options.destination === undefined && (options.pretty ?? process.stdout.isTTY === true);
  if (readable) return pino(config, loadPretty()({ colorize: true, sync: true, translateTime: 'SYS:HH:MM:ss.l' }));
  const lines = options.destination ? { destination: options.destination, writeLine: (line: string) => void options.destination!.write(line) } : stdoutLines();
  const log = pino(config, lines.destination);
  lineDestinations.set(log, lines);
  return log;
}

/**
 * Standard output, written asynchronously, lines queued as buffers. pino's destination
 * queues text by appending each line to a string and measuring that whole string again
 * (`Buffer.byteLength`) at every line, a cost that grows with the lines waiting; in its
 * buffer mode a line is encoded once and queued as it is, and the queue is joined when
 * written. pino writes text, so each line is encoded here on its way in. Access lines are
 * held and handed over in batches (HeldLines); pino's own lines go at once, after them.
 */
function stdoutLines(): LineDestination {
  const destination = pino.destination({ dest: 1, sync: false, contentMode: 'buffer' });
  // In buffer mode SonicBoom.write takes buffers, though its type says text.
  const writeQueued = destination.write.bind(destination) as unknown as (data: Buffer) => boolean;
  // Bytes handed to the destination and not yet written, for flush below.
  let unwrittenBytes = 0;
  destination.on('write', (bytes: number) => (unwrittenBytes -= bytes));
  const writeBuffer = (data: Buffer) => {
    unwrittenBytes += data.length;
    return writeQueued(data);
  };
  const held = new HeldLines(writeBuffer, (text) => {
    destination.flushSync();
    writeSync(1, text);
  });
  destination.write = (line: string) => {
    held.release();
    return writeBuffer(Buffer.from(line));
  };
  // Answers once every line is written. SonicBoom's own flush answers at once when it
  // batches nothing itself, with a write still in flight; a process.exit then (after the
  // server's last line, cli/main.ts) left that write to land after the lines exit wrote.
  destination.flush = (cb?: (error?: Error) => unknown) => {
    held.release();
    if (unwrittenBytes === 0) return void cb?.();
    if (!cb) return;
    // A write that failed (standard output closed) never drains: answer then too.
    const done = () => {
      destination.off('drain', done);
      destination.off('error', done);
      cb();
    };
    destination.once('drain', done);
    destination.once('error', done);
  };
  heldAtExit.add(held);
  if (heldAtExit.size === 1) process.once('exit', () => heldAtExit.forEach((h) => h.releaseSync()));
  return { destination, writeLine: (line, ascii) => held.hold(line, ascii) };
}

/** Every logger's held lines, written at exit. */
const heldAtExit = new Set<HeldLines>();

/**
 * Held access lines are written once this many characters gather (about 300 lines)...
 * Each write to a pipe or socket wakes the process reading the log (journald, a container
 * runtime, a shell's pipe), and on a virtual machine the writer pays for that wake-up: at
 * 16 KiB a busy server's log cost it 6-19 µs more CPU per request behind a pipe, and 1-5
 * µs at 64 KiB, the size of a pipe's buffer (docs/performance.md, twenty-sixth session).
 */
const HELD_MAX_CHARS = 64 * 1024;
/** ...or this long after the first of them, whichever comes first. */
const HELD_MAX_DELAY_MS = 100;

/**
 * Access lines waiting to be written together. A line each handed to the destination cost
 * its own encoding and, on a server answering one request at a time, its own write(2) on
 * the thread pool; a batch costs one of each. Held lines are released before any other
 * line is written, so the log keeps its order, and at exit, synchronously.
 */
class HeldLines {
  private text = '';
  /** Whether every line held since the last release is ASCII: then the text is written as Latin-1. */
  private ascii = true;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly write: (data: Buffer) => unknown,
    private readonly writeAtExit: (text: string) => void,
  ) {}

  hold(line: string, ascii: boolean): void {
    this.text += line;
    this.ascii &&= ascii;
    if (this.text.length >= HELD_MAX_CHARS) this.release();
    else if (this.timer === null) {
      this.timer = setTimeout(() => {
        this.timer = null;
        this.release();
      }, HELD_MAX_DELAY_MS);
      this.timer.unref();
    }
  }

  release(): void {
    if (this.text === '') return;
    const text = this.text;
    this.text = '';
    // ASCII is the same bytes in both; Latin-1 copies them, UTF-8 checks each (about
    // 0.1 µs a line in a micro-benchmark).
    this.write(Buffer.from(text, this.ascii ? 'latin1' : 'utf8'));
    this.ascii = true;
  }

  /** At exit nothing asynchronous runs any more: what is held is written now, after what the destination holds. */
  releaseSync(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    const text = this.text;
    this.text = '';
    if (text === '') return;
    try {
      this.writeAtExit(text);
    } catch {
      // Standard output closed: there is nowhere left to write.
    }
  }
}

/** A logger's JSON destination, and how a line made without pino reaches it. */
interface LineDestination {
  destination: DestinationStream;
  /** `ascii`: the line holds only ASCII characters (InfoLines.write). */
  writeLine: (line: string, ascii: boolean) => void;
}

/** The JSON destination of each logger createLogger made (not its children, nor a readable one). */
const lineDestinations = new WeakMap<Logger, LineDestination>();

/** What pino writes after `time` for a logger without bindings of its own: its base fields. */
const BASE_MEMBERS = `,"pid":${process.pid},"hostname":${JSON.stringify(hostname())}`;

/**
 * How `info` lines with message `msg`, whose members the caller made as JSON text, reach a
 * logger createLogger made with JSON output. Such a line is the one pino would write
 * (`level`, `time`, its base fields, the members, `msg`), to the same destination and in
 * order with pino's own lines, without pino's per-field serialization and redaction: for
 * lines of fields the caller made itself and escaped, such as the access log's
 * (docs/performance.md).
 */
export interface InfoLines {
  /** A line's text before its members, `{"level":30,"time":…,"pid":…,"hostname":…,`: the same string all through a millisecond. */
  start(): string;
  /** A line's text after its members: `,"msg":…}` and the newline. */
  readonly end: string;
  /** Whether start() and end hold only ASCII characters. */
  readonly ascii: boolean;
  /** Queues a whole line (start(), members, end); `ascii` says it holds only ASCII characters. */
  write(line: string, ascii: boolean): void;
}

/** The InfoLines of a logger createLogger made with JSON output; null for any other (then log through pino). */
export function infoLines(log: Logger, msg: string): InfoLines | null {
  const lines = lineDestinations.get(log);
  if (lines === undefined || !log.isLevelEnabled('info')) return null;
  const end = `,"msg":${JSON.stringify(msg)}}\n`;
  // A busy server writes several lines a millisecond: the time's text is made once for them.
  let timeMs = 0;
  let start = '';
  return {
    start() {
      const now = Date.now();
      if (now !== timeMs) {
        timeMs = now;
        start = `{"level":30,"time":${now}${BASE_MEMBERS},`;
      }
      return start;
    },
    end,
    ascii: isAscii(BASE_MEMBERS) && isAscii(end),
    write: lines.writeLine,
  };
}

/** Whether every character of `text` is ASCII, so that its Latin-1 and UTF-8 bytes are the same. */
export function isAscii(text: string): boolean {
  return /^[\x00-\x7f]*$/.test(text);
}

const SECRET_PARAMS = new Set(['token', 'access_token']);

/**
 * The URL with the value of every `token` query parameter replaced, for logging a request's
 * URL. Names are judged decoded, as the server reads them: `%74oken=` is `token=` too.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const parts = url.slice(q + 1).split('&').map((part) => {
    const eq = part.indexOf('=');
    const name = eq < 0 ? part : part.slice(0, eq);
    return eq >= 0 && SECRET_PARAMS.has(decodedName(name).toLowerCase()) ? `${name}=${REDACTED}` : part;
  });
  return `${url.slice(0, q + 1)}${parts.join('&')}`;
}

function decodedName(name: string): string {
  try {
    return decodeURIComponent(name.replace(/\+/g, ' '));
  } catch {
    return name;
  }
}
