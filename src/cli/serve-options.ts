/**
 * The options of `rill serve` and the settings they make: one list, read by the command
 * itself (main.ts) and by the tests that run the server inside their own process
 * (test/helpers/server.ts), so that both take the same flags, variables and config files.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import { applyConfigFile, applyEnvironment, ConfigError, readConfigFile, repeatable } from '../ops/config.js';
import { LOG_LEVELS, type LogLevel } from '../ops/log-levels.js';
import { DEFAULT_SETTINGS, DEFAULT_SUBSCRIPTION_SETTINGS, type ServerSettings } from '../http/settings.js';
import { UsageError } from './errors.js';
import { MAX_USAGE_MAX_KEYS } from '../core/usage.js';
import { TOKEN_PROFILES, type TokenProfile } from '../auth/profile.js';
import { bytesOption, durationOption, parseNonNegativeInteger, parsePositiveInteger } from './units.js';

/** `on` (every request), `off`, or the share of requests to log, such as 0.1. */
function parseAccessLog(value: string): number {
  if (value === 'on') return 1;
  if (value === 'off') return 0;
  const rate = Number(value);
  if (!/^(0|1|0?\.\d+)$/.test(value) || rate < 0 || rate > 1) throw new InvalidArgumentError('expected on, off, or a share of requests from 0 to 1 such as 0.1');
  return rate;
}

/** A row bound of the usage record: a table of no rows could not count, one of millions is no longer small. */
function parseUsageMaxKeys(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1 || n > MAX_USAGE_MAX_KEYS) throw new InvalidArgumentError(`expected an integer from 1 to ${MAX_USAGE_MAX_KEYS}`);
  return n;
}

function parsePort(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('expected a port number from 0 to 65535');
  return n;
}

/**
 * The official Durable Streams client treats SSE connections that end this soon as
 * failures and, after three in a row, stops reading without an error (seen in issue 36):
 * a shorter lifetime would silently end every reader using that client.
 */
const SSE_LIFETIME_FLOOR = {
  minMs: 1000,
  reason: 'with shorter SSE connections the official Durable Streams client gives up SSE after three of them and ends its read silently',
};

export interface ServeFlags {
  host: string;
  port: number;
  data: string;
  store: 'sqlite' | 'memory' | 'postgres';
  postgresUrl?: string;
  postgresPoolSize: number;
  postgresStatementTimeout: number;
  postgresConnectTimeout: number;
  streamCache: number;
  streamCacheBytes: number;
  sqliteThread: 'on' | 'off';
  longPollTimeout: number;
  maxLongPollTimeout: number;
  sseLifetime: number;
  sseHeartbeat: number;
  sseMaxBuffered: number;
  maxBody: number;
  maxAppendMessages: number;
  usageMaxKeys: number;
  bucketMaxStreams: number;
  bucketMaxSubscriptions: number;
  bucketMaxBytes: number;
  minFreeDisk: number;
  maxSnapshotBytes: number;
  maxHeaderBytes: number;
  maxUrlBytes: number;
  headersTimeout: number;
  requestTimeout: number;
  drainTimeout: number;
  shutdownDelay: number;
  maxProducers: number;
  producerIdleEvict: number;
  producerTtl: number;
  maxLiveConnections: number;
  maxConnections: number;
  authSecretFile?: string;
  authJwksFile?: string;
  authJwksUrl?: string;
  authOidcIssuer?: string;
  authJwksCooldown: number;
  authJwksMaxAge: number;
  authProfile: TokenProfile;
  authIssuer?: string;
  authAudience?: string;
  authKeysCheck: number;
  authMaxTtl: number;
  authRevocationsCheck: number;
  quotaAppends: number;
  quotaCreates: number;
  quotaBytes: number;
  quotaLive: number;
  tlsCert?: string;
  tlsKey?: string;
  tlsMinVersion: '1.2' | '1.3';
  corsOrigin?: string[];
  allowedHost: string[];
  /** False with --no-console. */
  console: boolean;
  logLevel: LogLevel;
  accessLog: number;
  metrics: 'on' | 'off';
  metricsHost: string;
  metricsPort?: number;
  webhookAllowLocalhost: boolean;
  webhookTimeout: number;
  maxWebhookDeliveries: number;
  maxSubscriptions: number;
  maxSubscriptionStreams: number;
  subscriptionSweep: number;
  publicUrl?: string;
  coldStore?: string;
  coldHotBytes: number;
  coldHotAge: number;
  coldSegmentBytes: number;
  coldCacheBytes: number;
  coldMaxBacklog: number;
  coldUploadInterval: number;
  coldRetryMax: number;
}

function parsePublicUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidArgumentError('expected an http:// or https:// URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new InvalidArgumentError('expected an http:// or https:// URL');
  return value;
}

export function settingsFrom(flags: ServeFlags): Partial<ServerSettings> {
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
    streamCacheBytes: flags.streamCacheBytes,
    coldStore: flags.coldStore ?? null,
    cold: {
      hotBytes: flags.coldHotBytes,
      hotAgeMs: flags.coldHotAge,
      segmentBytes: flags.coldSegmentBytes,
      cacheBytes: flags.coldCacheBytes,
      maxBacklogBytes: flags.coldMaxBacklog,
      uploadIntervalMs: flags.coldUploadInterval,
      uploadRetryMaxMs: flags.coldRetryMax,
    },
    sqliteThread: flags.sqliteThread === 'on',
    longPollTimeoutMs: flags.longPollTimeout,
    maxLongPollTimeoutMs: flags.maxLongPollTimeout,
    sseLifetimeMs: flags.sseLifetime,
    sseHeartbeatMs: flags.sseHeartbeat,
    sseMaxBufferedBytes: flags.sseMaxBuffered,
    maxBodyBytes: flags.maxBody,
    maxAppendMessages: flags.maxAppendMessages,
    usageMaxKeys: flags.usageMaxKeys,
    bucketLimits: { maxStreams: flags.bucketMaxStreams, maxSubscriptions: flags.bucketMaxSubscriptions, maxBytes: flags.bucketMaxBytes },
    minFreeDiskBytes: flags.minFreeDisk,
    maxSnapshotBytes: flags.maxSnapshotBytes,
    maxHeaderBytes: flags.maxHeaderBytes,
    maxUrlBytes: flags.maxUrlBytes,
    headersTimeoutMs: flags.headersTimeout,
    requestTimeoutMs: flags.requestTimeout,
    drainTimeoutMs: flags.drainTimeout,
    shutdownDelayMs: flags.shutdownDelay,
    maxLiveConnections: flags.maxLiveConnections,
    maxConnections: flags.maxConnections,
    producers: { maxProducers: flags.maxProducers, idleEvictMs: flags.producerIdleEvict, forgetAfterMs: flags.producerTtl },
    auth: {
      secretFile: flags.authSecretFile ?? null,
      jwksFile: flags.authJwksFile ?? null,
      jwksUrl: flags.authJwksUrl ?? null,
      oidcIssuer: flags.authOidcIssuer ?? null,
      jwksCooldownMs: flags.authJwksCooldown,
      jwksMaxAgeMs: flags.authJwksMaxAge,
      profile: flags.authProfile,
      // An OpenID Connect issuer is also the iss its tokens must carry.
      issuer: flags.authIssuer ?? flags.authOidcIssuer ?? null,
      audience: flags.authAudience ?? null,
      keysCheckMs: flags.authKeysCheck,
      maxTtlMs: flags.authMaxTtl,
      revocationsCheckMs: flags.authRevocationsCheck,
      quotas: { appendsPerSecond: flags.quotaAppends, createsPerSecond: flags.quotaCreates, bytesPerSecond: flags.quotaBytes, liveConnections: flags.quotaLive },
    },
    tlsCertFile: flags.tlsCert ?? null,
    tlsKeyFile: flags.tlsKey ?? null,
    tlsMinVersion: flags.tlsMinVersion === '1.3' ? 'TLSv1.3' : 'TLSv1.2',
    corsOrigins: flags.corsOrigin ?? null,
    allowedHosts: flags.allowedHost,
    ...(flags.console ? {} : { consoleDir: null }),
    metrics: flags.metrics === 'on',
    metricsHost: flags.metricsHost,
    metricsPort: flags.metricsPort ?? null,
    accessLogRate: flags.accessLog,
    publicUrl: flags.publicUrl ?? null,
    subscriptions: {
      ...DEFAULT_SUBSCRIPTION_SETTINGS,
      limits: { ...DEFAULT_SUBSCRIPTION_SETTINGS.limits, maxSubscriptions: flags.maxSubscriptions, maxStreamsPerSubscription: flags.maxSubscriptionStreams },
      allowLocalhost: flags.webhookAllowLocalhost,
      deliveryTimeoutMs: flags.webhookTimeout,
      maxConcurrentDeliveries: flags.maxWebhookDeliveries,
      sweepIntervalMs: flags.subscriptionSweep,
    },
  };
}

