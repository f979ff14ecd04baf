/**
 * Typed client errors. Every refusal from the server becomes a `RillError` carrying the
 * server's stable code and the facts its headers carried (`fields`); the few answers a
 * program must handle differently get their own class. Programs match on classes and
 * codes, never on message text.
 */
import { errorFieldsFromHeaders } from '../protocol/error-headers.js';
import { isErrorCode, type ErrorCode, type ErrorFields } from '../protocol/errors.js';
import { encodeOffset } from '../protocol/offset.js';

/** Codes for failures the client detects itself; the server never sends these. */
export const CLIENT_ERROR_CODES = [
  /** The request could not be sent or its answer was lost (reset, refused, DNS). */
  'NETWORK_ERROR',
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
] as const;

export type ClientErrorCode = (typeof CLIENT_ERROR_CODES)[number];
export type RillErrorCode = ErrorCode | ClientErrorCode;

export interface RillErrorInit {
  code: RillErrorCode;
  message: string;
  status?: number;
  fields?: ErrorFields;
  cause?: unknown;
}

export class RillError extends Error {
  readonly code: RillErrorCode;
  /** HTTP status of the answer; undefined when there was no answer. */
  readonly status: number | undefined;
  /** Facts the answer's headers carried (expected seq, last seq, epoch, outcome...). */
  readonly fields: ErrorFields;

  constructor(init: RillErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.code = init.code;
    this.status = init.status;
    this.fields = init.fields ?? {};
  }

  /**
   * True when the request may or may not have been applied: no answer (network error,
   * timeout) or a 5xx. Such a write is safe to send again only unchanged, with producer
   * headers.
   */
  get outcomeUnknown(): boolean {
    return this.code === 'NETWORK_ERROR' || this.code === 'TIMEOUT' || (this.status !== undefined && this.status >= 500);
  }

  /** True when sending the same request again later may succeed. */
  get retryable(): boolean {
    return this.outcomeUnknown || this.status === 429 || this.code === 'TOO_MANY_CONNECTIONS';
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
    const n = this.fields.nextOffset;
    return n === undefined ? undefined : encodeOffset(n);
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

/** 404: the stream (or bucket) does not exist. */
export class NotFoundError extends RillError {}

function classFor(code: RillErrorCode, status: number | undefined): typeof RillError {
  if (status === 412 || code === 'INCARNATION_MISMATCH') return StreamReplacedError;
  if (status === 410) return GoneError;
  if (status === 403) return FencedError;
  if (code === 'STREAM_SEQ_CONFLICT') return StreamSeqConflictError;
  if (code === 'STREAM_CLOSED') return StreamClosedError;
  if (status === 404) return NotFoundError;
  return RillError;
}

export function makeError(init: RillErrorInit): RillError {
  const Kind = classFor(init.code, init.status);
  return new Kind(init);
}

const FALLBACK_CODE_BY_STATUS: Record<number, ErrorCode> = {
  400: 'BAD_REQUEST',
  403: 'PRODUCER_FENCED',
  404: 'STREAM_NOT_FOUND',
  409: 'STREAM_CONFIG_CONFLICT',
  410: 'STREAM_GONE',
  412: 'INCARNATION_MISMATCH',
  413: 'PAYLOAD_TOO_LARGE',
  416: 'OFFSET_BEYOND_TAIL',
  429: 'PRODUCER_LIMIT',
  503: 'UNAVAILABLE',
};

/** Reads a refusal's JSON body and headers into a typed error. Consumes the body. */
export async function errorFromResponse(res: Response): Promise<RillError> {
  let code: RillErrorCode | undefined;
  let message = `HTTP ${res.status}`;
  try {
    const body = (await res.json()) as { code?: unknown; message?: unknown };
    if (isErrorCode(body.code)) code = body.code;
    if (typeof body.message === 'string') message = body.message;
  } catch {
    // A body that is not our JSON (a proxy's page, an empty 404 on HEAD): keep the status.
  }
  code ??= FALLBACK_CODE_BY_STATUS[res.status] ?? (res.status >= 500 ? 'INTERNAL' : 'UNEXPECTED_RESPONSE');
  // Answers to HEAD have no body: the status (and the headers) are all there is.
  if (message === `HTTP ${res.status}`) message = `${code.toLowerCase().replace(/_/g, ' ')} (HTTP ${res.status})`;
  const fields = errorFieldsFromHeaders((name) => res.headers.get(name));
  return makeError({ code, message, status: res.status, fields });
}

export function isRillError(error: unknown): error is RillError {
  return error instanceof RillError;
}
