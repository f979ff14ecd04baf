/**
 * The server's logger: JSON lines through pino, or pino-pretty's readable lines when
 * stdout is a terminal. Secrets are redacted by pino before a line is written, whatever
 * a caller passes: Authorization and Cookie headers, and any field named `token`.
 */
import { createRequire } from 'node:module';
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
  if (options.destination) return pino(config, options.destination);
  const readable = options.pretty ?? process.stdout.isTTY === true;
  return readable ? pino(config, loadPretty()({ colorize: true, sync: true, translateTime: 'SYS:HH:MM:ss.l' })) : pino(config);
}

/** The URL with the value of every `token` query parameter replaced, for logging a request's URL. */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  return url.slice(0, q + 1) + url.slice(q + 1).replace(/(^|&)(token|access_token)=[^&]*/gi, `$1$2=${REDACTED}`);
}
