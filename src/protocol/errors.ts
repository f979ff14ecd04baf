/**
 * Error vocabulary shared by server and client.
 *
 * Every refusal rill sends has a stable SCREAMING_SNAKE code. The code, never the
 * message text, is what programs match on. `ERROR_STATUS` is the one table that maps a
 * code to its HTTP status; nothing else in the code base decides a status for an error.
 */

export const ERROR_STATUS = {
  // 400: the request itself is malformed.
  BAD_REQUEST: 400,
  INVALID_OFFSET: 400,
  INVALID_HEADER: 400,
  INVALID_QUERY: 400,
  INVALID_ID: 400,
  INVALID_JSON: 400,
  INVALID_BUCKET_SETTINGS: 400,
  INVALID_RETENTION_POLICY: 400,
  EMPTY_BODY: 400,
  EMPTY_JSON_ARRAY: 400,
  MISSING_CONTENT_TYPE: 400,
  INVALID_CONTENT_TYPE: 400,
  INVALID_TTL: 400,
  INVALID_EXPIRES_AT: 400,
  TTL_AND_EXPIRES_AT: 400,
  INVALID_PRODUCER_HEADERS: 400,
  PRODUCER_HEADERS_ON_CREATE: 400,
  PRODUCER_SEQ_NOT_ZERO: 400,
  DIGEST_MISMATCH: 400,
  STREAM_SEQ_TOO_LONG: 400,
  INVALID_FORK: 400,
  LIVE_NOT_ALLOWED: 400,
  SSE_NOT_SUPPORTED: 400,
  MISALIGNED_OFFSET: 400,
  INVALID_BATCH: 400,
  INVALID_ATTRS: 400,
  BATCH_HEADERS_NOT_ALLOWED: 400,
  // 400: record coordinates asked of a stream that has none (not application/json), and
  // a record-aware read that starts beyond the record tail.
  RECORDS_NOT_ACTIVE: 400,
  RECORD_BEYOND_TAIL: 400,
  // 400: a group transaction's body or one of its operations is malformed.
  INVALID_TRANSACTION: 400,
  // 400: a webhook URL refused (scheme, or a loopback, private or link-local host).
  WEBHOOK_URL_REJECTED: 400,
  // 401: no valid token (WWW-Authenticate: Bearer goes with every 401).
  UNAUTHORIZED: 401,
  TOKEN_EXPIRED: 401,
  // 401: a token without exp, or living longer than --auth-max-ttl; one an admin revoked.
  TOKEN_LIFETIME_TOO_LONG: 401,
  TOKEN_REVOKED: 401,
  // 401: a token that verifies but lacks what --auth-profile strict asks (typ at+jwt, sub, iat, exp, jti).
  TOKEN_PROFILE: 401,
  // 401: a subscription's wake token (callback, ack, release) that is not one rill signed.
  TOKEN_INVALID: 401,
  // 403: the token may see the target but lacks the permission; a Host not allowed; an
  // unsafe request from a page of an origin not allowed (a cross-site write).
  FORBIDDEN: 403,
  HOST_NOT_ALLOWED: 403,
  ORIGIN_NOT_ALLOWED: 403,
  // 403: the producer has been replaced or its key reused.
  PRODUCER_FENCED: 403,
  PRODUCER_KEY_CONFLICT: 403,
  PRODUCER_EXPIRED: 403,
  // 404
  NOT_FOUND: 404,
  STREAM_NOT_FOUND: 404,
  BUCKET_NOT_FOUND: 404,
  SNAPSHOT_NOT_FOUND: 404,
  SUBSCRIPTION_NOT_FOUND: 404,
  // 405
  METHOD_NOT_ALLOWED: 405,
  // 409: the request conflicts with the stream's state.
  STREAM_CONFIG_CONFLICT: 409,
  // 409: a retried transaction of which some operations were applied before and others not.
  TRANSACTION_PARTLY_APPLIED: 409,
  STREAM_CLOSED: 409,
  CONTENT_TYPE_MISMATCH: 409,
  STREAM_SEQ_CONFLICT: 409,
  PRODUCER_SEQ_GAP: 409,
  BUCKET_NOT_EMPTY: 409,
  STREAM_NAME_RESERVED: 409,
  FORK_SOURCE_GONE: 409,
  SNAPSHOT_CONFLICT: 409,
  OFFSET_BEYOND_TAIL_CONFLICT: 409,
  RETENTION_CONFLICT: 409,
  // 409: subscriptions. A stale wake (generation or wake id) is FENCED and moves nothing.
  SUBSCRIPTION_ALREADY_EXISTS: 409,
  SUBSCRIPTION_FULL: 409,
  FENCED: 409,
  ALREADY_CLAIMED: 409,
  NO_PENDING_WORK: 409,
  INVALID_ACK_OFFSET: 409,
  // 410: the data or the stream is gone.
  STREAM_GONE: 410,
  OFFSET_TRIMMED: 410,
  RECORD_TRIMMED: 410,
  // 408: the request did not arrive in time (slow headers or body).
  REQUEST_TIMEOUT: 408,
  // 412
  INCARNATION_MISMATCH: 412,
  // 412: Stream-Record-Match does not name the stream's record tail.
  RECORD_MATCH_FAILED: 412,
  // 411: a quota on bytes needs the body's length before the body.
  LENGTH_REQUIRED: 411,
  // 413, 414, 416, 429, 431
  PAYLOAD_TOO_LARGE: 413,
  TOO_MANY_MESSAGES: 413,
  URI_TOO_LONG: 414,
  OFFSET_BEYOND_TAIL: 416,
  PRODUCER_LIMIT: 429,
  RATE_LIMITED: 429,
  // 429: one request writing more messages than its token's whole --quota-appends (never fits).
  REQUEST_OVER_QUOTA: 429,
  SUBSCRIPTION_LIMIT: 429,
  // 429: a bucket at its --bucket-max-streams or --bucket-max-subscriptions.
  BUCKET_STREAM_LIMIT: 429,
  BUCKET_SUBSCRIPTION_LIMIT: 429,
  REVOCATION_LIMIT: 429,
  HEADERS_TOO_LARGE: 431,
  // 5xx
  INTERNAL: 500,
  UNAVAILABLE: 503,
  TOO_MANY_CONNECTIONS: 503,
  STORAGE_UNAVAILABLE: 503,
  INSUFFICIENT_STORAGE: 507,
  // 507: a write that would take a bucket past its --bucket-max-bytes.
  BUCKET_BYTES_LIMIT: 507,
  // 507: the cold tier's uploads are behind by more than --cold-max-backlog (core/cold-tier.ts).
  COLD_STORE_BACKLOG: 507,
  // 502: an object of the cold tier is missing, corrupt or not the range it should hold.
  COLD_OBJECT_INVALID: 502,
  // 503: the cold tier's object store could not be reached for a read.
  COLD_STORE_UNAVAILABLE: 503,
} as const satisfies Record<string, number>;

