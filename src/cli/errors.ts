/**
 * Every failure of the `rill` command is reported in one format, with a code, a message
 * and, when the server answered, its HTTP status:
 *
 *   rill: STREAM_NOT_FOUND: stream not found: /demo/x (HTTP 404)
 *
 * or, with --json, one JSON line on stderr: {"error":{"code","message","status"}} (plus
 * "operation", the index of the operation a refused group transaction names).
 * Exit codes: 1 when the server refused or could not be reached, 2 for a mistake of the
 * user: `USAGE` (how the command was called) or `CONFIG` (a flag, file or directory it
 * names is wrong: a port in use, a missing secret file, a data directory in use).
 */
import { InvalidArgumentError } from 'commander';
import { RillError } from '../client/index.js';

export interface CliFailure {
  code: string;
  message: string;
  /** The server's HTTP status; absent when no server answered. */
  status?: number;
  /** A group transaction's refusal: the index of the operation refused. */
  operation?: number;
}

/** A mistake in how the command was called: no request was sent. */
export class UsageError extends Error {}

/**
 * A mistake in what the command was pointed at: a flag names a file, directory or port
 * that cannot serve as asked. Its message names the flag and says what to do.
 */
export class ConfigMistake extends Error {}

export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

export function failureOf(error: unknown): CliFailure {
  if (error instanceof RillError) {
    return {
      code: error.code,
      message: error.message,
      ...(error.status === undefined ? {} : { status: error.status }),
      ...(error.operation === undefined ? {} : { operation: error.operation }),
    };
  }
  if (error instanceof UsageError || error instanceof InvalidArgumentError) return { code: 'USAGE', message: error.message };
  if (error instanceof ConfigMistake) return { code: 'CONFIG', message: error.message };
  return { code: 'INTERNAL', message: error instanceof Error ? error.message : String(error) };
}

/** Prints the failure in the chosen format and returns the exit code it calls for. */
export function reportFailure(error: unknown, json: boolean): number {
  const failure = failureOf(error);
  if (json) process.stderr.write(`${JSON.stringify({ error: failure })}\n`);
  else process.stderr.write(`rill: ${failure.code}: ${failure.message}${failure.status === undefined ? '' : ` (HTTP ${failure.status})`}\n`);
  return failure.code === 'USAGE' || failure.code === 'CONFIG' ? EXIT_USAGE : EXIT_FAILED;
}