/**
 * Declares every option of `rill serve` on `command`, with the hook that fills the options no
 * flag set from RILL_* variables of `env` and from the config file.
 */
export function addServeOptions(command: Command, env: NodeJS.ProcessEnv): Command {
  const d = DEFAULT_SETTINGS;
  const dc = DEFAULT_SETTINGS.cold;
  return command
    .option('--host <host>', 'address to listen on', d.host)
    .option('--port <port>', 'port to listen on', parsePort, d.port)
    .option('--data <dir>', 'data directory (sqlite store)', d.dataDir)
    .addOption(new Option('--store <engine>', 'storage engine').choices(['sqlite', 'memory', 'postgres']).default(d.store))
    .addOption(new Option('--postgres-url <url>', 'PostgreSQL database for --store postgres (postgres://user:password@host:5432/db)').env('RILL_POSTGRES_URL'))
    .option('--postgres-pool-size <n>', 'connections each node opens to PostgreSQL', parsePositiveInteger, d.postgresPoolSize)
    .addOption(durationOption('--postgres-statement-timeout <duration>', 'longest a PostgreSQL statement may run (the request then answers 503)', d.postgresStatementTimeoutMs))
    .addOption(durationOption('--postgres-connect-timeout <duration>', 'longest a request waits for a PostgreSQL connection before 503', d.postgresConnectTimeoutMs))
    .option('--stream-cache <n>', 'most stream states the sqlite store keeps in memory', parsePositiveInteger, d.streamCacheEntries)
    .addOption(bytesOption('--stream-cache-bytes <size>', 'memory the sqlite store\'s cached stream states may take, estimated (about 370 B for a plain stream; attributes count)', d.streamCacheBytes))
    .option('--cold-store <url>', 'move sealed history to S3-compatible object storage (s3://bucket/prefix; endpoint, region and credentials as AWS tools take them: AWS_ENDPOINT_URL_S3, AWS_REGION, AWS_ACCESS_KEY_ID, ...)')
    .addOption(bytesOption('--cold-hot-bytes <size>', "with --cold-store: a stream's last this many bytes stay in the hot store", dc.hotBytes, 0))
    .addOption(durationOption('--cold-hot-age <duration>', 'with --cold-store: bytes younger than this stay in the hot store (0: by bytes only)', dc.hotAgeMs))
    .addOption(bytesOption('--cold-segment-bytes <size>', 'with --cold-store: size of each object of sealed history', dc.segmentBytes))
    .addOption(bytesOption('--cold-cache-bytes <size>', 'with --cold-store: history read from object storage kept in memory', dc.cacheBytes, 0))
    .addOption(bytesOption('--cold-max-backlog <size>', 'with --cold-store: sealed bytes awaiting upload past which writes are refused with 507 (0: never)', dc.maxBacklogBytes, 0))
    .addOption(durationOption('--cold-upload-interval <duration>', 'with --cold-store: time between two passes of the uploader', dc.uploadIntervalMs))
    .addOption(durationOption('--cold-retry-max <duration>', 'with --cold-store: longest wait before retrying failed uploads (the wait doubles from 500ms up to it)', dc.uploadRetryMaxMs))
    .addOption(new Option('--sqlite-thread <on|off>', 'run the sqlite store on a thread of its own: large reads and writes never hold requests, small appends cost more CPU').choices(['on', 'off']).default(d.sqliteThread ? 'on' : 'off'))
    .addOption(durationOption('--long-poll-timeout <duration>', 'how long a long-poll waits for data', d.longPollTimeoutMs))
    .addOption(durationOption('--max-long-poll-timeout <duration>', 'longest long-poll wait a client may ask for (timeout_ms)', d.maxLongPollTimeoutMs))
    .addOption(durationOption('--sse-lifetime <duration>', 'how long an SSE connection stays open (at least 1s)', d.sseLifetimeMs, SSE_LIFETIME_FLOOR))
    .addOption(durationOption('--sse-heartbeat <duration>', 'SSE keep-alive interval; a reader taking nothing for this long is dropped', d.sseHeartbeatMs))
    .addOption(bytesOption('--sse-max-buffered <size>', 'most SSE output held unsent for one reader', d.sseMaxBufferedBytes))
    .addOption(bytesOption('--max-body <size>', 'largest append or create body', d.maxBodyBytes))
    .addOption(bytesOption('--min-free-disk <size>', 'below this much free disk space, writes are refused with 507 while deletes and retention still run (sqlite; 0: off)', d.minFreeDiskBytes, 0))
    .option('--max-append-messages <n>', 'most messages one append may carry (the elements of a JSON array)', parsePositiveInteger, d.maxAppendMessages)
    .option(`--usage-max-keys <n>`, `rows of the usage record (GET /usage) kept, one per bucket and token subject; past it the least recently active is folded into (other) (1 to ${MAX_USAGE_MAX_KEYS})`, parseUsageMaxKeys, d.usageMaxKeys)
    .addOption(bytesOption('--max-snapshot-bytes <size>', 'largest snapshot body', d.maxSnapshotBytes))
    .addOption(bytesOption('--max-header-bytes <size>', 'largest request head (request line and headers)', d.maxHeaderBytes))
    .addOption(bytesOption('--max-url-bytes <size>', 'longest request URL', d.maxUrlBytes))
    .addOption(durationOption('--headers-timeout <duration>', 'time allowed to receive request headers', d.headersTimeoutMs))
    .addOption(durationOption('--request-timeout <duration>', 'time allowed to receive a whole request', d.requestTimeoutMs))
    .addOption(durationOption('--drain-timeout <duration>', 'on SIGTERM, how long open requests may finish before connections are cut', d.drainTimeoutMs))
    .addOption(durationOption('--shutdown-delay <duration>', 'on SIGTERM, how long to go on serving with /readyz answering 503 before the drain begins', d.shutdownDelayMs))
    .option('--max-live-connections <n>', 'long-poll and SSE readers held at once', parsePositiveInteger, d.maxLiveConnections)
    .option('--max-connections <n>', 'connections open at once (a new one past it is answered 503 and closed)', parsePositiveInteger, d.maxConnections)
    .option('--max-producers <n>', 'producers remembered per stream', parsePositiveInteger, d.producers.maxProducers)
    .addOption(durationOption('--producer-idle-evict <duration>', 'idle time after which a producer may be replaced', d.producers.idleEvictMs))
    .addOption(durationOption('--producer-ttl <duration>', 'idle time after which a producer is forgotten', d.producers.forgetAfterMs))
    .option('--auth-secret-file <file>', 'turn auth on: verify HS256 tokens with the secret in this file (at least 32 bytes)')
    .option('--auth-jwks-file <file>', 'turn auth on: verify RS256/ES256/EdDSA tokens with the public keys (JWKS) in this file, chosen by kid')
    .option('--auth-jwks-url <url>', 'turn auth on: verify RS256/ES256/EdDSA tokens with the public keys (JWKS) fetched from this https URL, chosen by kid')
    .option('--auth-oidc-issuer <url>', 'turn auth on: verify tokens of this OpenID Connect issuer (https), with the keys its discovery document names; iss must be it')
    .addOption(durationOption('--auth-jwks-cooldown <duration>', 'with --auth-jwks-url or --auth-oidc-issuer: shortest time between two fetches for a token with an unknown kid', d.auth.jwksCooldownMs))
    .addOption(durationOption('--auth-jwks-max-age <duration>', 'with --auth-jwks-url or --auth-oidc-issuer: how long fetched keys are used before they are fetched again', d.auth.jwksMaxAgeMs))
    .addOption(new Option('--auth-profile <profile>', 'what tokens must carry: default, or strict (typ at+jwt, and sub, iat, exp and jti)').choices(TOKEN_PROFILES).default('default'))
    .option('--auth-issuer <iss>', 'accept only tokens with this issuer (iss)')
    .option('--auth-audience <aud>', 'accept only tokens with this audience (aud)')
    .addOption(durationOption('--auth-keys-check <duration>', 'how often the key files are checked for changes (rotation)', d.auth.keysCheckMs))
    .addOption(durationOption('--auth-max-ttl <duration>', 'refuse tokens that live longer than this (exp - iat) or have no exp', d.auth.maxTtlMs))
    .addOption(durationOption('--auth-revocations-check <duration>', 'how often revocations are re-read from the store (other nodes\' revocations apply within it)', d.auth.revocationsCheckMs))
    .option('--quota-appends <n>', 'messages written per second per token subject: an append-batch or JSON array of N costs N (0: unlimited)', parseNonNegativeInteger, 0)
    .option('--quota-creates <n>', 'stream creates, forks and subscription creates per second per token subject (0: unlimited)', parseNonNegativeInteger, 0)
    .option('--quota-bytes <n>', 'body bytes per second per token subject (0: unlimited)', parseNonNegativeInteger, 0)
    .option('--quota-live <n>', 'long-poll and SSE readers per token subject (0: unlimited)', parseNonNegativeInteger, 0)
    .option('--tls-cert <file>', 'serve HTTPS with this certificate (PEM; with --tls-key)')
    .option('--tls-key <file>', 'the private key of --tls-cert (PEM)')
    .addOption(new Option('--tls-min-version <version>', 'oldest TLS version served').choices(['1.2', '1.3']).default('1.2'))
    .option('--cors-origin <origin>', 'an origin whose pages may call rill, or * for any (repeatable; default: loopback pages with auth off, any with auth on)', repeatable)
    .option('--allowed-host <host>', 'a Host name served besides loopback ones when listening on loopback (repeatable)', repeatable, [])
    .option('--no-console', 'do not serve the web console at /console/')
    .option('--public-url <url>', 'the URL clients reach this server at (behind a proxy), for the callback and JWK Set URLs it hands out', parsePublicUrl)
    .option('--webhook-allow-localhost', 'development only: let subscription webhooks go to localhost, over http too (off: https to public addresses only)', false)
    .addOption(durationOption('--webhook-timeout <duration>', 'longest a webhook endpoint may take to answer a delivery', d.subscriptions.deliveryTimeoutMs))
    .option('--max-webhook-deliveries <n>', 'webhook deliveries in flight at once', parsePositiveInteger, d.subscriptions.maxConcurrentDeliveries)
    .option('--bucket-max-streams <n>', 'streams one bucket may hold (0: unlimited)', parseNonNegativeInteger, 0)
    .option('--bucket-max-subscriptions <n>', 'subscriptions one bucket may hold (0: unlimited)', parseNonNegativeInteger, 0)
    .addOption(bytesOption('--bucket-max-bytes <size>', "bytes one bucket's streams may retain; a write past it is refused with 507 (0: unlimited)", 0, 0))
    .option('--max-subscriptions <n>', 'subscriptions the server holds', parsePositiveInteger, d.subscriptions.limits.maxSubscriptions)
    .option('--max-subscription-streams <n>', 'streams one subscription may hold', parsePositiveInteger, d.subscriptions.limits.maxStreamsPerSubscription)
    .addOption(durationOption('--subscription-sweep <duration>', 'how often due webhook retries, expired leases and missed wakes are looked for', d.subscriptions.sweepIntervalMs))
    // Operations: logs, metrics, config file.
    .addOption(new Option('--log-level <level>', 'least severe log level written').choices(LOG_LEVELS).default('info'))
    .addOption(
      new Option('--access-log <on|off|share>', 'one log line per request: on, off, or the share of requests to log (0.1); a 5xx is always logged')
        .argParser(parseAccessLog)
        .default(d.accessLogRate, 'on'),
    )
    .addOption(new Option('--metrics <on|off>', 'keep Prometheus metrics and serve /metrics').choices(['on', 'off']).default('on'))
    .option('--metrics-host <host>', 'address of the metrics listener (with --metrics-port)', d.metricsHost)
    .option('--metrics-port <port>', 'serve /metrics on this port instead of the main one', parsePort)
    .option('--config <file>', 'read settings from a TOML or JSON file (keys are these flags without "--"); flags and RILL_* variables win')
    .addHelpText('after', `
Durations need a unit: ms, s, m, h or d (30s, not 30); sizes take KiB, MiB or GiB (a bare number is bytes).`)
    // Every flag also comes from RILL_<FLAG> and from the --config file (ops/config.ts),
    // flags declared above and any declared later alike.
    .hook('preAction', async (command) => {
      try {
        applyEnvironment(command, env);
        const path = (command.opts().config as string | undefined) ?? env.RILL_CONFIG;
        if (path !== undefined) applyConfigFile(command, path, await readConfigFile(path));
      } catch (error) {
        // A bad variable or file is the operator's mistake, as a bad flag is: a usage error (exit 2).
        if (error instanceof ConfigError) throw new UsageError(error.message);
        throw error;
      }
    });
}

/** What `rill serve ARGS` would run with, given the environment `env`. Throws UsageError as the command would exit 2. */
export async function serveSettingsOf(args: string[], env: NodeJS.ProcessEnv): Promise<{ flags: ServeFlags; settings: Partial<ServerSettings> }> {
  let flags: ServeFlags | undefined;
  const command = addServeOptions(new Command('serve'), env)
    .exitOverride()
    .configureOutput({ writeErr: () => undefined, writeOut: () => undefined })
    .action((parsed: ServeFlags) => {
      flags = parsed;
    });
  try {
    await command.parseAsync(args, { from: 'user' });
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw new UsageError((error as Error).message);
  }
  return { flags: flags!, settings: settingsFrom(flags!) };
}
