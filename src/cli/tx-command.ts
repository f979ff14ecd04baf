/**
 * `rill tx BUCKET/KEY`: one group transaction over the streams of an affinity key, through
 * `rill-streams/client`. Operations come from `--op JSON` (repeatable) or, without any,
 * from stdin as NDJSON, one operation per line. An operation is spelled as on the wire
 * (`stream`, `content_type`, `close_after`, `stream_seq`, `producer`, `record_match`), its
 * payload given as `value` (one JSON message), `messages` (one per element), `text` or
 * `base64`, so that shell users never base64-encode JSON by hand; `text` and `base64` take
 * the stream's content type unless `content_type` is given.
 */
import { createInterface } from 'node:readline';
import type { Command } from 'commander';
import type { BucketHandle, TransactionAck, TransactionOperation, TransactionPayload } from '../client/index.js';
import { action, globals } from './client-commands.js';
import { UsageError } from './errors.js';
import { out, outJson } from './output.js';

const MEMBERS: ReadonlySet<string> = new Set(['stream', 'value', 'messages', 'text', 'base64', 'content_type', 'close_after', 'stream_seq', 'producer', 'record_match']);
const PAYLOADS = ['value', 'messages', 'text', 'base64'] as const;

type Raw = Record<string, unknown>;

/** One operation from its JSON text; `where` says where it came from (`operation 2 (--op)`, `stdin line 3`). */
export function parseOperation(text: string, where: string): TransactionOperation {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new UsageError(`${where} is not JSON: an operation is an object such as {"stream":"journal","value":{"step":1}}`);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new UsageError(`${where}: an operation is a JSON object`);
  const op = raw as Raw;
  const unknown = Object.keys(op).find((member) => !MEMBERS.has(member));
  if (unknown !== undefined) throw new UsageError(`${where}: unknown member "${unknown}" (known: ${[...MEMBERS].join(', ')})`);
  if (typeof op.stream !== 'string') throw new UsageError(`${where}: "stream" names a stream under the affinity key`);
  // Values are carried as given: the server checks them and names the operation it refuses.
  return {
    stream: op.stream,
    ...payloadOf(op, where),
    ...(op.content_type === undefined ? {} : { contentType: op.content_type as string }),
    ...(op.close_after === undefined ? {} : { closeAfter: op.close_after as boolean }),
    ...(op.stream_seq === undefined ? {} : { streamSeq: op.stream_seq as string }),
    ...(op.producer === undefined ? {} : { producer: producerOf(op.producer, where) }),
    ...(op.record_match === undefined ? {} : { recordMatch: op.record_match as number }),
  };
}

function payloadOf(op: Raw, where: string): TransactionPayload {
  const given = PAYLOADS.filter((member) => op[member] !== undefined);
  if (given.length !== 1) throw new UsageError(`${where}: give the payload as exactly one of ${PAYLOADS.join(', ')}`);
  if (op.value !== undefined) return { json: op.value };
  if (op.messages !== undefined) {
    if (!Array.isArray(op.messages)) throw new UsageError(`${where}: "messages" is a JSON array, one message per element`);
    return { messages: op.messages };
  }
  if (op.text !== undefined) {
    if (typeof op.text !== 'string') throw new UsageError(`${where}: "text" is a string`);
    return { body: op.text };
  }
  const base64 = op.base64;
  const bytes = typeof base64 === 'string' ? Buffer.from(base64, 'base64') : undefined;
  // Buffer.from skips what is not base64: refuse rather than send other bytes than meant.
  if (bytes === undefined || bytes.toString('base64') !== base64) throw new UsageError(`${where}: "base64" is standard padded base64`);
  return { body: new Uint8Array(bytes) };
}

function producerOf(value: unknown, where: string): { id: string; epoch: number; seq: number } {
  if (typeof value !== 'object' || value === null) throw new UsageError(`${where}: "producer" is {"producer_id","producer_epoch","producer_seq"}`);
  const p = value as Raw;
  return { id: p.producer_id as string, epoch: p.producer_epoch as number, seq: p.producer_seq as number };
}

/** The operations of stdin: one JSON object per non-blank line. */
async function stdinOperations(): Promise<TransactionOperation[]> {
  const operations: TransactionOperation[] = [];
  let lineNumber = 0;
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    lineNumber++;
    if (line.trim() !== '') operations.push(parseOperation(line, `stdin line ${lineNumber}`));
  }
  return operations;
}

/** BUCKET/KEY, the affinity key whose streams the transaction names. */
function targetOf(path: string): { bucket: string; key: string } {
  const slash = path.indexOf('/');
  if (slash <= 0 || slash === path.length - 1 || path.indexOf('/', slash + 1) >= 0) {
    throw new UsageError(`${path}: tx takes BUCKET/KEY, the affinity key whose streams (BUCKET/KEY/STREAM) the operations name`);
  }
  return { bucket: path.slice(0, slash), key: path.slice(slash + 1) };
}

function ackLine(ack: TransactionAck): string {
  const parts = [ack.stream, ack.duplicate ? 'duplicate' : 'appended'];
  if (ack.offset !== undefined) parts.push(`offset ${ack.offset}`);
  parts.push(`next-offset ${ack.nextOffset ?? '(unknown)'}`);
  if (ack.records !== undefined) parts.push(`record-start ${ack.records.start} record-next ${ack.records.next}`);
  if (ack.closed) parts.push('closed');
  return `${parts.join(' ')}\n`;
}

/**
 * Gives `text` and `base64` operations without content_type the stream's own type, as
 * `rill append` does (one HEAD per stream). A stream the HEAD cannot see keeps the client's
 * default: the transaction's refusal then names the operation.
 */
async function withStreamTypes(target: BucketHandle, key: string, operations: TransactionOperation[]): Promise<TransactionOperation[]> {
  const types = new Map<string, Promise<string | undefined>>();
  const typeOf = (stream: string) => {
    if (!types.has(stream)) types.set(stream, target.affinityStream(key, stream).head().then((info) => info.contentType, () => undefined));
    return types.get(stream)!;
  };
  return Promise.all(
    operations.map(async (op) => {
      if (op.body === undefined || op.contentType !== undefined) return op;
      const contentType = await typeOf(op.stream);
      return contentType === undefined ? op : { ...op, contentType };
    }),
  );
}

async function txCommand(path: string, flags: { op: string[] }, command: Command): Promise<void> {
  const { client, json } = globals(command);
  const { bucket, key } = targetOf(path);
  const parsed = flags.op.length > 0 ? flags.op.map((text, i) => parseOperation(text, `operation ${i} (--op)`)) : await stdinOperations();
  if (parsed.length === 0) throw new UsageError('no operations: give --op JSON (repeatable) or one JSON operation per line on stdin');
  const target = client.bucket(bucket);
  const acks = await target.transaction(key, await withStreamTypes(target, key, parsed));
  for (const ack of acks) await (json ? outJson(ack) : out(ackLine(ack)));
}

export function addTxCommand(program: Command): void {
  program
    .command('tx <bucket/key>')
    .description('append to several streams of an affinity key together or not at all (operations: --op, or NDJSON on stdin)')
    .option('--op <json>', 'one operation, e.g. {"stream":"journal","value":{"step":1},"record_match":3} (repeatable, in order)', (value: string, all: string[]) => [...all, value], [] as string[])
    .action(action(txCommand));
}
