/**
 * Group transactions (Ursula's `group-append-transaction-v1`): appends to several streams
 * of one affinity key (`/{bucket}/{affinity_key}/{stream}`), committed together or not at
 * all, in one `POST /{bucket}/{affinity_key}/$transaction`. The client only carries the
 * operations and the answer: which operations may apply, how they chain and how a retry is
 * recognised are the server's rules. A refusal is the typed error a plain append would
 * get, with `operation`, the index of the operation refused.
 */
import { H } from '../protocol/headers.js';
import { extensionTokens } from '../protocol/extensions.js';
import { errorFromResponse, RillError, TransactionsNotSupportedError } from './errors.js';
import type { Transport } from './http.js';
import type { RecordRange } from './headers.js';

/** The token a server lists in Stream-Extensions on every answer of the transaction route. */
export const TRANSACTIONS_TOKEN = 'group-append-transaction-v1';

/** The payload of an operation: exactly one of these, as the stream handle's appends take them. */
export type TransactionPayload =
  /** Raw bytes (on a JSON stream: JSON text, an array being one message per element). */
  | { body: Uint8Array | string; json?: never; messages?: never }
  /** One JSON message (an array value stays one message), as `appendJson`. */
  | { json: unknown; body?: never; messages?: never }
  /** JSON messages, one per element, as `appendMessages`. */
  | { messages: readonly unknown[]; body?: never; json?: never };

export type TransactionOperation = TransactionPayload & {
  /** The stream's local id under the affinity key (`journal` for `/{bucket}/{key}/journal`). */
  stream: string;
  /** Default: `application/json` with `json` or `messages`, else `application/octet-stream`. */
  contentType?: string;
  /** Close the stream with this append. */
  closeAfter?: boolean;
  streamSeq?: string;
  /** Producer fields, so that a retry of the whole transaction is recognised and applies nothing. */
  producer?: { id: string; epoch: number; seq: number };
  /** Append only if the stream's record tail is this ordinal (`Stream-Record-Match`). */
  recordMatch?: number;
};

/** One operation's acknowledgement, in request order. */
export interface TransactionAck {
  stream: string;
  /** Where the operation's bytes start; absent on a duplicate whose receipt was not kept. */
  offset: string | undefined;
  nextOffset: string | undefined;
  closed: boolean;
  /** Applied by an earlier attempt of the transaction: nothing was written this time. */
  duplicate: boolean;
  /** The ordinals the operation's messages got (JSON streams). */
  records: RecordRange | undefined;
  producer: { epoch: number; seq: number } | undefined;
}

export interface TransactionOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

const encoder = new TextEncoder();
const JSON_TYPE = 'application/json';
const DEFAULT_CONTENT_TYPE = 'application/octet-stream';

/** Sends the transaction to `url` (the route) and answers its acknowledgements. */
export async function sendTransaction(transport: Transport, url: string, operations: readonly TransactionOperation[], options: TransactionOptions = {}): Promise<TransactionAck[]> {
  if (operations.length === 0) throw new RangeError('a transaction needs at least one operation');
  const body = JSON.stringify({ operations: operations.map(wireOperation) });
  const res = await transport.request(url, {
    method: 'POST',
    headers: { 'content-type': JSON_TYPE },
    body,
    ...(options.signal === undefined ? {} : { signal: options.signal }),
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
  });
  if (res.status !== 200) throw await transactionError(res.response, url, operations);
  return acksOf(res.body, operations.length, res.status);
}

/** An operation as the wire spells it (snake_case, the payload in padded base64). */
export function wireOperation(operation: TransactionOperation): Record<string, unknown> {
  const { bytes, contentType } = payloadOf(operation);
  const wire: Record<string, unknown> = { stream: operation.stream, content_type: contentType, payload_base64: base64Of(bytes) };
  if (operation.closeAfter !== undefined) wire.close_after = operation.closeAfter;
  if (operation.streamSeq !== undefined) wire.stream_seq = operation.streamSeq;
  if (operation.producer !== undefined) {
    wire.producer = { producer_id: operation.producer.id, producer_epoch: operation.producer.epoch, producer_seq: operation.producer.seq };
  }
  if (operation.recordMatch !== undefined) wire.record_match = operation.recordMatch;
  return wire;
}

