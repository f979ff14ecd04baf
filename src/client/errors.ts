/**
 * Typed client errors. Every refusal from the server becomes a `RillError` carrying the
 * server's stable code and the facts its headers carried (`fields`); the few answers a
 * program must handle differently get their own class. Programs match on classes and
 * codes, never on message text.
 */
import { errorFieldsFromHeaders } from '../protocol/error-headers.js';
import { isErrorCode, type ErrorCode, type ErrorFields } from '../protocol/errors.js';
import { encodeOffset } from '../protocol/offset.js';

/**
 * The facts an error carries, as the client API gives them: offsets in the 20-digit
 * string form every other part of the API uses (`nextOffset: '00000000000000000066'`).
 */
export type RillErrorFields = Omit<ErrorFields, 'nextOffset'> & {
  /** Stream-Next-Offset: the tail, or the earliest readable offset on a 410. */
  nextOffset?: string;
  /** ALREADY_CLAIMED: the worker that holds the subscription's wake (from the body). */
  currentHolder?: string;
  /** ALREADY_CLAIMED: the subscription's current wake generation (from the body). */
  generation?: number;
  /** A group transaction's refusal: the index of the operation refused (from the body). */
  operation?: number;
};

/** Error fields parsed from headers, with the offset in its string form. */
export function clientFields(fields: ErrorFields): RillErrorFields {
  const { nextOffset, ...rest } = fields;
  return nextOffset === undefined ? rest : { ...rest, nextOffset: encodeOffset(nextOffset) };
}

/** Codes for failures the client detects itself; the server never sends these. */
export const CLIENT_ERROR_CODES = [
  /** The request was sent, or may have been, and its answer was lost (reset, closed). */
  'NETWORK_ERROR',
  /** No connection was made (refused, unknown host, unreachable): the request never left. */
  'CONNECTION_FAILED',
  /** No answer within the request timeout. */
  'TIMEOUT',
  /** The caller's AbortSignal fired. */
  'ABORTED',
  /** The server answered something the protocol does not allow. */
  'UNEXPECTED_RESPONSE',
  /** The producer stopped earlier (fenced, failed or closed) and takes no more writes. */
  'PRODUCER_STOPPED',
  /** The producer's buffer limit was reached. */
  'BUFFER_FULL',
  /** A retry budget ran out; `cause` holds the last failure. */
  'RETRIES_EXHAUSTED',
  /** The server has no group transactions: its answer did not advertise `group-append-transaction-v1`. */
  'TRANSACTIONS_NOT_SUPPORTED',
] as const;

export type ClientErrorCode = (typeof CLIENT_ERROR_CODES)[number];
export type RillErrorCode = ErrorCode | ClientErrorCode;

export interface RillErrorInit {
  code: RillErrorCode;
  message: string;
  status?: number;
  fields?: RillErrorFields;
  cause?: unknown;
}

export class RillError extends Error {
  readonly code: RillErrorCode;
  /** HTTP status of the answer; undefined when there was no answer. */
  readonly status: number | undefined;
  /** Facts the answer's headers carried (expected seq, last seq, epoch, outcome...). */
  readonly fields: RillErrorFields;

  constructor(init: RillErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.code = init.code;
    this.status = init.status;
    this.fields = init.fields ?? {};
  }

  /**
   * True when the request may or may not have been applied: it may have reached the
   * server and no answer came (network error, timeout), or a 5xx. Such a write is safe
   * to send again only unchanged, with producer headers. A refused connection is not
   * unknown: nothing was sent.
   */
  get outcomeUnknown(): boolean {
    return this.code === 'NETWORK_ERROR' || this.code === 'TIMEOUT' || (this.status !== undefined && this.status >= 500);
  }

  /** A group transaction's refusal: the index of the operation it is about; undefined for the request as a whole. */
  get operation(): number | undefined {
    return this.fields.operation;
  }

  /** True when sending the same request again later may succeed (a restarting server, too). */
  get retryable(): boolean {
    return this.outcomeUnknown || this.code === 'CONNECTION_FAILED' || this.status === 429 || this.code === 'TOO_MANY_CONNECTIONS';
  }
}

/** 412: the stream you knew is gone; another stream now lives at its URL. */
export class StreamReplacedError extends RillError {
  /** The incarnation token of the stream that lives at the URL now. */
  get currentIncarnation(): string | undefined {
    return this.fields.incarnation;
  }
}

/** 410: the offset was trimmed by retention, or the stream was deleted. */
export class GoneError extends RillError {
  /** The earliest offset that can still be read, when the server said. */
  get earliestOffset(): string | undefined {
    return this.fields.nextOffset;
  }
}

/**
 * 403: a newer producer instance took over (stale or closed epoch), the producer's
 * key was reused with another body, or the stream forgot the producer. A fenced
 * producer must stop writing.
 */
