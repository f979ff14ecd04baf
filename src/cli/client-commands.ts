/**
 * The client side of the `rill` command: create, append, read, tail, head, rm, buckets
 * and ls, all through `rill/client`. `--url` (or RILL_URL) picks the server; output is
 * plain unless `--json` asks for one JSON value per line.
 */
import { createInterface } from 'node:readline';
import { Command, InvalidArgumentError, Option } from 'commander';
import { IdempotentProducer, RillClient, RillError, type AppendResult, type ProducerReceipt, type StreamHandle } from '../client/index.js';
import { out, outJson, printInfo, printMessage } from './output.js';

const DEFAULT_URL = 'http://127.0.0.1:4437';
/** Lines or chunks of stdin sent per plain append, and promises awaited together with --producer. */
const STDIN_BATCH_MESSAGES = 1000;
const STDIN_BATCH_BYTES = 1024 * 1024;

interface GlobalFlags {
  url?: string;
  json?: boolean;
}

function globals(command: Command): { client: RillClient; json: boolean } {
  const flags = command.optsWithGlobals<GlobalFlags>();
  const url = flags.url ?? process.env.RILL_URL ?? DEFAULT_URL;
  return { client: new RillClient({ url }), json: flags.json === true };
}

function parseNonNegative(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError('expected a non-negative integer');
  return n;
}

/** Runs a command body, printing a typed error as `rill: CODE: message` with exit code 1. */
function action<A extends unknown[]>(body: (...args: A) => Promise<void>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await body(...args);
    } catch (error) {
      if (error instanceof RillError) {
        console.error(`rill: ${error.code}: ${error.message}`);
        process.exitCode = 1;
        return;
      }
      throw error;
    }
  };
}

interface CreateFlags {
  contentType: string;
  ttl?: number;
  expiresAt?: string;
  closed?: boolean;
}

async function createCommand(path: string, flags: CreateFlags, command: Command): Promise<void> {
  const { client, json } = globals(command);
  const result = await client.stream(path).create({
    contentType: flags.contentType,
    ...(flags.ttl === undefined ? {} : { ttlSeconds: flags.ttl }),
    ...(flags.expiresAt === undefined ? {} : { expiresAt: flags.expiresAt }),
    ...(flags.closed ? { closed: true } : {}),
  });
  if (json) return outJson(result);
  await out(`${result.created ? 'created' : 'exists'} ${path} (${result.contentType}) next-offset ${result.nextOffset}\n`);
}

interface AppendFlags {
  contentType?: string;
  producer?: string;
  epoch?: number;
  streamSeq?: string;
  close?: boolean;
}

type Receipt = AppendResult | ProducerReceipt;

async function printReceipt(receipt: Receipt | undefined, json: boolean): Promise<void> {
  if (receipt === undefined) return;
  if (json) return outJson(receipt);
  await out(`${receipt.duplicate ? 'duplicate' : 'appended'} next-offset ${receipt.nextOffset ?? '(unknown)'}\n`);
}

async function appendCommand(path: string, data: string | undefined, flags: AppendFlags, command: Command): Promise<void> {
  const { client, json } = globals(command);
  const stream = client.stream(path);
  const info = await stream.head();
  const contentType = flags.contentType ?? info.contentType;
  const producer = flags.producer === undefined ? undefined : newProducer(stream, flags, contentType);
  let last: Receipt | undefined;
  if (data !== undefined) last = await appendOne(stream, producer, data, contentType, flags.streamSeq);
  else last = await appendStdin(stream, producer, contentType, stream.isJson);
  await producer?.close();
  if (flags.close) last = await stream.close();
  await printReceipt(last, json);
}

function newProducer(stream: StreamHandle, flags: AppendFlags, contentType: string): IdempotentProducer {
  // Each run is a new producer instance: it claims an epoch above any earlier run's.
  return new IdempotentProducer(stream, { id: flags.producer!, epoch: flags.epoch ?? Date.now(), autoClaim: true, digest: true, contentType });
}