function payloadOf(operation: TransactionOperation): { bytes: Uint8Array; contentType: string } {
  const given = [operation.body !== undefined, 'json' in operation && operation.json !== undefined, operation.messages !== undefined].filter(Boolean).length;
  if (given !== 1) throw new TypeError(`operation on "${operation.stream}": give exactly one of body, json and messages`);
  if (operation.body !== undefined) {
    const bytes = typeof operation.body === 'string' ? encoder.encode(operation.body) : operation.body;
    return { bytes, contentType: operation.contentType ?? DEFAULT_CONTENT_TYPE };
  }
  // As appendJson: one value is sent as a one-element array, so that an array value stays one message.
  const messages = operation.messages ?? [operation.json];
  if (messages.length === 0) throw new RangeError(`operation on "${operation.stream}": messages needs at least one message`);
  return { bytes: encoder.encode(JSON.stringify(messages)), contentType: operation.contentType ?? JSON_TYPE };
}

/** Standard padded base64 with web APIs only, so that the client still runs in browsers. */
function base64Of(bytes: Uint8Array): string {
  const CHUNK = 0x8000;
  let binary = '';
  for (let i = 0; i < bytes.length; i += CHUNK) binary += String.fromCharCode(...bytes.subarray(i, i + CHUNK));
  return btoa(binary);
}

/**
 * The typed error of a refusal. A 404 or 405 without the extension's token comes from a
 * server that has no such route (or treats it as a stream): that says so, instead of
 * "stream not found". A refusal naming an operation says which one in its message.
 */
async function transactionError(res: Response, url: string, operations: readonly TransactionOperation[]): Promise<RillError> {
  const advertised = extensionTokens(res.headers.get(H.streamExtensions)).includes(TRANSACTIONS_TOKEN);
  if ((res.status === 404 || res.status === 405) && !advertised) {
    await res.body?.cancel().catch(() => undefined);
    const message = `${url}: the server does not serve group transactions (HTTP ${res.status} without ${TRANSACTIONS_TOKEN}); nothing was applied`;
    return new TransactionsNotSupportedError({ code: 'TRANSACTIONS_NOT_SUPPORTED', message, status: res.status });
  }
  // No URL: a 404 here is about an operation's stream, not the route the path would name.
  const error = await errorFromResponse(res, '');
  const index = error.operation;
  if (index === undefined) return error;
  const named = operations[index]?.stream;
  const message = `operation ${index}${named === undefined ? '' : ` (${named})`}: ${error.message}`;
  const Kind = error.constructor as typeof RillError;
  return new Kind({ code: error.code, message, ...(error.status === undefined ? {} : { status: error.status }), fields: error.fields });
}

interface WireAck {
  stream?: unknown;
  stream_offset?: unknown;
  stream_next_offset?: unknown;
  stream_closed?: unknown;
  duplicate?: unknown;
  stream_record_start?: unknown;
  stream_record_next?: unknown;
  producer_epoch?: unknown;
  producer_seq?: unknown;
}

function acksOf(body: Uint8Array, count: number, status: number): TransactionAck[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder().decode(body));
  } catch (error) {
    throw new RillError({ code: 'UNEXPECTED_RESPONSE', message: 'the transaction was answered with a body that is not JSON', status, cause: error });
  }
  if (!Array.isArray(parsed) || parsed.length !== count || !parsed.every((a) => typeof a === 'object' && a !== null && typeof (a as WireAck).stream === 'string')) {
    throw new RillError({ code: 'UNEXPECTED_RESPONSE', message: `a transaction of ${count} operations was answered without ${count} acknowledgements`, status });
  }
  return (parsed as WireAck[]).map(ackOf);
}

const text = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);
const whole = (value: unknown): number | undefined => (typeof value === 'number' && Number.isSafeInteger(value) ? value : undefined);

function ackOf(wire: WireAck): TransactionAck {
  const start = whole(wire.stream_record_start);
  const next = whole(wire.stream_record_next);
  const epoch = whole(wire.producer_epoch);
  const seq = whole(wire.producer_seq);
  return {
    stream: wire.stream as string,
    offset: text(wire.stream_offset),
    nextOffset: text(wire.stream_next_offset),
    closed: wire.stream_closed === true,
    duplicate: wire.duplicate === true,
    records: start === undefined || next === undefined ? undefined : { start, next },
    producer: epoch === undefined || seq === undefined ? undefined : { epoch, seq },
  };
}
