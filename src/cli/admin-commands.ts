/**
 * Operator commands: `buckets ls`, `buckets set`, `usage` and `stats` ask a running server; `backup`, `restore`
 * and `check` work on a SQLite data directory (or backup file) directly, so they need no
 * server, and `backup` needs no pause of one. PostgreSQL data is backed up with the
 * database's own tools (pg_dump), not these.
 */
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { InvalidArgumentError, type Command } from 'commander';
import type { CheckReport } from '../storage/sqlite/check.js';
import type { ColdCheckReport, SegmentLine } from '../storage/cold/check.js';
import { action, globals } from './client-commands.js';
import { ConfigMistake, UsageError } from './errors.js';
import { out, outJson, printBucket } from './output.js';
import { progressBar } from './progress.js';
import type { BucketSettingsChange, RetentionPolicyOption } from '../client/index.js';
import { parseBytes, parseDurationMs, parseNonNegativeInteger } from './units.js';

const DEFAULT_DATA = './data';

async function bucketsLs(flags: { limit?: string }, command: Command): Promise<void> {
  const { client, json } = globals(command);
  const limit = flags.limit === undefined ? undefined : Number(flags.limit);
  for await (const bucket of client.buckets(limit === undefined ? {} : { limit })) {
    if (json) await outJson(bucket);
    else await out(`${bucket.id}\t${bucket.streamCount} streams\tcreated ${bucket.createdAt}\n`);
  }
}

interface SettingsFlags {
  publicRead?: string;
  maxStreams?: string;
  maxSubscriptions?: string;
  maxBytes?: string;
  retention?: string;
}

/** --retention: a policy as JSON (the server judges it), or `none` to remove the bucket's default. */
function retentionOf(raw: string): RetentionPolicyOption | null {
  if (raw === 'none') return null;
  try {
    return JSON.parse(raw) as RetentionPolicyOption;
  } catch {
    throw new InvalidArgumentError('--retention takes a JSON policy such as {"maxAgeMs":604800000}, or none');
  }
}

/** A limit flag: `default` gives the bucket the server-wide limit back (null), a number replaces it (0: none). */
function limitOf(raw: string | undefined, parse: (value: string) => number): number | null | undefined {
  if (raw === undefined) return undefined;
  return raw === 'default' ? null : parse(raw);
}

/** The change the flags name; naming none is a mistake rather than a request that changes nothing. */
export function settingsChangeOf(flags: SettingsFlags): BucketSettingsChange {
  const change: BucketSettingsChange = {};
  if (flags.publicRead !== undefined) {
    if (flags.publicRead !== 'on' && flags.publicRead !== 'off') throw new InvalidArgumentError('--public-read takes on or off');
    change.publicRead = flags.publicRead === 'on';
  }
  const limits = {
    maxStreams: limitOf(flags.maxStreams, parseNonNegativeInteger),
    maxSubscriptions: limitOf(flags.maxSubscriptions, parseNonNegativeInteger),
    maxBytes: limitOf(flags.maxBytes, (value) => parseBytes(value, 0)),
  };
  const named = Object.fromEntries(Object.entries(limits).filter(([, value]) => value !== undefined));
  if (Object.keys(named).length > 0) change.limits = named;
  if (flags.retention !== undefined) change.retention = retentionOf(flags.retention);
  if (change.publicRead === undefined && change.limits === undefined && change.retention === undefined) {
    throw new InvalidArgumentError('name a setting to change: --public-read, --max-streams, --max-subscriptions, --max-bytes or --retention');
  }
  return change;
}

async function bucketsSet(id: string, flags: SettingsFlags, command: Command): Promise<void> {
  const { client, json } = globals(command);
  await printBucket(await client.bucket(id).configure(settingsChangeOf(flags)), json);
}

async function usage(flags: { bucket?: string }, command: Command): Promise<void> {
  const { client, json } = globals(command);
  let after: string | undefined;
  for (let pages = 0; pages < 1000; pages++) {
    const page = await client.usage({ ...(flags.bucket === undefined ? {} : { bucket: flags.bucket }), ...(after === undefined ? {} : { after }) });
    for (const row of page.rows) {
      if (json) await outJson(row);
      else await out(`${row.bucket}\t${row.subject}\tappends ${row.appends}\tbytes-in ${row.bytesIn}\tbytes-out ${row.bytesOut}\tlive ${row.liveReaders}\n`);
    }
    if (page.next === null) return;
    after = page.next;
  }
}

async function stats(path: string | undefined, _flags: unknown, command: Command): Promise<void> {
  const { client, json } = globals(command);
  const figures = path === undefined ? await client.stats() : await client.streamStats(path);
  if (json) return outJson(figures);
  const rows = Object.entries(figures).flatMap(([key, value]) =>
    typeof value === 'object' && value !== null ? Object.entries(value).map(([k, v]) => [`${key}.${k}`, v]) : [[key, value]],
  );
  await out(rows.map(([key, value]) => `${String(key)}: ${String(value)}\n`).join(''));
}