async function appendOne(stream: StreamHandle, producer: IdempotentProducer | undefined, data: string, contentType: string, streamSeq?: string): Promise<Receipt> {
  const options = streamSeq === undefined ? {} : { streamSeq };
  if (producer) return producer.append(data, options);
  return stream.append(data, { contentType, ...options });
}

/** JSON streams: one message per non-empty line. Other streams: the bytes as they come. */
async function appendStdin(stream: StreamHandle, producer: IdempotentProducer | undefined, contentType: string, jsonStream: boolean): Promise<Receipt | undefined> {
  if (jsonStream) return appendStdinLines(stream, producer);
  let last: Receipt | undefined;
  for await (const chunk of process.stdin as AsyncIterable<Buffer>) {
    const bytes = new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    last = producer ? await producer.append(bytes) : await stream.append(bytes, { contentType });
  }
  return last;
}

async function appendStdinLines(stream: StreamHandle, producer: IdempotentProducer | undefined): Promise<Receipt | undefined> {
  let batch: unknown[] = [];
  let batchBytes = 0;
  let waiting: Promise<Receipt>[] = [];
  let last: Receipt | undefined;
  const send = async () => {
    if (batch.length > 0 && !producer) last = await stream.appendMessages(batch);
    if (waiting.length > 0) last = (await Promise.all(waiting)).at(-1);
    batch = [];
    batchBytes = 0;
    waiting = [];
  };
  let lineNumber = 0;
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    lineNumber++;
    if (line.trim() === '') continue;
    const value = parseLine(line, lineNumber);
    if (producer) waiting.push(producer.appendJson(value));
    else batch.push(value);
    batchBytes += line.length;
    if (batch.length + waiting.length >= STDIN_BATCH_MESSAGES || batchBytes >= STDIN_BATCH_BYTES) await send();
  }
  await send();
  return last;
}

function parseLine(line: string, lineNumber: number): unknown {
  try {
    return JSON.parse(line);
  } catch {
    throw new RillError({ code: 'INVALID_JSON', message: `stdin line ${lineNumber} is not JSON` });
  }
}

interface ReadFlags {
  offset: string;
  live?: 'long-poll' | 'sse';
  maxBytes?: number;
}

async function readCommand(path: string, flags: ReadFlags, command: Command, follow: boolean): Promise<void> {
  const { client, json } = globals(command);
  const stream = client.stream(path);
  const stop = new AbortController();
  const onSigint = () => stop.abort();
  process.once('SIGINT', onSigint);
  try {
    const live = follow ? 'sse' : (flags.live ?? false);
    const batches = stream.read({ offset: flags.offset, live, signal: stop.signal, ...(flags.maxBytes ? { maxBytes: flags.maxBytes } : {}) });
    for await (const batch of batches) {
      for (const message of batch.messages) await printMessage(message, json, stream.contentType, stream.isJson);
    }
  } catch (error) {
    // Ctrl-C ends a tail normally.
    if (!(stop.signal.aborted && error instanceof RillError && error.code === 'ABORTED')) throw error;
  } finally {
    process.off('SIGINT', onSigint);
  }
}

async function headCommand(path: string, _flags: unknown, command: Command): Promise<void> {
  const { client, json } = globals(command);
  await printInfo(await client.stream(path).head(), json);
}

async function rmCommand(path: string, _flags: unknown, command: Command): Promise<void> {
  const { client, json } = globals(command);
  await client.stream(path).delete();
  if (json) return outJson({ deleted: path });
  await out(`deleted ${path}\n`);
}

async function lsCommand(bucket: string, flags: { prefix?: string }, command: Command): Promise<void> {
  const { client, json } = globals(command);
  const ids: string[] = [];
  for await (const id of client.bucket(bucket).streams(flags.prefix === undefined ? {} : { prefix: flags.prefix })) {
    if (json) ids.push(id);
    else await out(`${id}\n`);
  }
  if (json) await outJson({ bucket, streams: ids });
}

