#!/usr/bin/env node
/** The `rill` command. */
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { effectiveConfiguration, showEnvironmentInHelp, unknownEnvironment } from '../ops/config.js';
import { buildInfo } from '../ops/build-info.js';
import { addAdminCommands } from './admin-commands.js';
import { redactedUrl } from '../storage/postgres/settings.js';
import type { ServerSettings } from '../http/settings.js';
import { addClientCommands } from './client-commands.js';
import { addStreamCommands } from './stream-commands.js';
import { addSubsCommands } from './subs-commands.js';
import { addTxCommand } from './tx-command.js';
import { EXIT_USAGE, reportFailure } from './errors.js';
import { addServeOptions, settingsFrom, type ServeFlags } from './serve-options.js';
import { addTokenCommand } from './token.js';
import { checkServeFlags, startupMistake } from './serve-checks.js';
import { isLoopbackName } from '../http/browsers.js';
import { isAuthOn } from '../http/settings.js';

/** What the startup line says about access: who may use this server. */
function accessSummary(settings: Partial<ServerSettings>): string {
  const auth = settings.auth!;
  if (!isAuthOn(auth)) return 'auth off: anyone who can reach this port may read, write and delete every stream';
  const keys = [auth.secretFile ? 'HS256 secret' : null, auth.jwksFile ? 'JWKS' : null, auth.jwksUrl ? 'JWKS URL' : null, auth.oidcIssuer ? 'OpenID Connect issuer' : null].filter(Boolean).join(' and ');
  return `auth on (${keys}): streams and admin routes need a bearer token`;
}

async function serve(flags: ServeFlags, command: Command): Promise<void> {
  const { createLogger } = await import('../ops/logger.js');
  const log = createLogger({ level: flags.logLevel });
  const unknown = unknownEnvironment(command, process.env);
  if (unknown.length > 0) log.warn({ variables: unknown }, 'environment variables named RILL_* that no option reads');
  const { values, sources } = effectiveConfiguration(command, redactedUrl);
  log.info({ config: values, from: sources }, 'configuration');
  const settings = settingsFrom(flags);
  checkServeFlags(flags);
  // Loaded here, not at the top: the client commands start without the server, its engines
  // and their modules (better-sqlite3, pg, jose, prom-client).
  const { openRillServer } = await import('../http/server.js');
  let rill: Awaited<ReturnType<typeof openRillServer>>;
  try {
    rill = await openRillServer({ settings, logger: log });
  } catch (error) {
    throw await startupMistake(error, flags);
  }
  rill.store.onFatal((error) => {
    // What a failed fsync covered may or may not be on disk, and a broken invariant leaves
    // memory untrusted: only a restart, reading the disk, can tell. Exit so that a
    // supervisor restarts the server.
    log.fatal({ err: error }, 'storage cannot continue; exiting');
    process.exit(1);
  });
  await rill.listen().catch(async (error: unknown) => {
    throw await startupMistake(error, flags);
  });
  const access = accessSummary(settings);
  if (!isAuthOn(settings.auth!) && !isLoopbackName(flags.host)) {
    log.warn({ host: flags.host }, `rill listens on ${flags.host}, beyond this machine, without auth: anyone who can reach it may read, write and delete every stream (see --auth-secret-file)`);
  }
  log.info({ ...buildInfo(), url: rill.url(), auth: isAuthOn(settings.auth!), metrics: rill.metricsUrl(), store: flags.store, data: flags.store === 'sqlite' ? flags.data : null, postgres: flags.store === 'postgres' ? redactedUrl(flags.postgresUrl ?? '') : null }, `rill listening on ${rill.url()} (${access})`);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal, shutdownDelayMs: flags.shutdownDelay }, flags.shutdownDelay > 0 ? 'not ready; draining after the shutdown delay' : 'draining');
    rill.close().then(
      () => {
        // What the bench reports per append: batches and round trips to the database.
        if (settings.store === 'postgres' && rill.store.stats) log.info({ postgres: rill.store.stats }, 'postgres store totals');
        log.info({ signal }, 'stopped');
        // Exit once the log line is out: process.exit drops what the log still buffers.
        log.flush(() => process.exit(0));
      },
      (error: unknown) => {
        log.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

export function buildProgram(): Command {
  const program = new Command('rill')
    .description('Durable streams server and toolkit')
    .version(versionLine(), '-V, --version')
    // Commander prints its own usage errors; main() turns them into exit code 2.
    .exitOverride();
  addServeOptions(program.command('serve').description('run the rill server'), process.env)
    .action((flags: ServeFlags, command: Command) => serve(flags, command));
  showEnvironmentInHelp(program.commands.find((c) => c.name() === 'serve')!);
  addClientCommands(program);
  addStreamCommands(program);
  addTxCommand(program);
  addSubsCommands(program);
  addAdminCommands(program);
  addTokenCommand(program);
  teachUsage(program);
  return program;
}

/**
 * After a usage error commander prints, the error in the one format and where the help of
 * that very command is, not the whole help: one line to read instead of seventy.
 */
function teachUsage(command: Command): void {
  const names: string[] = [];
  for (let c: Command | null = command; c !== null; c = c.parent) names.unshift(c.name());
  command
    .showHelpAfterError(`see \`${names.join(' ')} --help\``)
    .configureOutput({ outputError: (text, write) => write(`rill: USAGE: ${text.replace(/^error: /, '')}`) });
  command.commands.forEach(teachUsage);
}

/** `rill --version`: the package's version and the commit it was built from. */
function versionLine(): string {
  const { version, commit } = buildInfo();
  return `${version} (commit ${commit})`;
}

buildProgram()
  .parseAsync(process.argv)
  .catch((error: unknown) => {
    // --help and --version end here with 0; a usage error commander already printed, with 2.
    if (error instanceof CommanderError && !(error instanceof InvalidArgumentError)) process.exit(error.exitCode === 0 ? 0 : EXIT_USAGE);
    process.exit(reportFailure(error, process.argv.includes('--json')));
  });
