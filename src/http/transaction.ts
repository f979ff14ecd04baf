/**
 * `POST /{bucket}/{affinity_key}/$transaction` (Ursula's `group-append-transaction-v1`):
 * appends to several existing streams of one affinity key, committed together or not at
 * all. The body is read (protocol/transaction.ts), each operation becomes the append
 * request a plain POST would make, and the store runs them as one command (the rules are
 * core/transaction.ts). The answer is the acknowledgements in request order, or the first
 * refusal with the index of its operation.
 */
import type { RetentionPolicy } from '../core/retention-policy.js';
import { bucketRetentionOf } from './writes.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CommittedOperation } from '../core/transaction.js';
import type { AppendRequest } from '../core/types.js';
import { isJsonContentType, normalizeContentType } from '../protocol/content-type.js';
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import { jsonRefusal } from '../protocol/json.js';
import { encodeOffset } from '../protocol/offset.js';
import { affinityStreamProblem } from '../protocol/ids.js';
import { MAX_TRANSACTION_BYTES, parseTransactionBody, type TransactionOperation } from '../protocol/transaction.js';
import { writableOrMissing } from './access.js';
import type { HandlerContext } from './context.js';
import { frameJson, header, readBody } from './request.js';
import { sendBodyRefusal, sendError, sendJson } from './response.js';
import { route, type StreamAddress } from './router.js';
import { TRANSACTION_EXTENSIONS } from './stream-headers.js';
import { countWrite } from './usage.js';

export interface TransactionTarget {
  bucket: string;
  affinityKey: string;
}


/** A refusal of operation `index` (null: of the request as a whole). */
interface OperationRefusal {
  error: ProtocolError;
  operation: number | null;
}

function refuse(res: ServerResponse, { error, operation }: OperationRefusal): void {
  sendError(res, error, TRANSACTION_EXTENSIONS, operation === null ? {} : { operation });
}

export async function handleTransaction(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, target: TransactionTarget): Promise<void> {
  if (req.method !== 'POST') return refuse(res, { error: protocolError('METHOD_NOT_ALLOWED', `${req.method} is not allowed on $transaction; POST a transaction`), operation: null });
  const contentType = normalizeContentType(header(req, 'content-type') ?? '');
  if (contentType === undefined || !isJsonContentType(contentType)) {
    return refuse(res, { error: protocolError('INVALID_TRANSACTION', 'a transaction is sent as application/json'), operation: null });
  }
  const body = await readBody(req, Math.min(MAX_TRANSACTION_BYTES, ctx.settings.maxBodyBytes));
  if (!body.ok) return sendBodyRefusal(res, body.error);
  const parsed = parseTransactionBody(body.body);
  if (!parsed.ok) return refuse(res, parsed);
  const operations: Array<{ name: string; request: AppendRequest; bucketRetention?: RetentionPolicy }> = [];
  for (const [index, operation] of parsed.operations.entries()) {
    const prepared = await prepareOperation(req, ctx, target, operation);
    if ('code' in prepared) return refuse(res, { error: prepared, operation: index });
    operations.push(prepared);
  }
  // Every operation is in the affinity key's bucket: its default policy, and room for all of them.
  const bucketRetention = await bucketRetentionOf(ctx, target.bucket);
  for (const operation of operations) operation.bucketRetention = bucketRetention;
  const bytes = operations.reduce((n, { request }) => n + request.data.length, 0);
  const overLimit = await ctx.bucketBytes.within(target.bucket, bytes, async (stored) => {
    if (ctx.access.chargesMessages) {
      const payloads = operations.map(({ request }) => ({ json: isJsonContentType(request.contentType ?? ''), data: request.data }));
      const refused = ctx.access.chargeMessages(req, payloads, ctx.now());
      if (refused) return refuse(res, { error: refused, operation: null });
    }
    const outcome = await ctx.store.run('appendTransaction', { operations });
    if (outcome.kind === 'rejected') return refuse(res, outcome);
    outcome.operations.forEach((committed, i) => {
      const { request } = operations[i]!;
      if (committed.kind !== 'appended') return;
      stored(request.data.length);
      countWrite(req, ctx, target.bucket, request.contentType, request.data);
    });
    const acks = outcome.operations.map((committed, index) => ackOf(parsed.operations[index]!, committed));
    sendJson(res, 200, acks, TRANSACTION_EXTENSIONS);
  });
  if (overLimit) refuse(res, { error: overLimit, operation: null });
}

/**
 * The stream an operation names under the affinity key, by the affinity form's rules (the
 * identity limit, the reserved names) and the router's address, and the token's right to
 * write it.
 */
function operationStream(req: IncomingMessage, target: TransactionTarget, stream: string): StreamAddress | ProtocolError {
  const problem = affinityStreamProblem(target.bucket, target.affinityKey, stream);
  if (problem !== null) return protocolError('INVALID_ID', problem);
  const path = `/${[target.bucket, target.affinityKey, stream].map(encodeURIComponent).join('/')}`;
  const routed = route(path);
  if (routed.kind === 'error') return routed.error;
  if (routed.kind !== 'stream' || !routed.stream.affinity) {
    return protocolError('INVALID_TRANSACTION', `"${stream}" does not name a stream under the affinity key`);
  }
  return writableOrMissing(req, routed.stream);
}

/** The append a plain POST of the operation would make: JSON payloads framed as its body would be. */
async function prepareOperation(
  req: IncomingMessage,
  ctx: HandlerContext,
  target: TransactionTarget,
  operation: TransactionOperation,
): Promise<{ name: string; request: AppendRequest } | ProtocolError> {
  const address = operationStream(req, target, operation.stream);
  if ('code' in address) return address;
  let data = operation.payload;
  if (isJsonContentType(operation.contentType)) {
    const framed = await frameJson(data, true, ctx.settings.maxAppendMessages);
    if (!framed.ok) return jsonRefusal(framed, 'body', ctx.settings.maxAppendMessages);
    data = framed.data;
  }
  const request: AppendRequest = {
    contentType: operation.contentType,
    data,
    close: operation.closeAfter,
    streamSeq: operation.streamSeq,
    producer: operation.producer,
    bodyDigest: null,
    incarnation: null,
    recordMatch: operation.recordMatch,
  };
  return { name: address.key, request };
}

/** One operation's acknowledgement, named as the request's members are (snake_case). */
function ackOf(operation: TransactionOperation, committed: CommittedOperation): Record<string, unknown> {
  const ack: Record<string, unknown> = { stream: operation.stream };
  const { receipt } = committed;
  // A duplicate whose original receipt was not kept answers without a range rather than a made-up one.
  if (receipt) {
    Object.assign(ack, { stream_offset: encodeOffset(receipt.start), stream_next_offset: encodeOffset(receipt.next), stream_closed: receipt.closed });
  }
  ack.duplicate = committed.kind === 'duplicate';
  if (receipt?.records) Object.assign(ack, { stream_record_start: receipt.records.start, stream_record_next: receipt.records.next });
  if (committed.producer) Object.assign(ack, { producer_epoch: committed.producer.epoch, producer_seq: committed.producer.seq });
  return ack;
}
