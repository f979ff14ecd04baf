/**
 * `rill subs`: subscriptions from the command line, through `rill-streams/client`. Every
 * subcommand works on the `/v1/stream` family unless `--bucket B` names a bucket (and
 * `ls` takes the bucket as its argument); stream paths are relative to that scope.
 * `claim`, `ack` and `release` drive a pull-wake subscription by hand.
 */
import { type Command, InvalidArgumentError, Option } from 'commander';
import { readFileSync } from 'node:fs';
import type { Ack, Subscription, SubscriptionConfig, Subscriptions, SubscriptionSummary, WakeRef } from '../client/index.js';
import { action, globals } from './client-commands.js';
import { UsageError } from './errors.js';
import { out, outJson } from './output.js';
import { formatDurationMs, parseDurationMs } from './units.js';
import { repeatable } from '../ops/config.js';

interface ScopeFlags {
  bucket?: string;
}

function scope(command: Command, bucket: string | undefined): { subs: Subscriptions; json: boolean } {
  const { client, json } = globals(command);
  return { subs: bucket === undefined ? client.subscriptions() : client.bucket(bucket).subscriptions(), json };
}

function parseGeneration(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError('expected a wake generation (a non-negative integer)');
  return n;
}

/** `stream=offset`: the offset after the last message processed (offsets hold no `=`). */
function parseAck(text: string): Ack {
  const at = text.lastIndexOf('=');
  if (at <= 0 || at === text.length - 1) throw new UsageError(`${text}: an ack is STREAM=OFFSET, such as orders/1=00000000000000000044`);
  return { stream: text.slice(0, at), offset: text.slice(at + 1) };
}

function summaryLine(s: SubscriptionSummary): string {
  const target = s.type === 'webhook' ? (s.webhook?.url ?? '') : `wake-stream ${s.wakeStream ?? ''}`;
  return [s.id, s.type, s.pattern === undefined ? '-' : `pattern ${s.pattern}`, target, s.status].join('  ');
}

function printSubscription(s: Subscription): Promise<void> {
  const rows: Array<[string, string | number | undefined]> = [
    ['id', s.id],
    ['type', s.type],
    ['pattern', s.pattern],
    ['webhook', s.webhook?.url],
    ['signing-kid', s.webhook?.signing?.kid],
    ['wake-stream', s.wakeStream],
    ['lease-ttl', formatDurationMs(s.leaseTtlMs)],
    ['status', s.status],
    ['created-at', s.createdAt],
    ['description', s.description],
    ['generation', s.generation],
    ['wake', s.wake === undefined ? undefined : `${s.wake.wakeId} held by ${s.wake.holder ?? '(nobody)'} until ${s.wake.leaseExpiresAt}`],
  ];
  const head = rows.filter(([, v]) => v !== undefined).map(([k, v]) => `${k}: ${String(v)}\n`);
  const streams = s.streams.map((link) => `  ${link.path}  ${link.linkType}  acked ${link.ackedOffset}\n`);
  return out([...head, `streams: ${s.streams.length}\n`, ...streams].join(''));
}

async function lsCommand(bucket: string | undefined, _flags: unknown, command: Command): Promise<void> {
  const { subs, json } = scope(command, bucket);
  const all: SubscriptionSummary[] = [];
  for await (const s of subs.all()) {
    if (json) all.push(s);
    else await out(`${summaryLine(s)}\n`);
  }
  if (json) await outJson({ subscriptions: all });
}

async function getCommand(id: string, flags: ScopeFlags, command: Command): Promise<void> {
  const { subs, json } = scope(command, flags.bucket);
  const subscription = await subs.get(id);
  if (json) return outJson(subscription);
  await printSubscription(subscription);
}

interface CreateFlags extends ScopeFlags {
  webhook?: string;
  wakeStream?: string;
  pattern?: string;
  stream?: string[];
  leaseTtl?: number;
  description?: string;
}

