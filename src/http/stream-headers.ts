/** Response headers that describe a stream or a write's receipt. */
import { retentionToStored } from '../core/retention-policy.js';
import type { ServerResponse } from 'node:http';
import { activeExtensions } from '../core/extensions.js';
import { hasRecords } from '../core/records.js';
import type { ProducerAck, Receipt, RecordRange, StreamState } from '../core/types.js';
import { isActiveContentType } from '../protocol/content-type.js';
import { H } from '../protocol/headers.js';
import { encodeOffset } from '../protocol/offset.js';
import type { HeaderMap } from './response.js';

/**
 * Stream-Extensions for a response about the stream at `address`: the tokens active for
 * it (`stream` null when it does not exist); no header when none is.
 */
export function extensionHeaders(address: { affinity: boolean }, stream: Pick<StreamState, 'config'> | null, transaction = false): HeaderMap {
  return extensionsOf(address, stream !== null && hasRecords(stream), transaction);
}

/** Stream-Extensions when whether the stream numbers records is known from an outcome. */
export function extensionsOf(address: { affinity: boolean }, records: boolean, transaction = false): HeaderMap {
  const tokens = activeExtensions({ records, affinity: address.affinity, transaction });
  return tokens.length === 0 ? {} : { [H.streamExtensions]: tokens.join(', ') };
}

/**
 * Sets, before any handler runs, the Stream-Extensions that the URL alone decides (path
 * affinity), so that every answer on an affinity path carries the token, those written
 * before the stream is looked up (405, 401, body refusals, failures) included. A handler
 * that knows the stream sends the whole list (extensionHeaders), which replaces this one.
 */
export function presetAddressExtensions(res: ServerResponse, address: { affinity: boolean }): void {
  if (!address.affinity) return;
  res.setHeader(H.streamExtensions, extensionsOf(address, false)[H.streamExtensions]!);
}

/**
 * Sets, before any handler runs, the two tokens every answer of
 * `POST /{bucket}/{affinity_key}/$transaction` carries (Ursula's extensions, 1.8), so that
 * refusals written before the handler (401, 403, a repeated header) carry them too.
 */
export function presetTransactionExtensions(res: ServerResponse): void {
  res.setHeader(H.streamExtensions, TRANSACTION_EXTENSIONS[H.streamExtensions]!);
}

/** The tokens of every answer of the transaction route: path affinity and group transactions. */
export const TRANSACTION_EXTENSIONS: HeaderMap = extensionsOf({ affinity: true }, false, true);

/** Headers of HEAD and create answers. */
export function describeStream(stream: StreamState): HeaderMap {
  const headers: HeaderMap = {
    'content-type': stream.config.contentType,
    [H.streamNextOffset]: encodeOffset(stream.tail),
    [H.streamIncarnation]: stream.incarnation,
  };
  if (stream.closed) headers[H.streamClosed] = 'true';
  return headers;
}

export function metadataHeaders(stream: StreamState): HeaderMap {
  const headers = describeStream(stream);
  if (stream.config.ttlSeconds !== null) headers[H.streamTtl] = String(stream.config.ttlSeconds);
  if (stream.config.expiresAtMs !== null) headers[H.streamExpiresAt] = new Date(stream.config.expiresAtMs).toISOString();
  if (stream.lastStreamSeq !== null) headers[H.streamLastSeq] = stream.lastStreamSeq;
  // The stream's own policy, as given on create; a bucket's default is GET /{bucket}'s.
  const retention = retentionToStored(stream.config.retention);
  if (retention !== null) headers[H.streamRetention] = retention;
  if (stream.earliestOffset > 0) headers[H.streamEarliestOffset] = encodeOffset(stream.earliestOffset);
  if (stream.snapshot) {
    headers[H.streamSnapshotOffset] = encodeOffset(stream.snapshot.offset);
    headers[H.streamSnapshotDigest] = stream.snapshot.digest;
  }
  return Object.assign(headers, recordTailHeaders(stream));
}

/** Stream-Record-First and -Next (F and N) of a stream that numbers records; none otherwise. */
export function recordTailHeaders(stream: StreamState): HeaderMap {
  if (!hasRecords(stream)) return {};
  return { [H.streamRecordFirst]: String(stream.recordFirst), [H.streamRecordNext]: String(stream.recordNext) };
}

/** Stream-Record-Start and -Next: the ordinals an operation created (start = next when none). */
export function recordRangeHeaders(range: RecordRange): HeaderMap {
  return { [H.streamRecordStart]: String(range.start), [H.streamRecordNext]: String(range.next) };
}

export function receiptHeaders(receipt: Receipt): HeaderMap {
  const headers: HeaderMap = {
    [H.streamOffset]: encodeOffset(receipt.start),
    [H.streamNextOffset]: encodeOffset(receipt.next),
  };
  if (receipt.closed) headers[H.streamClosed] = 'true';
  return receipt.records === null ? headers : Object.assign(headers, recordRangeHeaders(receipt.records));
}

/** A producer's acknowledgement as headers, set on `headers` (a new map by default) and returned. */
export function producerHeaders(ack: ProducerAck, headers: HeaderMap = {}): HeaderMap {
  headers[H.producerEpoch] = String(ack.epoch);
  headers[H.producerSeq] = String(ack.seq);
  if (ack.closedEpoch !== undefined) headers[H.producerClosedEpoch] = String(ack.closedEpoch);
  if (ack.closedSeq !== undefined) headers[H.producerClosedSeq] = String(ack.closedSeq);
  if (ack.outcome !== undefined) headers[H.producerOutcome] = ack.outcome;
  return headers;
}

/**
 * The headers of every answer that carries stored bytes (a stream's or a snapshot's),
 * beside its Content-Type. Writers choose those bytes and their type, and they are
 * served on the origin of the console, which keeps its token in session storage: so the
 * body is never a document of this origin (a sandbox without scripts gives it an opaque
 * origin), its type is never guessed, and an active type is a download, not a page.
 * fetch() and EventSource ignore all three, so clients read the same bytes.
 */
export function storedBodyHeaders(contentType: string): HeaderMap {
  const headers: HeaderMap = {
    'content-type': contentType,
    'content-security-policy': 'sandbox',
    'x-content-type-options': 'nosniff',
  };
  if (isActiveContentType(contentType)) headers['content-disposition'] = 'attachment';
  return headers;
}
