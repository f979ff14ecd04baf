/**
 * Facts read from an answer's headers that several parts of the client share: unsigned
 * integers, and JSON record coordinates. Record headers are read only from an answer that
 * advertises `json-record-coordinates-v1` (the extension says a client must verify the
 * token before relying on them); `requireRecords` refuses an answer that should have.
 */
import { extensionTokens, JSON_RECORDS_TOKEN } from '../protocol/extensions.js';
import { H } from '../protocol/headers.js';
import { RecordsNotActiveError, RillError } from './errors.js';

/** Ordinals of the records an operation created: `[start, next)`; start = next when it created none. */
export interface RecordRange {
  start: number;
  next: number;
}

/** An unsigned integer header (at most 16 digits), or undefined when absent or malformed. */
export function optionalUint(headers: Headers, name: string): number | undefined {
  const raw = headers.get(name);
  if (raw === null || !/^\d{1,16}$/.test(raw.trim())) return undefined;
  return Number(raw);
}

/** The extension tokens an answer lists in Stream-Extensions. */
export function extensionsOf(headers: Headers): string[] {
  return extensionTokens(headers.get(H.streamExtensions));
}

/** Whether the answer advertises JSON record coordinates for its stream. */
export function hasRecordsToken(headers: Headers): boolean {
  return extensionsOf(headers).includes(JSON_RECORDS_TOKEN);
}

/**
 * Refuses an answer that does not advertise JSON record coordinates, before anything in it
 * is read as a record. `what` says what was asked (`a record read of <url>`).
 */
export function requireRecords(headers: Headers, what: string, status?: number): void {
  if (hasRecordsToken(headers)) return;
  const listed = headers.get(H.streamExtensions);
  const message = `${what}: the answer does not advertise ${JSON_RECORDS_TOKEN} (Stream-Extensions: ${listed ?? 'none'}), so the stream has no record coordinates; only application/json streams on a server with the extension have them`;
  throw new RecordsNotActiveError({ code: 'RECORDS_NOT_ACTIVE', message, ...(status === undefined ? {} : { status }) });
}

/** A record header an answer must carry, as an unsigned integer. */
export function requiredUint(headers: Headers, name: string, status: number): number {
  const value = optionalUint(headers, name);
  if (value === undefined) throw new RillError({ code: 'UNEXPECTED_RESPONSE', message: `a record-aware answer without a valid ${name}`, status });
  return value;
}

/** Stream-Record-Start and -Next of a create or append answer, when it advertises record coordinates. */
export function recordRangeOf(headers: Headers): RecordRange | undefined {
  if (!hasRecordsToken(headers)) return undefined;
  const start = optionalUint(headers, H.streamRecordStart);
  const next = optionalUint(headers, H.streamRecordNext);
  return start === undefined || next === undefined ? undefined : { start, next };
}

/** Stream-Record-First and -Next (F and N), when the answer advertises record coordinates. */
export function recordTailOf(headers: Headers): { recordFirst: number | undefined; recordNext: number | undefined } {
  if (!hasRecordsToken(headers)) return { recordFirst: undefined, recordNext: undefined };
  return { recordFirst: optionalUint(headers, H.streamRecordFirst), recordNext: optionalUint(headers, H.streamRecordNext) };
}
