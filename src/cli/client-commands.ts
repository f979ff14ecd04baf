/**
 * The client side of the `rill` command: create, append, read, tail, head, rm, buckets
 * and ls, all through `rill-streams/client`. `--url` (or RILL_URL) picks the server, `--token`
 * (or RILL_TOKEN) authenticates to it; output is
 * plain unless `--json` asks for one JSON value per line.
 */
import { fstatSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { setFlagsFromString } from 'node:v8';
import { Command, Option } from 'commander';
import { GoneError, IdempotentProducer, RecordTrimmedError, RillClient, RillError, type AppendResult, type LiveMode, type ProducerReceipt, type RetentionPolicyOption, type StreamHandle } from '../client/index.js';
import { reportFailure, UsageError } from './errors.js';
import { liveNotice, out, outJson, printBucket, printInfo, printMessage } from './output.js';
import { isRecordRead, parseRecordStart, printRecords, type RecordFlags } from './record-read.js';
import { NO_PROGRESS, progressBar, type Progress } from './progress.js';
import { parseBytes, parseDurationMs, parseNonNegativeInteger, parsePositiveInteger } from './units.js';

const DEFAULT_URL = 'http://127.0.0.1:4437';
/** Lines or chunks of stdin sent per plain append, and promises awaited together with --producer. */
const STDIN_BATCH_MESSAGES = 1000;
const STDIN_BATCH_BYTES = 1024 * 1024;

interface GlobalFlags {
  url?: string;
  token?: string;
  json?: boolean;
}

export function globals(command: Command): { client: RillClient; json: boolean } {
  baselineWasmOnly();
  const flags = command.optsWithGlobals<GlobalFlags>();
  const url = serverUrl(flags.url ?? process.env.RILL_URL ?? DEFAULT_URL);
  const token = flags.token ?? process.env.RILL_TOKEN;
  return { client: new RillClient({ url, ...(token ? { token } : {}) }), json: flags.json === true };
}

/**
 * A client command is a short process whose first request loads fetch's HTTP parser, a
 * WebAssembly module that V8 also compiled a second time with its optimizing compiler, in
 * the background: about 110 ms of CPU of the 330 ms a process making one request cost here,
 * for a parser that reads a few headers before the process exits. Baseline code (Liftoff)
 * parses as correctly. Set before the first request; the server (`rill serve`) does not
 * call this and keeps the optimizing compiler.
 */
function baselineWasmOnly(): void {
  setFlagsFromString('--liftoff-only');
}

/** The server URL; `host:port` without a scheme is taken as http. */
export function serverUrl(raw: string): string {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(raw) ? raw : `http://${raw}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new UsageError(`--url ${raw} is not a URL (expected http://host:port)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError(`--url ${raw}: only http and https are served`);
  return withScheme;
}


/** Runs a command body, reporting any failure in the one format (see errors.ts). */
export function action<A extends unknown[]>(body: (...args: A) => Promise<void>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await body(...args);
    } catch (error) {
      const command = args.at(-1) as Command;
      const flags = command.optsWithGlobals<GlobalFlags>();
      const advice = error instanceof RillError ? adviceFor(error, args[0], flags) : undefined;
      process.exitCode = reportFailure(advice === undefined ? error : withMessage(error as RillError, `${(error as RillError).message}; ${advice}`), flags.json === true);
    }
  };
}

/** The same refusal, of the same class, with a message that says more. */
function withMessage(error: RillError, message: string): RillError {
  const Kind = error.constructor as typeof RillError;
  return new Kind({ code: error.code, message, ...(error.status === undefined ? {} : { status: error.status }), fields: error.fields, cause: error });
}

/** What the user can do about a refusal, in the terms of this command: its flags and other commands. */
function adviceFor(error: RillError, path: unknown, flags: GlobalFlags): string | undefined {
  const tokenGiven = (flags.token ?? process.env.RILL_TOKEN) !== undefined;
  switch (error.code) {
    case 'CONNECTION_FAILED':
      return 'start a server there (rill serve), or point the CLI at yours with --url or RILL_URL';
    case 'UNAUTHORIZED':
      return tokenGiven ? 'check the token given with --token or RILL_TOKEN' : 'this server has auth on: give a token with --token or RILL_TOKEN';
    case 'TOKEN_EXPIRED':
      return 'give a fresh token with --token or RILL_TOKEN';
    default:
      return error instanceof GoneError && typeof path === 'string' ? goneAdvice(error, path) : undefined;
  }
}

/** A 410 on a read says where the stream's history starts now, and how to start from a snapshot. */
function goneAdvice(error: GoneError, path: string): string | undefined {
  const first = error instanceof RecordTrimmedError ? error.recordFirst : undefined;
  const earliest = error.earliestOffset;
  let where: string;
  if (first !== undefined) where = `the first retained record is ${first}: read from there (rill read ${path} --record ${first})`;
  else if (earliest !== undefined) where = `the earliest offset is ${earliest}: read from there (rill read ${path} --offset ${earliest})`;
  else return undefined;
  return `${where} or start from the snapshot (rill bootstrap ${path})`;
}

