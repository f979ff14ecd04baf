/**
 * The one table that says which response header carries which error field. The server
 * renders `ErrorFields` into headers with it and the client parses headers back into
 * the same typed fields, so the two sides cannot drift apart.
 */
import type { ErrorFields } from './errors.js';
import { H, MAX_SAFE_PRODUCER_NUMBER } from './headers.js';
import { encodeOffset, parsePosition } from './offset.js';

type FieldName = keyof ErrorFields;

interface FieldCodec {
  header: string;
  /** Undefined means the field is not sent (a `false` flag, for example). */
  encode(value: never): string | undefined;
  /** Undefined means the header value is malformed and the field is left out. */
  decode(raw: string): ErrorFields[FieldName] | undefined;
}

const CANONICAL_UINT = /^(0|[1-9][0-9]{0,15})$/;

function decodeUint(raw: string): number | undefined {
  const trimmed = raw.trim();
  if (!CANONICAL_UINT.test(trimmed)) return undefined;
  const value = Number(trimmed);
  return value <= MAX_SAFE_PRODUCER_NUMBER ? value : undefined;
}

const uint = (header: string): FieldCodec => ({
  header,
  encode: (value: number) => String(value),
  decode: decodeUint,
});

const text = (header: string): FieldCodec => ({
  header,
  encode: (value: string) => value,
  decode: (raw) => raw,
});

/** Field -> header, in the order the headers are written. */
export const ERROR_FIELD_HEADERS: { readonly [K in FieldName]-?: FieldCodec } = {
  nextOffset: {
    header: H.streamNextOffset,
    encode: (value: number) => encodeOffset(value),
    decode: (raw) => parsePosition(raw.trim()),
  },
  lastSeq: text(H.streamLastSeq),
  closed: {
    header: H.streamClosed,
    encode: (value: boolean) => (value ? 'true' : undefined),
    decode: (raw) => (raw.trim().toLowerCase() === 'true' ? true : undefined),
  },
  incarnation: text(H.streamIncarnation),
  producerEpoch: uint(H.producerEpoch),
  producerSeq: uint(H.producerSeq),
  expectedSeq: uint(H.producerExpectedSeq),
  receivedSeq: uint(H.producerReceivedSeq),
  producerOutcome: text(H.producerOutcome),
  closedEpoch: uint(H.producerClosedEpoch),
  closedSeq: uint(H.producerClosedSeq),
  retryAfterSeconds: uint(H.retryAfter),
  recordFirst: uint(H.streamRecordFirst),
  recordNext: uint(H.streamRecordNext),
};

const FIELD_NAMES = Object.keys(ERROR_FIELD_HEADERS) as FieldName[];

/** Renders error fields as response headers (lower-case names). */
export function errorFieldsToHeaders(fields: ErrorFields): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of FIELD_NAMES) {
    const value = fields[name];
    if (value === undefined) continue;
    const codec = ERROR_FIELD_HEADERS[name];
    const encoded = codec.encode(value as never);
    if (encoded !== undefined) out[codec.header] = encoded;
  }
  return out;
}

/** Parses response headers back into error fields; absent or malformed headers are left out. */
export function errorFieldsFromHeaders(get: (name: string) => string | null | undefined): ErrorFields {
  const fields: Record<string, unknown> = {};
  for (const name of FIELD_NAMES) {
    const codec = ERROR_FIELD_HEADERS[name];
    const raw = get(codec.header);
    if (raw === null || raw === undefined) continue;
    const value = codec.decode(raw);
    if (value !== undefined) fields[name] = value;
  }
  return fields as ErrorFields;
}
