#!/usr/bin/env node
/** The `rill` command. */
import { Command, InvalidArgumentError, Option } from 'commander';
import { pino } from 'pino';
import { openRillServer } from '../http/server.js';
import { PostgresStore, redactedUrl } from '../storage/postgres/engine.js';
import { DEFAULT_SETTINGS, type ServerSettings } from '../http/settings.js';
import { addClientCommands } from './client-commands.js';

const UNITS_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Durations: a number with a unit (ms, s, m, h, d); a bare number is milliseconds. */
export function parseDurationMs(value: string): number {
  const match = /^(\d+)(ms|s|m|h|d)?$/.exec(value.trim());
  if (!match) throw new InvalidArgumentError('expected a duration such as 500ms, 30s, 1h or 7d');
  return Number(match[1]) * UNITS_MS[match[2] ?? 'ms']!;
}

function parseCount(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError('expected a positive integer');
  return n;
}

function parsePort(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('expected a port number from 0 to 65535');
  return n;
}

interface ServeFlags {
  host: string;
  port: number;
  data: string;
  store: 'sqlite' | 'memory' | 'postgres';
  postgresUrl?: string;
  postgresPoolSize: number;
  postgresStatementTimeout: number;
  postgresConnectTimeout: number;
  streamCache: number;
  longPollTimeout: number;
  maxLongPollTimeout: number;
  sseLifetime: number;
  sseHeartbeat: number;
  sseMaxBuffered: number;
  maxBody: number;
  maxSnapshotBytes: number;
  maxHeaderBytes: number;
  maxUrlBytes: number;
  headersTimeout: number;
  requestTimeout: number;
  drainTimeout: number;
  maxProducers: number;
  producerIdleEvict: number;
  producerTtl: number;
  maxLiveConnections: number;
  maxConnections: number;
}

function settingsFrom(flags: ServeFlags): Partial<ServerSettings> {
  return {
    host: flags.host,
    port: flags.port,
    dataDir: flags.data,
    store: flags.store,
    postgresUrl: flags.postgresUrl ?? null,
    postgresPoolSize: flags.postgresPoolSize,
    postgresStatementTimeoutMs: flags.postgresStatementTimeout,
    postgresConnectTimeoutMs: flags.postgresConnectTimeout,
    streamCacheEntries: flags.streamCache,
    longPollTimeoutMs: flags.longPollTimeout,
    maxLongPollTimeoutMs: flags.maxLongPollTimeout,
    sseLifetimeMs: flags.sseLifetime,
    sseHeartbeatMs: flags.sseHeartbeat,
    sseMaxBufferedBytes: flags.sseMaxBuffered,
    maxBodyBytes: flags.maxBody,
    maxSnapshotBytes: flags.maxSnapshotBytes,
    maxHeaderBytes: flags.maxHeaderBytes,
    maxUrlBytes: flags.maxUrlBytes,
    headersTimeoutMs: flags.headersTimeout,
    requestTimeoutMs: flags.requestTimeout,
    drainTimeoutMs: flags.drainTimeout,
    maxLiveConnections: flags.maxLiveConnections,
    maxConnections: flags.maxConnections,
    producers: { maxProducers: flags.maxProducers, idleEvictMs: flags.producerIdleEvict, forgetAfterMs: flags.producerTtl },
  };
}