interface CreateFlags {
  contentType: string;
  ttl?: number;
  expiresAt?: string;
  closed?: boolean;
  keepBytes?: number;
  keepMessages?: number;
  keepAge?: number;
}

/** The stream's own retention policy from --keep-bytes, --keep-messages and --keep-age; none when no flag is given. */
function retentionFlags(flags: CreateFlags): { retention?: RetentionPolicyOption } {
  if (flags.keepBytes === undefined && flags.keepMessages === undefined && flags.keepAge === undefined) return {};
  return { retention: { maxBytes: flags.keepBytes ?? null, maxMessages: flags.keepMessages ?? null, maxAgeMs: flags.keepAge ?? null } };
}

async function createCommand(path: string, flags: CreateFlags, command: Command): Promise<void> {
  const { client, json } = globals(command);
  if (!path.includes('/')) {
    throw new UsageError(`${path} names a bucket, not a stream: create the bucket with "rill buckets create ${path}", a stream with "rill create ${path}/NAME"`);
  }
  const result = await client.stream(path).create({
    contentType: flags.contentType,
    ...(flags.ttl === undefined ? {} : { ttlSeconds: flags.ttl }),
    ...(flags.expiresAt === undefined ? {} : { expiresAt: flags.expiresAt }),
    ...(flags.closed ? { closed: true } : {}),
    ...retentionFlags(flags),
  });
  if (json) return outJson(result);
  await out(`${result.created ? 'created' : 'exists'} ${path} (${result.contentType}) next-offset ${result.nextOffset}\n`);
}

interface AppendFlags {
  contentType?: string;
  producer?: string;
  epoch?: number;
  streamSeq?: string;
  recordMatch?: number;
  close?: boolean;
}

type Receipt = AppendResult | ProducerReceipt;

async function printReceipt(receipt: Receipt | undefined, json: boolean): Promise<void> {
  if (receipt === undefined) return;
  if (json) return outJson(receipt);
  const records = 'records' in receipt && receipt.records !== undefined ? ` record-start ${receipt.records.start} record-next ${receipt.records.next}` : '';
  await out(`${receipt.duplicate ? 'duplicate' : 'appended'} next-offset ${receipt.nextOffset ?? '(unknown)'}${records}\n`);
}

/**
 * --record-match: the record tail each plain append expects. Stdin sent in several
 * appends chains them: each expects the tail the one before it left, so the run appends
 * only if no other writer comes in between.
 */
interface RecordMatch {
  next: number | undefined;
}

function matchOptions(match: RecordMatch): { recordMatch?: number } {
  return match.next === undefined ? {} : { recordMatch: match.next };
}

function matched(match: RecordMatch, result: AppendResult): AppendResult {
  if (match.next !== undefined) match.next = result.records?.next;
  return result;
}

async function appendCommand(path: string, data: string | undefined, flags: AppendFlags, command: Command): Promise<void> {
  const { client, json } = globals(command);
  if (flags.recordMatch !== undefined && flags.producer !== undefined) throw new UsageError('--record-match goes with plain appends, not with --producer');
  const stream = client.stream(path);
  const info = await stream.head();
  const contentType = flags.contentType ?? info.contentType;
  const producer = flags.producer === undefined ? undefined : newProducer(stream, flags, contentType);
  const match: RecordMatch = { next: flags.recordMatch };
  let last: Receipt | undefined;
  if (data !== undefined) last = await appendOne(stream, producer, data, contentType, { ...matchOptions(match), ...(flags.streamSeq === undefined ? {} : { streamSeq: flags.streamSeq }) });
  else last = await appendStdin(stream, producer, contentType, match);
  await producer?.close();
  if (last === undefined && !flags.close) throw new RillError({ code: 'EMPTY_BODY', message: 'stdin was empty: nothing was appended' });
  if (flags.close) last = await stream.close();
  await printReceipt(last, json);
}

function newProducer(stream: StreamHandle, flags: AppendFlags, contentType: string): IdempotentProducer {
  // Each run is a new producer instance: it claims an epoch above any earlier run's. An
  // explicit --epoch is used as given: refused (with the server's answer) if it is not new.
  const autoClaim = flags.epoch === undefined;
  return new IdempotentProducer(stream, { id: flags.producer!, epoch: flags.epoch ?? Date.now(), autoClaim, digest: true, contentType });
}

async function appendOne(stream: StreamHandle, producer: IdempotentProducer | undefined, data: string, contentType: string, options: { streamSeq?: string; recordMatch?: number }): Promise<Receipt> {
  if (producer) return producer.append(data, options.streamSeq === undefined ? {} : { streamSeq: options.streamSeq });
  return stream.append(data, { contentType, ...options });
}