function configOf(flags: CreateFlags): SubscriptionConfig {
  if ((flags.webhook === undefined) === (flags.wakeStream === undefined)) {
    throw new UsageError('a subscription is either --webhook URL (signed POSTs) or --wake-stream PATH (pull-wake): give one of them');
  }
  const streams = flags.stream ?? [];
  if (flags.pattern === undefined && streams.length === 0) throw new UsageError('say which streams to follow: --pattern GLOB, --stream PATH (repeatable), or both');
  return {
    type: flags.webhook === undefined ? 'pull-wake' : 'webhook',
    ...(flags.webhook === undefined ? {} : { webhook: { url: flags.webhook } }),
    ...(flags.wakeStream === undefined ? {} : { wakeStream: flags.wakeStream }),
    ...(flags.pattern === undefined ? {} : { pattern: flags.pattern }),
    ...(streams.length === 0 ? {} : { streams }),
    ...(flags.leaseTtl === undefined ? {} : { leaseTtlMs: flags.leaseTtl }),
    ...(flags.description === undefined ? {} : { description: flags.description }),
  };
}

async function createCommand(id: string, flags: CreateFlags, command: Command): Promise<void> {
  const config = configOf(flags);
  const { subs, json } = scope(command, flags.bucket);
  const { subscription, created } = await subs.put(id, config);
  if (json) return outJson({ created, subscription });
  await out(`${created ? 'created' : 'exists'} ${id} (${subscription.type}) following ${subscription.streams.length} stream${subscription.streams.length === 1 ? '' : 's'}\n`);
}

interface WakeFlags extends ScopeFlags {
  claim?: string;
  wakeToken?: string;
  wake?: string;
  generation?: number;
  done?: boolean;
}

/** A claim's answer as `rill subs claim` prints it (camelCase) or as the server sends it (snake_case). */
function wakeRefFromJson(text: string): Partial<WakeRef> {
  const value = JSON.parse(text) as Record<string, unknown>;
  return { wakeId: (value.wakeId ?? value.wake_id) as string, generation: value.generation as number, token: value.token as string };
}

/** The wake an ack or release names: from --claim (what a claim answered), or from the three flags. */
function wakeRefOf(flags: WakeFlags): WakeRef {
  if (flags.claim !== undefined) {
    let claimed: Partial<WakeRef>;
    try {
      claimed = wakeRefFromJson(readFileSync(flags.claim === '-' ? 0 : flags.claim, 'utf8'));
    } catch (error) {
      throw new UsageError(`--claim ${flags.claim}: not the JSON of a claim (${error instanceof Error ? error.message : String(error)})`);
    }
    if (typeof claimed.wakeId !== 'string' || typeof claimed.generation !== 'number' || typeof claimed.token !== 'string') {
      throw new UsageError(`--claim ${flags.claim}: no wake id, generation and token in it`);
    }
    return { wakeId: claimed.wakeId, generation: claimed.generation, token: claimed.token };
  }
  if (flags.wakeToken === undefined || flags.wake === undefined || flags.generation === undefined) {
    throw new UsageError('name the wake: --claim FILE (what "rill subs claim" printed), or --wake-token, --wake and --generation');
  }
  return { wakeId: flags.wake, generation: flags.generation, token: flags.wakeToken };
}

async function ackCommand(id: string, acks: string[], flags: WakeFlags, command: Command): Promise<void> {
  const parsed = acks.map(parseAck);
  if (parsed.length === 0 && !flags.done) throw new UsageError('nothing to ack: give STREAM=OFFSET pairs, --done, or both');
  const wake = wakeRefOf(flags);
  const { subs, json } = scope(command, flags.bucket);
  const result = await subs.ack(id, wake, parsed, flags.done ? { done: true } : {});
  if (json) return outJson(result);
  const what = parsed.length === 1 ? '1 stream' : `${parsed.length} streams`;
  await out(`acked ${what}${flags.done ? ', wake done' : ''}${result.nextWake ? '; a new wake started' : ''}\n`);
}

async function releaseCommand(id: string, flags: WakeFlags, command: Command): Promise<void> {
  const wake = wakeRefOf(flags);
  const { subs, json } = scope(command, flags.bucket);
  await subs.release(id, wake);
  if (json) return outJson({ released: id, wakeId: wake.wakeId });
  await out(`released ${wake.wakeId} of ${id}\n`);
}

/** The options that name a claimed wake, for ack and release. */
function wakeOptions(command: Command): Command {
  return command
    .option('--claim <file>', 'names the wake by the JSON of its claim (what "rill subs claim" printed, or the claim route answered; - for stdin)')
    .option('--wake-token <token>', "the wake's token (from claim; --token is the server's bearer token)")
    .option('--wake <wake-id>', "the wake's id (from claim)")
    .option('--generation <n>', "the wake's generation (from claim)", parseGeneration);
}

