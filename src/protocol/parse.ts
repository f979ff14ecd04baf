/**
 * Syntax of the protocol's header values. Each parser answers a value or a typed
 * error; none of them knows about streams or storage.
 */
import { protocolError, type ProtocolError } from './errors.js';
import { MAX_SAFE_PRODUCER_NUMBER, MAX_STREAM_SEQ_BYTES, SINGLE_VALUED_REQUEST_HEADERS } from './headers.js';

export type Parsed<T> = { ok: true; value: T } | { ok: false; error: ProtocolError };

const ok = <T>(value: T): Parsed<T> => ({ ok: true, value });
const fail = <T>(error: ProtocolError): Parsed<T> => ({ ok: false, error });

/**
 * A non-negative decimal integer without sign, leading zeros or exponent (`0` or
 * `[1-9][0-9]*`, at most 16 digits). Read digit by digit: Producer-Epoch and
 * Producer-Seq pass here on every producer append, and the regular expression it replaced
 * cost more than the rest of the parse.
 */
export function parseCanonicalUint(raw: string, max: number): number | undefined {
  const length = raw.length;
  if (length === 0 || length > 16 || (length > 1 && raw.charCodeAt(0) === 0x30)) return undefined;
  let value = 0;
  for (let i = 0; i < length; i++) {
    const digit = raw.charCodeAt(i) - 0x30;
    if (digit < 0 || digit > 9) return undefined;
    value = value * 10 + digit;
  }
  return Number.isSafeInteger(value) && value <= max ? value : undefined;
}

/** A listing's `limit` query parameter: `defaultLimit` when absent, else an integer from 1 to `maxLimit`. */
export function parsePageLimit(raw: string | undefined, defaultLimit: number, maxLimit: number): Parsed<number> {
  if (raw === undefined) return ok(defaultLimit);
  const limit = parseCanonicalUint(raw, maxLimit);
  return limit === undefined || limit < 1 ? fail(protocolError('INVALID_QUERY', `limit must be an integer from 1 to ${maxLimit}`)) : ok(limit);
}

/**
 * The refusal of a request whose raw header list (name, value, name, value, ...) gives a
 * single-valued protocol header more than once, or null. `distinctNames`, when given, is
 * how many distinct names (lowercased) the list holds, as Node's `req.headers` has them:
 * when it is half the list's length no name is repeated, which answers without
 * lowercasing every name again (that, and the set of names seen, were about 2,500
 * instructions of a producer append under callgrind).
 */
export function repeatedHeaderError(rawHeaders: readonly string[], distinctNames?: number): ProtocolError | null {
  // As many distinct names as raw ones: nothing is repeated, and no name need be lowercased.
  if (distinctNames !== undefined && distinctNames * 2 === rawHeaders.length) return null;
  let seen: Set<string> | null = null;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    if (!SINGLE_VALUED_REQUEST_HEADERS.has(name)) continue;
    if (seen?.has(name)) return protocolError('INVALID_HEADER', `the ${name} header is given more than once`);
    (seen ??= new Set()).add(name);
  }
  return null;
}

/** Longest TTL accepted: 100 years, far beyond any real use, small enough to add safely. */
export const MAX_TTL_SECONDS = 100 * 365 * 24 * 3600;

export function parseTtl(raw: string): Parsed<number> {
  const value = parseCanonicalUint(raw, MAX_TTL_SECONDS);
  return value === undefined
    ? fail(protocolError('INVALID_TTL', 'Stream-TTL must be a non-negative integer number of seconds without sign or leading zeros'))
    : ok(value);
}

// RFC 3339 date-time: full date, 'T', time with optional fraction, and Z or an offset.
const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

export function parseExpiresAt(raw: string): Parsed<number> {
  const match = RFC3339.exec(raw);
  const ms = match ? Date.parse(raw.toUpperCase()) : NaN;
  if (!match || Number.isNaN(ms)) {
    return fail(protocolError('INVALID_EXPIRES_AT', 'Stream-Expires-At must be an RFC 3339 timestamp'));
  }
  return ok(ms);
}