/** The SQLite engine's tools, loaded when a command needs them: the client commands start without the native module. */
async function sqliteAdmin() {
  const [backupTools, checkTools] = await Promise.all([import('../storage/sqlite/backup.js'), import('../storage/sqlite/check.js')]);
  return { ...backupTools, ...checkTools };
}

/**
 * The operator's mistakes a backup or restore can be told about before it starts, each
 * naming the flag or argument and what to do (code CONFIG or USAGE, exit 2).
 */
function checkBackupPaths(file: string, dataDir: string, dataFile: string): void {
  if (!existsSync(dataDir)) throw new ConfigMistake(`--data ${dataDir}: no such directory; point --data at the directory rill serve --data uses`);
  if (!existsSync(join(dataDir, dataFile))) throw new ConfigMistake(`--data ${dataDir}: holds no rill database (${dataFile}); point --data at the directory rill serve --data uses`);
  const target = dirname(resolve(file));
  if (!existsSync(target)) throw new ConfigMistake(`${file}: the directory ${target} does not exist; create it first (mkdir -p ${target})`);
}

function checkRestorePaths(file: string, flags: { data: string; force?: boolean }, dataFile: string): void {
  if (!existsSync(file)) throw new ConfigMistake(`${file}: no such backup file`);
  if (flags.force !== true && existsSync(join(flags.data, dataFile))) {
    throw new UsageError(`--data ${flags.data} already holds a database; add --force to replace it with ${file} (what it holds now is lost)`);
  }
}

async function backup(file: string, flags: { data: string }, command: Command): Promise<void> {
  const { json } = globals(command);
  const { backupDataDir, DATA_FILE } = await sqliteAdmin();
  checkBackupPaths(file, flags.data, DATA_FILE);
  const bar = progressBar('backup', 'pages');
  try {
    const result = await backupDataDir(flags.data, file, (done, total) => bar.update(done, total));
    bar.stop();
    if (json) return outJson({ backup: resolve(file), ...result });
    await out(`backed up ${resolve(flags.data, DATA_FILE)} to ${file}: ${result.bytes} bytes\n`);
  } finally {
    bar.stop();
  }
}

async function restore(file: string, flags: { data: string; force?: boolean }, command: Command): Promise<void> {
  const { json } = globals(command);
  const { restoreDataDir, DATA_FILE } = await sqliteAdmin();
  checkRestorePaths(file, flags, DATA_FILE);
  const bar = progressBar('restore', 'bytes');
  try {
    await restoreDataDir(file, flags.data, { force: flags.force === true }, (done, total) => bar.update(done, total));
  } finally {
    bar.stop();
  }
  if (json) return outJson({ restored: resolve(file), data: resolve(flags.data) });
  await out(`restored ${file} into ${flags.data}; start rill serve --data ${flags.data}\n`);
}

async function check(file: string | undefined, flags: { data: string; coldStore?: string; postgresUrl?: string }, command: Command): Promise<void> {
  if (flags.postgresUrl !== undefined) return checkPostgres(flags.postgresUrl, flags.coldStore, command);
  const { json } = globals(command);
  const { checkDataFile, DATA_FILE } = await sqliteAdmin();
  const target = file ?? resolve(flags.data, DATA_FILE);
  const bar = progressBar('check', 'streams');
  let report: CheckReport;
  try {
    report = checkDataFile(target, (done, total) => bar.update(done, total));
  } finally {
    bar.stop();
  }
  if (flags.coldStore !== undefined && report.problems.length === 0) {
    const { sqliteSegmentLines } = await import('../storage/cold/check.js');
    report = { ...report, problems: (await checkCold(sqliteSegmentLines(target), flags.coldStore)).problems };
  }
  if (json) await outJson({ file: target, ...report });
  else if (report.problems.length === 0) await out(`ok: ${target}: ${report.streams} streams, ${report.appends} appends, ${report.producers} producer records\n`);
  reportProblems(target, report.problems, json);
}

/** On PostgreSQL the check is the cold tier's: the database's own invariants are PostgreSQL's to keep. */
async function checkPostgres(url: string, coldStore: string | undefined, command: Command): Promise<void> {
  const { json } = globals(command);
  if (coldStore === undefined) throw new InvalidArgumentError('rill check --postgres-url checks the cold tier of that database: give --cold-store too');
  const { postgresSegmentLines } = await import('../storage/postgres/cold-check.js');
  const { redactedUrl } = await import('../storage/postgres/settings.js');
  const target = redactedUrl(url);
  const report = await checkCold(await postgresSegmentLines(url), coldStore);
  if (json) await outJson({ database: target, ...report });
  else if (report.problems.length === 0) await out(`ok: ${target}: ${report.segments} cold segments\n`);
  reportProblems(target, report.problems, json);
}

function reportProblems(target: string, problems: string[], json: boolean): void {
  if (problems.length === 0) return;
  if (!json) process.stderr.write(`rill check: ${target} has ${problems.length} problem(s):\n  ${problems.join('\n  ')}\n`);
  process.exitCode = 1;
}

