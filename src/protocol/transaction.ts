/**
 * The body of a group-local append transaction (`POST /{bucket}/{affinity_key}/$transaction`,
 * Ursula's `group-append-transaction-v1`): up to 64 operations, each an append to one
 * existing stream under the affinity key. This file reads the body's shape; whether each
 * append may apply is decided by the same rules as a plain append (core/append.ts,
 * core/transaction.ts).
 */
import { normalizeContentType } from './content-type.js';
import { protocolError, type ProtocolError } from './errors.js';
import { parseProducerHeaders, parseStreamSeq, type ProducerHeaders } from './parse.js';

/** Most operations one transaction may carry (the extension's first version). */
export const MAX_TRANSACTION_OPERATIONS = 64;
/** Largest transaction body, before base64 decoding. */
export const MAX_TRANSACTION_BYTES = 32 * 1024 * 1024;

/** One operation as sent, its fields checked and decoded. */
export interface TransactionOperation {
  /** The local stream id under the affinity key. */
  stream: string;
  /** Normalised as a Content-Type header is. */
  contentType: string;
  /** The decoded payload, never empty; JSON payloads are not yet framed. */
  payload: Buffer;
  closeAfter: boolean;
  streamSeq: string | null;
  producer: ProducerHeaders | null;
  recordMatch: number | null;
}

/** A refusal of the body, naming the operation it is about when there is one. */
export interface TransactionBodyError {
  error: ProtocolError;
  /** Index of the operation refused; null when the body as a whole is. */
  operation: number | null;
}

export type ParsedTransaction = { ok: true; operations: TransactionOperation[] } | ({ ok: false } & TransactionBodyError);

const OPERATION_MEMBERS: ReadonlySet<string> = new Set([
  'stream',
  'content_type',
  'payload_base64',
  'close_after',
  'stream_seq',
  'producer',
  'record_match',
]);
const PRODUCER_MEMBERS: ReadonlySet<string> = new Set(['producer_id', 'producer_epoch', 'producer_seq']);
/** Standard base64 with its padding: Buffer.from would quietly skip anything else. */
const PADDED_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

class OperationError extends Error {
  constructor(readonly protocol: ProtocolError) {
    super(protocol.message);
  }
}

const invalid = (message: string): ProtocolError => protocolError('INVALID_TRANSACTION', message);

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Parses a transaction body (already within MAX_TRANSACTION_BYTES). */
export function parseTransactionBody(body: Buffer): ParsedTransaction {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return { ok: false, error: invalid('the transaction body is not JSON'), operation: null };
  }
  if (!isObject(parsed) || !Array.isArray(parsed.operations)) {
    return { ok: false, error: invalid('the transaction body is an object with an "operations" array'), operation: null };
  }
  const extra = Object.keys(parsed).find((member) => member !== 'operations');
  if (extra !== undefined) return { ok: false, error: invalid(`unknown member "${extra}" in the transaction body`), operation: null };
  const raw = parsed.operations;
  if (raw.length === 0 || raw.length > MAX_TRANSACTION_OPERATIONS) {
    return { ok: false, error: invalid(`a transaction has 1 to ${MAX_TRANSACTION_OPERATIONS} operations, not ${raw.length}`), operation: null };
  }
  const operations: TransactionOperation[] = [];
  for (let i = 0; i < raw.length; i++) {
    try {
      operations.push(parseOperation(raw[i]));
    } catch (error) {
      if (!(error instanceof OperationError)) throw error;
      return { ok: false, error: error.protocol, operation: i };
    }
  }
  return { ok: true, operations };
}

function parseOperation(raw: unknown): TransactionOperation {
  if (!isObject(raw)) throw new OperationError(invalid('each operation is a JSON object'));
  const extra = Object.keys(raw).find((member) => !OPERATION_MEMBERS.has(member));
  if (extra !== undefined) throw new OperationError(invalid(`unknown member "${extra}" in an operation`));
  if (typeof raw.stream !== 'string' || raw.stream === '') throw new OperationError(invalid('"stream" names the stream: a non-empty string'));
  return {
    stream: raw.stream,
    contentType: contentTypeOf(raw.content_type),
    payload: payloadOf(raw.payload_base64),
    closeAfter: optionalBoolean(raw.close_after, 'close_after'),
    streamSeq: streamSeqOf(raw.stream_seq),
    producer: producerOf(raw.producer),
    recordMatch: recordMatchOf(raw.record_match),
  };
}

function contentTypeOf(value: unknown): string {
  if (typeof value !== 'string') throw new OperationError(invalid('"content_type" is required: the stream\'s content type'));
  const normal = normalizeContentType(value);
  if (normal === undefined) throw new OperationError(protocolError('INVALID_CONTENT_TYPE', `"${value}" is not a media type`));
  return normal;
}

function payloadOf(value: unknown): Buffer {
  if (typeof value !== 'string' || !PADDED_BASE64.test(value)) {
    throw new OperationError(invalid('"payload_base64" is required: the payload in standard padded base64'));
  }
  if (value.length === 0) throw new OperationError(protocolError('EMPTY_BODY', 'a transaction operation needs a non-empty payload'));
  return Buffer.from(value, 'base64');
}

function optionalBoolean(value: unknown, member: string): boolean {
  if (value === undefined) return false;
  if (typeof value !== 'boolean') throw new OperationError(invalid(`"${member}" is true or false`));
  return value;
}

function streamSeqOf(value: unknown): string | null {
  if (value === undefined) return null;
  if (typeof value !== 'string' || !/^[\x20-\x7e]+$/.test(value)) {
    throw new OperationError(invalid('"stream_seq" is a string of printable ASCII, as the Stream-Seq header'));
  }
  const parsed = parseStreamSeq(value);
  if (!parsed.ok) throw new OperationError(parsed.error);
  return parsed.value ?? null;
}

/** Checked by the rules of the producer headers, so that both spellings accept the same values. */
function producerOf(value: unknown): ProducerHeaders | null {
  if (value === undefined) return null;
  if (!isObject(value)) throw new OperationError(invalid('"producer" is an object of producer_id, producer_epoch and producer_seq'));
  const extra = Object.keys(value).find((member) => !PRODUCER_MEMBERS.has(member));
  if (extra !== undefined) throw new OperationError(invalid(`unknown member "${extra}" in a producer`));
  const { producer_id: id, producer_epoch: epoch, producer_seq: seq } = value;
  if (typeof id !== 'string' || !isWholeNumber(epoch) || !isWholeNumber(seq)) {
    throw new OperationError(invalid('a producer has a string producer_id and integer producer_epoch and producer_seq'));
  }
  const parsed = parseProducerHeaders(id, String(epoch), String(seq), undefined);
  if (!parsed.ok) throw new OperationError(parsed.error);
  return parsed.value ?? null;
}

function recordMatchOf(value: unknown): number | null {
  if (value === undefined) return null;
  if (!isWholeNumber(value)) throw new OperationError(invalid('"record_match" is a non-negative integer: the record tail expected'));
  return value;
}

function isWholeNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}