/** `Stream-Closed: true` closes; `false` or absence does not; anything else is refused. */
export function parseClosedFlag(raw: string | undefined): Parsed<boolean> {
  if (raw === undefined) return ok(false);
  const value = raw.trim().toLowerCase();
  if (value === 'true') return ok(true);
  if (value === 'false') return ok(false);
  return fail(protocolError('INVALID_HEADER', 'Stream-Closed must be "true" or "false"'));
}

export interface ProducerHeaders {
  id: string;
  epoch: number;
  seq: number;
  /** BLAKE3-256 of the body, lowercase hex, when the client sent one. */
  digest?: string;
}

/**
 * Producer ids are at most this many bytes. Clients derive them from stream names (the
 * Yjs provider sends `{docId}-{clientID}`, 256 + 11 characters), so they may be as long
 * as the longest `/v1/stream` name (issue 36; it was 256).
 */
export const MAX_PRODUCER_ID_BYTES = 1024;
const DIGEST = /^[0-9a-f]{64}$/;

function producerError(message: string): ProtocolError {
  return protocolError('INVALID_PRODUCER_HEADERS', message);
}

/**
 * Producer-Id, -Epoch and -Seq come together or not at all; Producer-Digest only with
 * them. Answers `undefined` when none is present.
 */
export function parseProducerHeaders(
  id: string | undefined,
  epoch: string | undefined,
  seq: string | undefined,
  digest: string | undefined,
): Parsed<ProducerHeaders | undefined> {
  const present = (id === undefined ? 0 : 1) + (epoch === undefined ? 0 : 1) + (seq === undefined ? 0 : 1);
  if (present === 0) {
    return digest === undefined ? ok(undefined) : fail(producerError('Producer-Digest needs Producer-Id, Producer-Epoch and Producer-Seq'));
  }
  if (present !== 3) return fail(producerError('Producer-Id, Producer-Epoch and Producer-Seq must be sent together'));
  if (id!.length === 0) return fail(producerError('Producer-Id must not be empty'));
  // A UTF-16 unit is at most 3 bytes of UTF-8: a short id needs no count.
  if (id!.length * 3 > MAX_PRODUCER_ID_BYTES && Buffer.byteLength(id!) > MAX_PRODUCER_ID_BYTES) return fail(producerError(`Producer-Id is longer than ${MAX_PRODUCER_ID_BYTES} bytes`));
  const epochValue = parseCanonicalUint(epoch!, MAX_SAFE_PRODUCER_NUMBER);
  if (epochValue === undefined) return fail(producerError('Producer-Epoch must be an integer from 0 to 2^53-1'));
  const seqValue = parseCanonicalUint(seq!, MAX_SAFE_PRODUCER_NUMBER);
  if (seqValue === undefined) return fail(producerError('Producer-Seq must be an integer from 0 to 2^53-1'));
  if (digest !== undefined && !DIGEST.test(digest)) {
    return fail(producerError('Producer-Digest must be 64 lowercase hex digits (BLAKE3-256)'));
  }
  const value: ProducerHeaders = { id: id!, epoch: epochValue, seq: seqValue };
  if (digest !== undefined) value.digest = digest;
  return ok(value);
}

function isPrintableAscii(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code < 0x20 || code > 0x7e) return false;
  }
  return true;
}

/**
 * Stream-Seq: printable ASCII only; a value with any other byte is ignored (not
 * checked, not stored). At most 256 bytes.
 */
export function parseStreamSeq(raw: string | undefined): Parsed<string | undefined> {
  if (raw === undefined || !isPrintableAscii(raw)) return ok(undefined);
  if (raw.length > MAX_STREAM_SEQ_BYTES) {
    return fail(protocolError('STREAM_SEQ_TOO_LONG', `Stream-Seq is longer than ${MAX_STREAM_SEQ_BYTES} bytes`));
  }
  return ok(raw);
}

/** Stream-Record-Match: an unsigned integer, the record tail the writer expects. */
export function parseRecordMatch(raw: string | undefined): Parsed<number | null> {
  if (raw === undefined) return ok(null);
  const value = parseCanonicalUint(raw.trim(), Number.MAX_SAFE_INTEGER);
  if (value === undefined) return fail(protocolError('INVALID_HEADER', 'Stream-Record-Match must be an unsigned integer without sign or leading zeros'));
  return ok(value);
}