/** The cold tier's objects (storage/cold/check.ts); loaded, with the S3 client, only for --cold-store. */
async function checkCold(lines: SegmentLine[], url: string): Promise<ColdCheckReport> {
  const [{ checkColdTier }, { openS3ObjectStore }] = await Promise.all([import('../storage/cold/check.js'), import('../storage/cold/object-store.js')]);
  const objects = await openS3ObjectStore(url);
  const bar = progressBar('check', 'cold objects');
  try {
    return await checkColdTier(lines, objects, (done, total) => bar.update(done, total));
  } finally {
    bar.stop();
    objects.close();
  }
}

/** `--until`: an RFC 3339 time, or a duration from now (2h, 7d). */
function untilOf(raw: string | undefined): Date | undefined {
  if (raw === undefined) return undefined;
  const at = /^\d{4}-/.test(raw) ? Date.parse(raw) : Date.now() + parseDurationMs(raw);
  if (!Number.isFinite(at)) throw new InvalidArgumentError(`--until takes a time (2026-12-31T00:00:00Z) or a duration (2h, 7d): ${raw}`);
  return new Date(at);
}

async function revoke(flags: { jti?: string; sub?: string; until?: string }, command: Command): Promise<void> {
  const { client, json } = globals(command);
  if ((flags.jti === undefined) === (flags.sub === undefined)) throw new InvalidArgumentError('name exactly one of --jti and --sub');
  const until = untilOf(flags.until);
  const target = flags.jti !== undefined ? { jti: flags.jti } : { sub: flags.sub! };
  const revocation = await client.revoke(target, until ? { until } : {});
  if (json) return outJson(revocation);
  await out(`revoked ${'jti' in revocation ? `jti ${revocation.jti}` : `subject ${revocation.sub}`} until ${revocation.until}\n`);
}

async function revocations(_flags: unknown, command: Command): Promise<void> {
  const { client, json } = globals(command);
  for (const r of await client.revocations()) {
    if (json) await outJson(r);
    else await out(`${'jti' in r ? `jti\t${r.jti}` : `sub\t${r.sub}`}\tuntil ${r.until}\n`);
  }
}

export function addAdminCommands(program: Command): void {
  program
    .command('revoke')
    .description('refuse tokens (admin on *): one by its jti, or every one of a subject, until a time (default: the server\'s --auth-max-ttl from now)')
    .option('--jti <jti>', "the token's jti")
    .option('--sub <subject>', "every token of this subject (sub)")
    .option('--until <time>', 'an RFC 3339 time, or a duration from now (2h, 7d)')
    .action(action(revoke));
  program.command('revocations').description('list the revocations in force (admin on *)').action(action(revocations));
  const buckets = program.commands.find((c) => c.name() === 'buckets')!;
  buckets.command('ls').description('list buckets with their stream counts').option('--limit <n>', 'buckets per request (1-1000)').action(action(bucketsLs));
  buckets
    .command('set <bucket>')
    .description("change a bucket's settings (admin on *): anonymous reads, and limits of its own in place of the server-wide --bucket-max-*")
    .option('--public-read <on|off>', 'let requests without a token read its streams')
    .option('--max-streams <n|default>', 'streams it may hold (0: no limit; default: the server-wide limit)')
    .option('--max-subscriptions <n|default>', 'subscriptions it may hold (0: no limit; default: the server-wide limit)')
    .option('--max-bytes <size|default>', 'bytes its streams may retain (0: no limit; default: the server-wide limit)')
    .option('--retention <json|none>', 'the retention policy of its streams created without one, e.g. {"maxAgeMs":604800000} (none: remove it)')
    .action(action(bucketsSet));
  program
    .command('usage')
    .description('the usage record of the node answering (admin on *): appends, bytes in and out, live readers per bucket and token subject')
    .option('--bucket <bucket>', "only this bucket's rows")
    .action(action(usage));
  program.command('stats [stream]').description("the server's totals, or one stream's (bucket/stream): bytes, messages, producers, live readers").action(action(stats));
  program
    .command('backup <file>')
    .description('copy a SQLite data directory to FILE while the server keeps running (PostgreSQL: use pg_dump)')
    .option('--data <dir>', 'data directory', DEFAULT_DATA)
    .action(action(backup));
  program
    .command('restore <file>')
    .description('restore a backup into a data directory no server has open (the backup is checked first)')
    .option('--data <dir>', 'data directory', DEFAULT_DATA)
    .option('--force', 'replace the database the directory holds')
    .action(action(restore));
  program
    .command('check [file]')
    .description("verify a data directory's (or a backup file's) invariants; exits 1 on a problem")
    .option('--data <dir>', 'data directory', DEFAULT_DATA)
    .option('--cold-store <url>', "also verify the cold tier's objects in this store (s3://bucket/prefix, as rill serve --cold-store)")
    .option('--postgres-url <url>', "check the cold tier of this PostgreSQL database instead of a data file (with --cold-store)")
    .action(action(check));
}