export class FencedError extends RillError {
  get currentEpoch(): number | undefined {
    return this.fields.producerEpoch;
  }
  get outcome(): string | undefined {
    return this.fields.producerOutcome;
  }
}

/** 409 STREAM_SEQ_CONFLICT: the value was not greater than the stream's last Stream-Seq. */
export class StreamSeqConflictError extends RillError {
  /** The stream's last accepted Stream-Seq; always present on this error. */
  get lastSeq(): string {
    return this.fields.lastSeq ?? '';
  }
}

/** 409 STREAM_CLOSED: the stream takes no more appends. */
export class StreamClosedError extends RillError {}

/** 404: the stream (or bucket, or subscription) does not exist. */
export class NotFoundError extends RillError {}

/**
 * 409 FENCED: the wake this ack, callback or release names is no longer the
 * subscription's current one (a newer generation, or its lease expired). Nothing moved;
 * a worker drops the wake and goes on.
 */
export class WakeFencedError extends RillError {}

/** 409 ALREADY_CLAIMED: another worker holds the subscription's wake. */
export class AlreadyClaimedError extends RillError {
  get currentHolder(): string | undefined {
    return this.fields.currentHolder;
  }
  get generation(): number | undefined {
    return this.fields.generation;
  }
}

/**
 * The stream has no JSON record coordinates: the server said so (400, a stream that is
 * not `application/json`), or its answer did not advertise `json-record-coordinates-v1`,
 * so the client would not rely on record parameters or headers (no status, or the status
 * of the answer it refused to read).
 */
export class RecordsNotActiveError extends RillError {}

/** 412 RECORD_MATCH_FAILED: Stream-Record-Match did not name the record tail; nothing was appended. */
export class RecordMatchFailedError extends RillError {
  /** The stream's record tail N (Stream-Record-Next). */
  get recordNext(): number | undefined {
    return this.fields.recordNext;
  }
}

/** 410 RECORD_TRIMMED: the record is before the first retained one. */
export class RecordTrimmedError extends GoneError {
  /** The first retained record F (Stream-Record-First): where a read may start now. */
  get recordFirst(): number | undefined {
    return this.fields.recordFirst;
  }
}

/** 400 RECORD_BEYOND_TAIL: the record named is past the record tail (`fields.recordNext`). */
export class RecordBeyondTailError extends RillError {}

/**
 * 409 TRANSACTION_PARTLY_APPLIED: a retried group transaction found some of its producer
 * operations applied by an earlier attempt and others not; nothing was applied again.
 * `operation` is the first one not applied before.
 */
export class TransactionPartlyAppliedError extends RillError {}

/**
 * The server does not serve group transactions: it answered the transaction route with a
 * 404 or 405 that does not advertise `group-append-transaction-v1`. Nothing was applied.
 */
export class TransactionsNotSupportedError extends RillError {}

/** Codes whose class does not follow from the status alone. */
const CLASS_BY_CODE: Partial<Record<RillErrorCode, typeof RillError>> = {
  RECORD_MATCH_FAILED: RecordMatchFailedError,
  RECORD_TRIMMED: RecordTrimmedError,
  RECORD_BEYOND_TAIL: RecordBeyondTailError,
  RECORDS_NOT_ACTIVE: RecordsNotActiveError,
  STREAM_SEQ_CONFLICT: StreamSeqConflictError,
  STREAM_CLOSED: StreamClosedError,
  FENCED: WakeFencedError,
  ALREADY_CLAIMED: AlreadyClaimedError,
  TRANSACTION_PARTLY_APPLIED: TransactionPartlyAppliedError,
  TRANSACTIONS_NOT_SUPPORTED: TransactionsNotSupportedError,
};

function classFor(code: RillErrorCode, status: number | undefined): typeof RillError {
  const byCode = CLASS_BY_CODE[code];
  if (byCode !== undefined) return byCode;
  if (status === 412 || code === 'INCARNATION_MISMATCH') return StreamReplacedError;
  if (status === 410) return GoneError;
  // A 403 of access control is no fencing: only the producer codes are.
  if (status === 403 && code.startsWith('PRODUCER_')) return FencedError;
  if (status === 404) return NotFoundError;
  return RillError;
}

export function makeError(init: RillErrorInit): RillError {
  const Kind = classFor(init.code, init.status);
  return new Kind(init);
}

const FALLBACK_CODE_BY_STATUS: Record<number, ErrorCode> = {
  400: 'BAD_REQUEST',
  // A HEAD's refusal has no body; a producer's 403 always has one, naming its code.
  401: 'UNAUTHORIZED',
  403: 'FORBIDDEN',
  404: 'STREAM_NOT_FOUND',
  409: 'STREAM_CONFIG_CONFLICT',
  410: 'STREAM_GONE',
  412: 'INCARNATION_MISMATCH',
  413: 'PAYLOAD_TOO_LARGE',
  416: 'OFFSET_BEYOND_TAIL',
  429: 'PRODUCER_LIMIT',
  503: 'UNAVAILABLE',
  507: 'INSUFFICIENT_STORAGE',
};