const BUCKET_HELP = 'the bucket whose subscription it is (default: the /v1/stream family)';

export function addSubsCommands(program: Command): void {
  const subs = program.command('subs').description('subscriptions: wake a worker (webhook or pull-wake) when streams get new data');
  subs.command('ls [bucket]').description("list the subscriptions of /v1/stream, or of a bucket").action(action(lsCommand));
  subs.command('get <id>').description('show a subscription and the cursor of every stream it follows').option('--bucket <bucket>', BUCKET_HELP).action(action(getCommand));
  subs
    .command('create <id>')
    .description('create a subscription (or confirm one with the same configuration)')
    .option('--webhook <url>', 'deliver wakes as signed POSTs to this https URL')
    .option('--wake-stream <path>', 'pull-wake: append wake events to this JSON stream')
    .option('--pattern <glob>', 'follow every stream matching this glob (* one segment, ** any)')
    .option('--stream <path>', 'follow this stream (repeatable)', repeatable)
    .addOption(new Option('--lease-ttl <duration>', 'how long a claimed wake is held without an ack (1s to 10m; server default 30s)').argParser(parseDurationMs))
    .option('--description <text>', 'a note for people')
    .option('--bucket <bucket>', BUCKET_HELP)
    .action(action(createCommand));
  subs
    .command('rm <id>')
    .description('delete a subscription (its wakes in flight are fenced)')
    .option('--bucket <bucket>', BUCKET_HELP)
    .action(action(async (id: string, flags: ScopeFlags, command: Command) => {
      const { subs: scoped, json } = scope(command, flags.bucket);
      await scoped.delete(id);
      if (json) return outJson({ deleted: id });
      await out(`deleted ${id}\n`);
    }));
  subs
    .command('add <id> <path...>')
    .description('follow more streams explicitly (each from its current tail)')
    .option('--bucket <bucket>', BUCKET_HELP)
    .action(action(async (id: string, paths: string[], flags: ScopeFlags, command: Command) => {
      const { subs: scoped, json } = scope(command, flags.bucket);
      await scoped.addStreams(id, paths);
      if (json) return outJson({ id, added: paths });
      await out(`${id} follows ${paths.join(' ')}\n`);
    }));
  subs
    .command('remove <id> <path>')
    .description('stop following a stream added explicitly')
    .option('--bucket <bucket>', BUCKET_HELP)
    .action(action(async (id: string, path: string, flags: ScopeFlags, command: Command) => {
      const { subs: scoped, json } = scope(command, flags.bucket);
      await scoped.removeStream(id, path);
      if (json) return outJson({ id, removed: path });
      await out(`${id} no longer follows ${path}\n`);
    }));
  subs
    .command('claim <id>')
    .description('claim the pending wake of a pull-wake subscription; prints it as JSON')
    .requiredOption('--worker <name>', 'who holds the wake')
    .option('--bucket <bucket>', BUCKET_HELP)
    .action(action(async (id: string, flags: ScopeFlags & { worker: string }, command: Command) => outJson(await scope(command, flags.bucket).subs.claim(id, flags.worker))));
  wakeOptions(subs.command('ack <id> [acks...]'))
    .description('move cursors of a claimed wake: STREAM=OFFSET, everything before OFFSET is processed; --done ends the wake')
    .option('--done', 'end the wake')
    .option('--bucket <bucket>', BUCKET_HELP)
    .action(action(ackCommand));
  wakeOptions(subs.command('release <id>'))
    .description('give a claimed wake back without moving cursors')
    .option('--bucket <bucket>', BUCKET_HELP)
    .action(action(releaseCommand));
  subs
    .command('rotate-key')
    .description('sign webhook deliveries with a new key and make wake tokens with a new secret from now on (the old key stays published, and tokens made before keep working, for an hour)')
    .action(action(async (_flags: unknown, command: Command) => {
      const { subs: scoped, json } = scope(command, undefined);
      const rotated = await scoped.rotateSigningKey();
      if (json) return outJson(rotated);
      await out(`signing with ${rotated.kid}; published: ${rotated.keys.map((k) => k.kid).join(' ')}\n`);
    }));
}
