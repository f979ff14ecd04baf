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
  const destination = options.destination ?? stdoutLines();
  const log = pino(config, destination);
  lineDestinations.set(log, destination);
  return log;
}

/**
 * Standard output, written asynchronously, lines queued as buffers. pino's destination
 * queues text by appending each line to a string and measuring that whole string again
 * (`Buffer.byteLength`) at every line, a cost that grows with the lines waiting; in its
 * buffer mode a line is encoded once and queued as it is, and the queue is joined when
 * written. pino writes text, so each line is encoded here on its way in.
 */
function stdoutLines(): DestinationStream {
  const destination = pino.destination({ dest: 1, sync: false, contentMode: 'buffer' });
  // In buffer mode SonicBoom.write takes buffers, though its type says text.
  const writeBuffer = destination.write.bind(destination) as unknown as (data: Buffer) => boolean;
  destination.write = (line: string) => writeBuffer(Buffer.from(line));
  return destination;
}

/** The JSON destination of each logger createLogger made (not its children, nor a readable one). */
const lineDestinations = new WeakMap<Logger, DestinationStream>();

/** What pino writes after `time` for a logger without bindings of its own: its base fields. */
const BASE_MEMBERS = `,"pid":${process.pid},"hostname":${JSON.stringify(hostname())}`;

/**
 * A writer of `info` lines whose members the caller has already made as JSON text, for a
 * logger createLogger made with JSON output; null for any other (then log through pino).
 * The line is the one pino would write (`level`, `time`, its base fields, the members,
 * `msg`) to the same destination, queued with pino's own lines, without pino's per-field
 * serialization and redaction: for lines made of fields the caller made itself and
 * escaped, such as the access log's (7 of the 17 thousand instructions a logged request
 * cost, docs/performance.md).
 */
export function infoLineWriter(log: Logger): ((members: string, msg: string) => void) | null {
  const destination = lineDestinations.get(log);
  if (destination === undefined || !log.isLevelEnabled('info')) return null;
  return (members, msg) => {
    destination.write(`{"level":30,"time":${Date.now()}${BASE_MEMBERS},${members},"msg":${JSON.stringify(msg)}}\n`);
  };
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