/** JSON streams: one message per non-empty line. Other streams: the bytes as they come. */
async function appendStdin(stream: StreamHandle, producer: IdempotentProducer | undefined, contentType: string, match: RecordMatch): Promise<Receipt | undefined> {
  // A bar when stdin is a file (its size is the total) or a pipe; none when typed at a terminal.
  const bar = process.stdin.isTTY ? NO_PROGRESS : progressBar('append', 'bytes', stdinFileBytes());
  try {
    if (stream.isJson) return await appendStdinLines(stream, producer, bar, match);
    let last: Receipt | undefined;
    let sent = 0;
    for await (const chunk of process.stdin as AsyncIterable<Buffer>) {
      const bytes = new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      last = producer ? await producer.append(bytes) : matched(match, await stream.append(bytes, { contentType, ...matchOptions(match) }));
      bar.update((sent += bytes.length));
    }
    return last;
  } finally {
    bar.stop();
  }
}

/** The size of stdin when it is a regular file, else 0 (unknown). */
function stdinFileBytes(): number {
  try {
    const stat = fstatSync(0);
    return stat.isFile() ? stat.size : 0;
  } catch {
    return 0;
  }
}

async function appendStdinLines(stream: StreamHandle, producer: IdempotentProducer | undefined, bar: Progress, match: RecordMatch): Promise<Receipt | undefined> {
  let batch: unknown[] = [];
  let batchBytes = 0;
  let waiting: Promise<Receipt>[] = [];
  let last: Receipt | undefined;
  const send = async () => {
    if (batch.length > 0 && !producer) last = matched(match, await stream.appendMessages(batch, matchOptions(match)));
    if (waiting.length > 0) last = (await Promise.all(waiting)).at(-1);
    bar.update((sentBytes += batchBytes));
    batch = [];
    batchBytes = 0;
    waiting = [];
  };
  let sentBytes = 0;
  let lineNumber = 0;
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    lineNumber++;
    if (line.trim() === '') continue;
    const value = parseLine(line, lineNumber);
    if (producer) waiting.push(producer.appendJson(value));
    else batch.push(value);
    batchBytes += Buffer.byteLength(line) + 1;
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

interface ReadFlags extends RecordFlags {
  offset: string;
  live?: 'long-poll' | 'sse';
  maxBytes?: number;
}

async function readCommand(path: string, flags: ReadFlags, command: Command, follow: boolean): Promise<void> {
  const { client, json } = globals(command);
  const stream = client.stream(path);
  const byRecord = isRecordRead(flags, command);
  const stop = new AbortController();
  const onSigint = () => stop.abort();
  process.once('SIGINT', onSigint);
  try {
    const live = follow ? 'sse' : (flags.live ?? false);
    if (!byRecord) await printBatches(stream, flags, json, live, stop.signal);
    else {
      const bounded = flags.maxBytes !== undefined || flags.maxRecords !== undefined;
      await printRecords({ stream, json, live, bounded, from: follow ? 'now' : 0, signal: stop.signal, ...(flags.maxBytes === undefined ? {} : { maxBytes: flags.maxBytes }) }, flags);
    }
  } catch (error) {
    // Ctrl-C ends a tail normally.
    if (!(stop.signal.aborted && error instanceof RillError && error.code === 'ABORTED')) throw error;
  } finally {
    process.off('SIGINT', onSigint);
  }
}

/** An offset read, printed message by message. */
async function printBatches(stream: StreamHandle, flags: ReadFlags, json: boolean, live: LiveMode, signal: AbortSignal): Promise<void> {
  const bounded = flags.maxBytes !== undefined;
  // A catch-up read whose output goes to a file or pipe shows its progress towards the tail.
  const bar = live === false && !bounded ? progressBar('read', 'bytes', 0, true) : NO_PROGRESS;
  const tail = live === false && !bounded && process.stderr.isTTY && !process.stdout.isTTY ? Number((await stream.head()).nextOffset) : 0;
  const notice = liveNotice(live !== false && !bounded);
  // From now: the tail is asked first, so that the read can say at once from where it is
  // live (a live read from `now` hears nothing until new data comes), and shows all after it.
  let offset = flags.offset;
  if (offset === 'now' && live !== false && !bounded) {
    offset = (await stream.head()).nextOffset;
    notice(`offset ${offset}`);
  }
  const batches = stream.read({ offset, live: bounded ? false : live, signal, ...(bounded ? { maxBytes: flags.maxBytes } : {}) });
  try {
    for await (const batch of batches) {
      for (const message of batch.messages) await printMessage(message, json, stream.contentType, stream.isJson);
      if (batch.upToDate) notice(`offset ${batch.nextOffset}`);
      if (tail > 0) bar.update(Number(batch.nextOffset), tail);
      // --max-bytes: one answer of at most that size; say where to go on when there is more.
      if (bounded) {
        if (!batch.upToDate) process.stderr.write(`rill: more to read: --offset ${batch.nextOffset}\n`);
        break;
      }
    }
  } finally {
    bar.stop();
  }
}

async function headCommand(path: string, _flags: unknown, command: Command): Promise<void> {
  const { client, json } = globals(command);
  if (!path.includes('/')) return showBucket(path, json, command);
  await printInfo(await client.stream(path).head(), json);
}

async function showBucket(id: string, json: boolean, command: Command): Promise<void> {
  await printBucket(await globals(command).client.bucket(id).info(), json);
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
    .action(action(async (id: string, _flags: unknown, command: Command) => showBucket(id, globals(command).json, command)));
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
  program
    .option('--url <url>', `server URL (default: RILL_URL or ${DEFAULT_URL})`)
    .option('--token <token>', 'bearer token for a server with auth on (default: RILL_TOKEN)')
    .option('--json', 'print JSON, one value per line');
  program
    .command(`create ${STREAM_ARG}`)
    .description(`create a stream (${STREAM_HELP})`)
    .option('-t, --content-type <type>', 'content type of the stream', 'application/octet-stream')
    .option('--ttl <seconds>', 'expire after this long without reads or writes', parseNonNegativeInteger)
    .option('--expires-at <time>', 'expire at this RFC 3339 time')
    .option('--closed', 'create it closed')
    .option('--keep-bytes <size>', 'retention policy: keep at most this many bytes (e.g. 64MiB), trimmed as it is written', (v) => parseBytes(v))
    .option('--keep-messages <n>', 'retention policy: keep at most the newest n messages', parsePositiveInteger)
    .option('--keep-age <duration>', 'retention policy: keep what was written in the last duration (e.g. 7d)', parseDurationMs)
    .action(action(createCommand));
  program
    .command(`append ${STREAM_ARG} [data]`)
    .description('append data from the argument or stdin (JSON streams: one message per stdin line)')
    .option('-t, --content-type <type>', "content type of the data (default: the stream's)")
    .option('--producer <id>', 'write exactly-once as this producer (claims a new epoch per run)')
    .option('--epoch <n>', 'producer epoch, used as given (refused if not above the last); default: the current time in ms, moved up if taken', parseNonNegativeInteger)
    .option('--stream-seq <value>', 'Stream-Seq compare-and-set value')
    .option('--record-match <n>', "JSON streams: append only if the stream's record tail is N (nothing is written otherwise)", parseNonNegativeInteger)
    .option('--close', 'close the stream afterwards')
    .action(action(appendCommand));
  program
    .command(`read ${STREAM_ARG}`)
    .description('read messages (catch-up; --live to follow)')
    .option('--offset <offset>', 'start offset: -1, now, or a Stream-Next-Offset', '-1')
    .addOption(new Option('--live <mode>', 'follow with long-poll or sse').choices(['long-poll', 'sse']))
    .option('--max-bytes <n>', 'read one answer of at most N bytes (never ending inside a message), then stop', parsePositiveInteger)
    .option('--record <n>', 'JSON streams: start at this record ordinal, or now', parseRecordStart)
    .option('--tail-records <k>', 'JSON streams: start at the last K records', parseNonNegativeInteger)
    .option('--max-records <n>', 'JSON streams: read one answer of at most N records, then stop', parsePositiveInteger)
    .option('--ordinals', "JSON streams: print each record's ordinal and a tab before it")
    .action(action((path: string, flags: ReadFlags, command: Command) => readCommand(path, flags, command, false)));
  program
    .command(`tail ${STREAM_ARG}`)
    .description('follow a stream with SSE from now (what is appended after it starts) until it is closed or Ctrl-C; --offset -1 to replay first')
    .option('--offset <offset>', 'start offset: -1, now, or a Stream-Next-Offset', 'now')
    .option('--record <n>', 'JSON streams: start at this record ordinal, or now', parseRecordStart)
    .option('--tail-records <k>', 'JSON streams: show the last K records first', parseNonNegativeInteger)
    .option('--ordinals', "JSON streams: print each record's ordinal and a tab before it")
    .action(action((path: string, flags: ReadFlags, command: Command) => readCommand(path, flags, command, true)));
  program.command(`head <stream-or-bucket>`).description('show stream metadata, or a bucket (a name without /)').action(action(headCommand));
  program.command(`rm ${STREAM_ARG}`).description('delete a stream').action(action(rmCommand));
  bucketCommands(program);
  program.command('ls <bucket>').description("list a bucket's streams").option('--prefix <prefix>', 'only ids starting with this').action(action(lsCommand));
}