/**
 * The codes of the Durable Streams protocol's nested error object (`{"error": {"code"}}`,
 * what the subscription routes of other servers answer) that rill names otherwise.
 */
function protocolAlias(nested: string, status: number): ErrorCode | undefined {
  if (nested === 'INVALID_REQUEST') return 'BAD_REQUEST';
  if (nested === 'INVALID_OFFSET' && status === 409) return 'INVALID_ACK_OFFSET';
  return isErrorCode(nested) ? nested : undefined;
}

interface ErrorJson {
  code?: unknown;
  message?: unknown;
  operation?: unknown;
  error?: { code?: unknown; message?: unknown; current_holder?: unknown; generation?: unknown };
}

/** Code, message and body facts of a refusal's JSON: rill's `{code, message}` first, else the nested `error`. */
function parseErrorJson(body: ErrorJson, status: number): { code?: ErrorCode; message?: string; fields: RillErrorFields } {
  const nested = typeof body.error === 'object' && body.error !== null ? body.error : {};
  const code = isErrorCode(body.code) ? body.code : typeof nested.code === 'string' ? protocolAlias(nested.code, status) : undefined;
  const message = typeof body.message === 'string' ? body.message : typeof nested.message === 'string' ? nested.message : undefined;
  const fields: RillErrorFields = {};
  if (typeof nested.current_holder === 'string') fields.currentHolder = nested.current_holder;
  if (typeof nested.generation === 'number') fields.generation = nested.generation;
  if (typeof body.operation === 'number' && Number.isSafeInteger(body.operation) && body.operation >= 0) fields.operation = body.operation;
  return { ...(code === undefined ? {} : { code }), ...(message === undefined ? {} : { message }), fields };
}

/**
 * Reads a refusal's JSON body and headers into a typed error. Consumes the body. With
 * `url` (or the answer's own URL), a 404 names what was not found.
 */
export async function errorFromResponse(res: Response, url: string = res.url): Promise<RillError> {
  let code: RillErrorCode | undefined;
  let message = `HTTP ${res.status}`;
  let bodyFields: RillErrorFields = {};
  try {
    const parsed = parseErrorJson((await res.json()) as ErrorJson, res.status);
    code = parsed.code;
    message = parsed.message ?? message;
    bodyFields = parsed.fields;
  } catch {
    // A body that is not our JSON (a proxy's page, an empty 404 on HEAD): keep the status.
  }
  // Answers to HEAD have no body: the status and the headers are all there is. A refused
  // token's reason and code are in its challenge (RFC 6750's error_description, and rill's
  // `code` parameter): an expired token is TOKEN_EXPIRED on HEAD too.
  const challenge = res.status === 401 ? res.headers.get('www-authenticate') : null;
  code ??= challengeCode(challenge) ?? FALLBACK_CODE_BY_STATUS[res.status] ?? (res.status >= 500 ? 'INTERNAL' : 'UNEXPECTED_RESPONSE');
  if (message === `HTTP ${res.status}`) message = challengeDescription(challenge) ?? code.toLowerCase().replace(/_/g, ' ');
  // A 404 names what was not found, and a refusal of a closed stream which stream it is.
  if ((res.status === 404 || code === 'STREAM_CLOSED') && url) message = `${message}: ${pathOf(url)}`;
  const fields = { ...clientFields(errorFieldsFromHeaders((name) => res.headers.get(name))), ...bodyFields };
  return makeError({ code, message, status: res.status, fields });
}

/** The 401 codes a Bearer challenge's `code` parameter may name. */
const CHALLENGE_CODES: readonly ErrorCode[] = ['UNAUTHORIZED', 'TOKEN_EXPIRED', 'TOKEN_INVALID'];

function challengeCode(challenge: string | null): ErrorCode | undefined {
  const named = challenge === null ? undefined : /[ ,]code="([A-Z_]+)"/.exec(challenge)?.[1];
  return CHALLENGE_CODES.find((c) => c === named);
}

/** The error_description of a Bearer challenge, if it has one. */
function challengeDescription(challenge: string | null): string | undefined {
  return challenge === null ? undefined : /error_description="([^"]*)"/.exec(challenge)?.[1];
}

/** The path of a URL without its query, the way streams are named (`/bucket/stream`). */
function pathOf(url: string): string {
  try {
    return decodeURIComponent(new URL(url).pathname);
  } catch {
    return url;
  }
}

export function isRillError(error: unknown): error is RillError {
  return error instanceof RillError;
}