function bucketCommands(parent: Command): void {
  const buckets = parent.command('buckets').description('create, show and remove buckets');
  buckets
    .command('create <bucket>')
    .description('create a bucket (ids: 4-64 of a-z 0-9 _ -)')
    .action(action(async (id: string, _flags: unknown, command: Command) => {
      const { client, json } = globals(command);
      const result = await client.bucket(id).create();
      if (json) return outJson({ bucket: id, ...result });
      await out(`${result.created ? 'created' : 'exists'} ${id}\n`);
    }));
  buckets
    .command('show <bucket>')
    .description('show a bucket and its stream count')
    .action(action(async (id: string, _flags: unknown, command: Command) => {
      const { client, json } = globals(command);
      const info = await client.bucket(id).info();
      if (json) return outJson(info);
      await out(`id: ${info.id}\nstreams: ${info.streamCount}\ncreated-at: ${info.createdAt}\n`);
    }));
  buckets
    .command('rm <bucket>')
    .description('remove an empty bucket')
    .action(action(async (id: string, _flags: unknown, command: Command) => {
      const { client, json } = globals(command);
      await client.bucket(id).delete();
      if (json) return outJson({ deleted: id });
      await out(`deleted ${id}\n`);
    }));
}

const STREAM_ARG = '<stream>';
const STREAM_HELP = 'bucket/stream, v1/stream/name, or a URL';

export function addClientCommands(program: Command): void {
  program.option('--url <url>', `server URL (default: RILL_URL or ${DEFAULT_URL})`).option('--json', 'print JSON, one value per line');
  program
    .command(`create ${STREAM_ARG}`)
    .description(`create a stream (${STREAM_HELP})`)
    .option('-t, --content-type <type>', 'content type of the stream', 'application/octet-stream')
    .option('--ttl <seconds>', 'expire after this long without reads or writes', parseNonNegative)
    .option('--expires-at <time>', 'expire at this RFC 3339 time')
    .option('--closed', 'create it closed')
    .action(action(createCommand));
  program
    .command(`append ${STREAM_ARG} [data]`)
    .description('append data from the argument or stdin (JSON streams: one message per stdin line)')
    .option('-t, --content-type <type>', "content type of the data (default: the stream's)")
    .option('--producer <id>', 'write exactly-once as this producer (claims a new epoch per run)')
    .option('--epoch <n>', 'producer epoch to claim (default: the current time in ms)', parseNonNegative)
    .option('--stream-seq <value>', 'Stream-Seq compare-and-set value')
    .option('--close', 'close the stream afterwards')
    .action(action(appendCommand));
  program
    .command(`read ${STREAM_ARG}`)
    .description('read messages (catch-up; --live to follow)')
    .option('--offset <offset>', 'start offset: -1, now, or a Stream-Next-Offset', '-1')
    .addOption(new Option('--live <mode>', 'follow with long-poll or sse').choices(['long-poll', 'sse']))
    .option('--max-bytes <n>', 'largest answer to ask for', parseNonNegative)
    .action(action((path: string, flags: ReadFlags, command: Command) => readCommand(path, flags, command, false)));
  program
    .command(`tail ${STREAM_ARG}`)
    .description('follow a stream with SSE until it is closed or Ctrl-C')
    .option('--offset <offset>', 'start offset: -1, now, or a Stream-Next-Offset', 'now')
    .action(action((path: string, flags: ReadFlags, command: Command) => readCommand(path, flags, command, true)));
  program.command(`head ${STREAM_ARG}`).description('show stream metadata').action(action(headCommand));
  program.command(`rm ${STREAM_ARG}`).description('delete a stream').action(action(rmCommand));
  bucketCommands(program);
  program.command('ls <bucket>').description("list a bucket's streams").option('--prefix <prefix>', 'only ids starting with this').action(action(lsCommand));
}
