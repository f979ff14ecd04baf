/**
 * The `rill` commands for what a stream offers beyond appends and reads: snapshot,
 * retention, bootstrap, attrs and fork, each through `rill-streams/client`.
 */
import type { Command } from 'commander';
import { isJsonContentType } from '../protocol/content-type.js';
import { RillError, type StreamHandle } from '../client/index.js';
import { action, globals } from './client-commands.js';
import { UsageError } from './errors.js';
import { out, outJson } from './output.js';

const decoder = new TextDecoder();

/** Bytes as JSON output: text when they decode as UTF-8, base64 otherwise. */
function bodyJson(body: Uint8Array): { text: string } | { base64: string } {
  try {
    return { text: new TextDecoder('utf-8', { fatal: true }).decode(body) };
  } catch {
    return { base64: Buffer.from(body).toString('base64') };
  }
}

async function readStdin(): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks);
}

async function snapshotCommand(path: string, offset: string | undefined, data: string | undefined, flags: { contentType?: string }, command: Command): Promise<void> {
  const { client, json } = globals(command);
  const stream = client.stream(path);
  if (offset === undefined) return showSnapshot(stream, path, json);
  const body = data ?? (await readStdin());
  if (body.length === 0) throw new UsageError('a snapshot needs a body: give DATA or pipe it on stdin');
  if (flags.contentType === undefined) await stream.head();
  const published = await stream.publishSnapshot(offset, body, flags.contentType === undefined ? {} : { contentType: flags.contentType });
  if (json) return outJson(published);
  await out(`published snapshot at ${published.offset} digest ${published.digest}\n`);
}

async function showSnapshot(stream: StreamHandle, path: string, json: boolean): Promise<void> {
  const snapshot = await stream.snapshot();
  // The server answered 404: a fact about the stream, not a mistake in the command (exit 1, not 2).
  if (snapshot === undefined) {
    throw new RillError({ code: 'SNAPSHOT_NOT_FOUND', status: 404, message: `${path} has no snapshot; publish one with "rill snapshot ${path} OFFSET DATA"` });
  }
  if (json) return outJson({ offset: snapshot.offset, digest: snapshot.digest, contentType: snapshot.contentType, ...bodyJson(snapshot.body) });
  await out(snapshot.body);
}

async function bootstrapCommand(path: string, _flags: unknown, command: Command): Promise<void> {
  const { client, json } = globals(command);
  const stream = client.stream(path);
  const boot = await stream.bootstrap();
  if (json) {
    const snapshot = boot.snapshot ? { offset: boot.snapshot.offset, contentType: boot.snapshot.contentType, ...bodyJson(boot.snapshot.body) } : null;
    return outJson({ snapshot, messages: boot.messages.map(bodyJson), nextOffset: boot.nextOffset, closed: boot.closed });
  }
  if (boot.snapshot) await out(`${decoder.decode(boot.snapshot.body).replace(/\n?$/, '\n')}`);
  // As `read` prints them: JSON messages one per line, other bytes raw.
  const perLine = isJsonContentType(await stream.knownContentType());
  for (const message of boot.messages) await out(perLine ? `${decoder.decode(message)}\n` : message);
}

async function retentionCommand(path: string, offset: string, _flags: unknown, command: Command): Promise<void> {
  const { client, json } = globals(command);
  const result = await client.stream(path).retain(offset);
  if (json) return outJson(result);
  await out(`earliest-offset ${result.earliestOffset}\n`);
}

async function attrsCommand(path: string, value: string | undefined, _flags: unknown, command: Command): Promise<void> {
  const { client, json } = globals(command);
  const stream = client.stream(path);
  if (value === undefined) return outJson(await stream.attrs());
  let attrs: unknown;
  try {
    attrs = JSON.parse(value);
  } catch {
    throw new UsageError('attributes are a JSON object such as \'{"title":"Run 42","metadata":{"agent":"a1"}}\'');
  }
  await stream.setAttrs(attrs as Record<string, unknown>);
  if (json) return outJson({ attrs });
  await out(`attributes of ${path} set\n`);
}

async function forkCommand(source: string, path: string, flags: { offset?: string }, command: Command): Promise<void> {
  const { client, json } = globals(command);
  const result = await client.stream(path).create({ forkOf: { source: client.stream(source), ...(flags.offset === undefined ? {} : { offset: flags.offset }) } });
  if (json) return outJson(result);
  await out(`${result.created ? 'forked' : 'exists'} ${path} from ${source} (${result.contentType}) next-offset ${result.nextOffset}\n`);
}

export function addStreamCommands(program: Command): void {
  program
    .command('snapshot <stream> [offset] [data]')
    .description('publish a snapshot of the history before OFFSET (DATA or stdin); without OFFSET, print the latest one')
    .option('-t, --content-type <type>', "the snapshot's content type (default: the stream's)")
    .action(action(snapshotCommand));
  program.command('retention <stream> <offset>').description('drop the history before OFFSET (not past the latest snapshot)').action(action(retentionCommand));
  program.command('bootstrap <stream>').description('print the latest snapshot, then every retained message after it').action(action(bootstrapCommand));
  program.command('attrs <stream> [json]').description("print the stream's attributes, or replace them with JSON ({} clears them)").action(action(attrsCommand));
  program
    .command('fork <source> <stream>')
    .description('create STREAM sharing the history of SOURCE up to --offset (default: its tail)')
    .option('--offset <offset>', 'where the fork leaves its source (a message boundary)')
    .action(action(forkCommand));
}