export type ErrorCode = keyof typeof ERROR_STATUS;

export function statusOf(code: ErrorCode): number {
  return ERROR_STATUS[code];
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(ERROR_STATUS, value);
}

/**
 * Facts an error carries besides its code. Each field travels as one response header
 * (see `ERROR_FIELD_HEADERS`), so a client can act on it without parsing prose.
 */
export interface ErrorFields {
  /** Stream-Next-Offset: the tail, or the earliest readable offset on a 410. */
  nextOffset?: number;
  /** Stream-Last-Seq: the last accepted Stream-Seq (only on a Stream-Seq 409). */
  lastSeq?: string;
  /** Stream-Closed: true. */
  closed?: boolean;
  /** Stream-Incarnation: the current token (on a 412). */
  incarnation?: string;
  /** Producer-Epoch: the current epoch (403) or the floor (producer-expired). */
  producerEpoch?: number;
  /** Producer-Seq */
  producerSeq?: number;
  /** Producer-Expected-Seq */
  expectedSeq?: number;
  /** Producer-Received-Seq */
  receivedSeq?: number;
  /** Producer-Outcome */
  producerOutcome?: string;
  /** Producer-Closed-Epoch */
  closedEpoch?: number;
  /** Producer-Closed-Seq */
  closedSeq?: number;
  /** Retry-After, in seconds. */
  retryAfterSeconds?: number;
  /** Stream-Record-First: the first retained record (record-aware refusals). */
  recordFirst?: number;
  /** Stream-Record-Next: the record tail. */
  recordNext?: number;
}

export interface ProtocolError {
  code: ErrorCode;
  message: string;
  fields?: ErrorFields;
}

export function protocolError(code: ErrorCode, message: string, fields?: ErrorFields): ProtocolError {
  return fields ? { code, message, fields } : { code, message };
}

/** The JSON body of every refusal. */
export interface ErrorBody {
  code: ErrorCode;
  message: string;
}