async function serve(flags: ServeFlags): Promise<void> {
  const log = pino({ level: process.env.RILL_LOG_LEVEL ?? 'info' });
  const rill = await openRillServer({ settings: settingsFrom(flags), logger: log });
  rill.store.onFatal((error) => {
    // What a failed fsync covered may or may not be on disk, and a broken invariant leaves
    // memory untrusted: only a restart, reading the disk, can tell. Exit so that a
    // supervisor restarts the server.
    log.fatal({ err: error }, 'storage cannot continue; exiting');
    process.exit(1);
  });
  await rill.listen();
  log.info({ url: rill.url(), store: flags.store, data: flags.store === 'sqlite' ? flags.data : null, postgres: flags.store === 'postgres' ? redactedUrl(flags.postgresUrl ?? '') : null }, `rill listening on ${rill.url()}`);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'draining');
    rill.close().then(
      () => {
        // What the bench reports per append: batches and round trips to the database.
        if (rill.store instanceof PostgresStore) log.info({ postgres: rill.store.stats }, 'postgres store totals');
        process.exit(0);
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
  const d = DEFAULT_SETTINGS;
  const program = new Command('rill').description('Durable streams server and toolkit').showHelpAfterError();
  program
    .command('serve')
    .description('run the rill server')
    .option('--host <host>', 'address to listen on', d.host)
    .option('--port <port>', 'port to listen on', parsePort, d.port)
    .option('--data <dir>', 'data directory (sqlite store)', d.dataDir)
    .addOption(new Option('--store <engine>', 'storage engine').choices(['sqlite', 'memory', 'postgres']).default(d.store))
    .addOption(new Option('--postgres-url <url>', 'PostgreSQL database for --store postgres (postgres://user:password@host:5432/db)').env('RILL_POSTGRES_URL'))
    .option('--postgres-pool-size <n>', 'connections each node opens to PostgreSQL', parseCount, d.postgresPoolSize)
    .option('--postgres-statement-timeout <duration>', 'longest a PostgreSQL statement may run (the request then answers 503)', parseDurationMs, d.postgresStatementTimeoutMs)
    .option('--postgres-connect-timeout <duration>', 'longest a request waits for a PostgreSQL connection before 503', parseDurationMs, d.postgresConnectTimeoutMs)
    .option('--stream-cache <n>', 'stream states the sqlite store keeps in memory (about 1.2 KB each)', parseCount, d.streamCacheEntries)
    .option('--long-poll-timeout <duration>', 'how long a long-poll waits for data', parseDurationMs, d.longPollTimeoutMs)
    .option('--max-long-poll-timeout <duration>', 'longest long-poll wait a client may ask for (timeout_ms)', parseDurationMs, d.maxLongPollTimeoutMs)
    .option('--sse-lifetime <duration>', 'how long an SSE connection stays open', parseDurationMs, d.sseLifetimeMs)
    .option('--sse-heartbeat <duration>', 'SSE keep-alive interval; a reader taking nothing for this long is dropped', parseDurationMs, d.sseHeartbeatMs)
    .option('--sse-max-buffered <bytes>', 'most SSE output held unsent for one reader', parseCount, d.sseMaxBufferedBytes)
    .option('--max-body <bytes>', 'largest append or create body in bytes', parseCount, d.maxBodyBytes)
    .option('--max-snapshot-bytes <bytes>', 'largest snapshot body in bytes', parseCount, d.maxSnapshotBytes)
    .option('--max-header-bytes <bytes>', 'largest request head (request line and headers) in bytes', parseCount, d.maxHeaderBytes)
    .option('--max-url-bytes <bytes>', 'longest request URL in bytes', parseCount, d.maxUrlBytes)
    .option('--headers-timeout <duration>', 'time allowed to receive request headers', parseDurationMs, d.headersTimeoutMs)
    .option('--request-timeout <duration>', 'time allowed to receive a whole request', parseDurationMs, d.requestTimeoutMs)
    .option('--drain-timeout <duration>', 'on SIGTERM, how long open requests may finish before connections are cut', parseDurationMs, d.drainTimeoutMs)
    .option('--max-live-connections <n>', 'long-poll and SSE readers held at once', parseCount, d.maxLiveConnections)
    .option('--max-connections <n>', 'connections open at once (a new one past it is answered 503 and closed)', parseCount, d.maxConnections)
    .option('--max-producers <n>', 'producers remembered per stream', parseCount, d.producers.maxProducers)
    .option('--producer-idle-evict <duration>', 'idle time after which a producer may be replaced', parseDurationMs, d.producers.idleEvictMs)
    .option('--producer-ttl <duration>', 'idle time after which a producer is forgotten', parseDurationMs, d.producers.forgetAfterMs)
    .action((flags: ServeFlags) => serve(flags));
  addClientCommands(program);
  return program;
}

buildProgram()
  .parseAsync(process.argv)
  .catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  });
