/**
 * The `node:http` front door: limits, routing, and the mapping of routes to handlers.
 * A request can never crash the server: every handler failure is answered with a JSON
 * error and logged.
 */
import { hostname } from 'node:os';
import { RecordMarks } from '../live/records.js';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import type { Server as TlsServer } from 'node:tls';
import type { Logger } from 'pino';
import { LiveHub } from '../live/hub.js';
import { buildInfo } from '../ops/build-info.js';
import { LiveReaders } from '../ops/live-readers.js';
import { UsageTable } from '../core/usage.js';
import { createLogger, redactUrl } from '../ops/logger.js';
import { RillMetrics } from '../ops/metrics.js';
import { requestIdOf, RequestLog, setRouteTemplate } from '../ops/request-log.js';
import { protocolError, statusOf, type ProtocolError } from '../protocol/errors.js';
import { repeatedHeaderError } from '../protocol/parse.js';
import { storageRefusal } from '../storage/errors.js';
import { openStore, openStoreNow } from '../storage/open.js';
import type { Store } from '../storage/store.js';
import { BucketSettingsCache } from './bucket-settings.js';
import { AccessControl, guardsSubscriptionRoute, type Admission } from './access.js';
import { refuseSharedKeyFile } from '../auth/key-files.js';
import { HSTS, readCertificate, watchCertificate } from './tls.js';
import { handleRevocations } from './revocations.js';
import { handleAdmin, handleStreamProducers, handleStreamStats, metricsServer, StorageHealth } from './admin.js';
import { BrowserPolicy } from './browsers.js';
import { handleBucket, handleListStreams } from './buckets.js';
import { handleConsole, isConsolePath } from './console.js';
import type { HandlerContext } from './context.js';
import { handleRead } from './reads.js';
import { ALLOWED_METHODS, CORS_METHODS, originOf, send, sendBodyRefusal, sendError, sendJson } from './response.js';
import { route, routeTemplate, type Route, type StreamAddress } from './router.js';
import { handleAppendBatch, handleGetAttrs, handlePutAttrs } from './attrs-batch.js';
import { handleBootstrap, handlePublishSnapshot, handleReadSnapshot, handleRetention } from './snapshots.js';
import { DEFAULT_SETTINGS, isAuthOn, type ServerSettings } from './settings.js';
import { ConnectionGuard, writeRefusalAndClose } from './connections.js';
import { StorageFailureLog } from './failure-log.js';
import { handleTransaction } from './transaction.js';
import { handleAppend, handleCreate, handleDelete, handleHead } from './writes.js';
import { presetAddressExtensions, presetTransactionExtensions } from './stream-headers.js';
import { handleSubscriptions } from './subscriptions.js';
import { CreateGate } from './bucket-limits.js';
import { BucketBytes } from './bucket-bytes.js';
import { nodeNameOf, SubscriptionService } from '../subscriptions/service.js';

export interface RillServer {
  readonly server: Server;
  readonly store: Store;
  readonly settings: ServerSettings;
  /** Base URL once listening. */
  url(): string;
  /** Where `/metrics` is served when it has its own address (`--metrics-port`); null otherwise. */
  metricsUrl(): string | null;
  listen(): Promise<void>;
  /** Stops accepting, finishes in-flight requests, ends live readers, closes storage. */
  close(): Promise<void>;
}

export interface CreateServerOptions {
  settings?: Partial<ServerSettings>;
  logger?: Logger;
  store?: Store;
  /** The wall clock (ms) the server judges time by: tokens, TTLs, live reads. Tests pass one they control. */
  now?: () => number;
  /** The variables the cold tier's object store reads (AWS_*), when not process.env's: a test's server in its own process. */
  objectStoreEnv?: NodeJS.ProcessEnv;
}

/** SQLite's disk-space changes, logged when they happen (never per refusal). */
function diskSpaceLog(settings: ServerSettings, log: Logger): (full: boolean, freeBytes: number) => void {
  return (full, freeBytes) => {
    if (full) log.warn({ freeBytes, minFreeDiskBytes: settings.minFreeDiskBytes }, 'disk space is low: writes are refused with 507 until space returns (deletes and retention still work)');
    else log.warn({ freeBytes }, 'disk space returned: writes are accepted again');
  };
}

/** createRillServer, for every store: one whose opening takes I/O (PostgreSQL) is opened first. */
export async function openRillServer(options: CreateServerOptions = {}): Promise<RillServer> {
  const settings: ServerSettings = { ...DEFAULT_SETTINGS, ...options.settings };
  const log = options.logger ?? createLogger({ level: 'info' });
  const store =
    options.store ??
    (await openStore(settings, {
      nowMs: options.now ?? Date.now,
      onDiskSpace: diskSpaceLog(settings, log),
      onColdError: (error) => log.warn({ err: error, coldStore: settings.coldStore }, 'cold tier: an upload pass failed; it is retried with backoff, and the hot store keeps the bytes meanwhile'),
      ...(options.objectStoreEnv === undefined ? {} : { objectStoreEnv: options.objectStoreEnv }),
    }));
  return createRillServer({ ...options, logger: log, store });
}

/** Handlers answer synchronously or with a promise; plain functions here add no promise of their own. */
type Handled = Promise<void> | void;

function dispatchStream(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, address: StreamAddress, search: string): Handled {
  switch (req.method) {
    case 'PUT':
      return handleCreate(req, res, ctx, address);
    case 'POST':
      return handleAppend(req, res, ctx, address);
    case 'GET':
      return handleRead(req, res, ctx, address, search);
    case 'HEAD':
      return handleHead(req, res, ctx, address);
    case 'DELETE':
      return handleDelete(req, res, ctx, address);
    default:
      return sendError(res, protocolError('METHOD_NOT_ALLOWED', `${req.method} is not allowed on a stream`), { allow: ALLOWED_METHODS });
  }
}

function preflight(req: IncomingMessage, res: ServerResponse): void {
  // An origin not allowed gets no CORS headers at all: the browser then refuses the call.
  if (originOf(res) === undefined) return send(res, 204, { 'cache-control': 'no-store' });
  const requested = req.headers['access-control-request-headers'];
  send(res, 204, {
    'access-control-allow-methods': CORS_METHODS,
    'access-control-allow-headers': typeof requested === 'string' && requested.length > 0 ? requested : '*',
    // Ten minutes: a change of the allowed origins reaches browsers soon.
    'access-control-max-age': '600',
    'cache-control': 'no-store',
  });
}

function dispatch(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext): Handled {
  ctx.browsers.tagOrigin(req);
  const refusedHost = ctx.browsers.hostRefusal(req);
  if (refusedHost) return sendError(res, refusedHost);
  // Before any route: a cross-site write is refused whatever it targets, its body unread.
  const refusedOrigin = ctx.browsers.originRefusal(req);
  if (refusedOrigin) return sendBodyRefusal(res, refusedOrigin);
  const rawUrl = req.url ?? '/';
  if (Buffer.byteLength(rawUrl) > ctx.settings.maxUrlBytes) {
    res.setHeader('connection', 'close');
    return sendError(res, protocolError('URI_TOO_LONG', `the URL is longer than ${ctx.settings.maxUrlBytes} bytes`));
  }
  const q = rawUrl.indexOf('?');
  const pathname = q < 0 ? rawUrl : rawUrl.slice(0, q);
  const search = q < 0 ? '' : rawUrl.slice(q + 1);
  const target = route(pathname, search);
  setRouteTemplate(res, routeTemplate(target));
  if (req.method === 'OPTIONS') return preflight(req, res);
  if (target.kind === 'stream' || target.kind === 'stream-ext') presetAddressExtensions(res, target.stream);
  else if (target.kind === 'transaction') presetTransactionExtensions(res);
  const repeated = repeatedHeaderError(req.rawHeaders, Object.keys(req.headers).length);
  if (repeated) return sendError(res, repeated);
  // The web console: static files, public like any page's assets, before the stream routes.
  if (ctx.settings.consoleDir !== null && isConsolePath(pathname)) {
    setRouteTemplate(res, '/console/');
    return handleConsole(req, res, ctx.settings.consoleDir, pathname);
  }
  // Liveness and readiness answer without a token: probes carry none.
  if (target.kind === 'health') return sendJson(res, 200, { status: ctx.hub.isDraining ? 'draining' : 'ok', ...buildInfo() });
  if (target.kind === 'admin' && target.name === 'readyz') return handleAdmin(req, res, ctx, target.name, search);
  if (!ctx.access.on) return serve(req, res, ctx, target, search);
  // The JWK Set is public; a webhook's callback and a worker's ack or release carry the wake token, not an access token.
  if (target.kind === 'subscriptions' && !guardsSubscriptionRoute(target)) return serve(req, res, ctx, target, search);
  const admission = ctx.access.admit(req, res, target, search, ctx.now());
  return admission instanceof Promise ? admission.then((a) => serveAdmitted(req, res, ctx, a)) : serveAdmitted(req, res, ctx, admission);
}

function serveAdmitted(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, admission: Admission): Handled {
  if (!admission.ok) return sendError(res, admission.error, admission.headers);
  return serve(req, res, ctx, admission.route, admission.search);
}

function serve(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, target: Route, search: string): Handled {
  switch (target.kind) {
    case 'error':
      return sendError(res, target.error);
    case 'health':
      return sendJson(res, 200, { status: ctx.hub.isDraining ? 'draining' : 'ok' });
    case 'admin':
      return handleAdmin(req, res, ctx, target.name, search);
    case 'bucket':
      return handleBucket(req, res, ctx, target.bucket);
    case 'bucket-streams':
      return handleListStreams(req, res, ctx, target.bucket, search);
    case 'stream':
      return dispatchStream(req, res, ctx, target.stream, search);
    case 'stream-ext':
      return dispatchExtension(req, res, ctx, target, search);
    case 'transaction':
      return handleTransaction(req, res, ctx, target);
    case 'subscriptions':
      return handleSubscriptions(req, res, ctx, target, search);
    case 'revocations':
      return handleRevocations(req, res, ctx);
  }
}

function dispatchExtension(
  req: IncomingMessage,
  res: ServerResponse,
  ctx: HandlerContext,
  target: Extract<Route, { kind: 'stream-ext' }>,
  search: string,
): Handled {
  const { stream, ext, arg } = target;
  const method = req.method === 'HEAD' ? 'GET' : req.method;
  const handlers: Record<string, (() => Promise<void>) | undefined> = {
    'snapshot GET': () => handleReadSnapshot(req, res, ctx, stream, arg),
    'snapshot PUT': () => handlePublishSnapshot(req, res, ctx, stream, arg, search),
    'retention PUT': () => handleRetention(req, res, ctx, stream, arg, search),
    'bootstrap GET': () => handleBootstrap(req, res, ctx, stream, search),
    'attrs GET': () => handleGetAttrs(req, res, ctx, stream),
    'attrs PUT': () => handlePutAttrs(req, res, ctx, stream),
    'append-batch POST': () => handleAppendBatch(req, res, ctx, stream),
    'stats GET': arg === null ? () => handleStreamStats(res, ctx, stream) : undefined,
    'producers GET': arg === null ? () => handleStreamProducers(res, ctx, stream, search) : undefined,
  };
  const handler = handlers[`${ext} ${method}`];
  if (handler) return handler();
  return sendError(res, protocolError('METHOD_NOT_ALLOWED', `${req.method} is not allowed on ${ext}${arg === null ? '' : '/{offset}'}`));
}

function failureOf(error: unknown): ProtocolError {
  return storageRefusal(error) ?? protocolError('INTERNAL', 'the server failed to process the request');
}

/** The refusal for a request Node's parser gave up on. */
function clientErrorRefusal(code: string | undefined): ProtocolError {
  if (code === 'HPE_HEADER_OVERFLOW') return protocolError('HEADERS_TOO_LARGE', 'the request headers are too large');
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return protocolError('REQUEST_TIMEOUT', 'the request took too long to arrive');
  return protocolError('BAD_REQUEST', 'the request is not valid HTTP');
}

/** Answers requests Node's parser refuses (malformed, oversized, too slow) with our JSON error. */
function onClientError(error: Error & { code?: string }, socket: Socket): void {
  if (!socket.writable) return void socket.destroy();
  refuseAfterAnswers(error, socket);
}

/**
 * Whole valid requests that came before what the parser refused are answered first, in
 * order (Node queues pipelined responses and hands the socket to the next as each
 * finishes), then the refusal, then the connection closes. A request still arriving (a
 * timeout cut it) or an answer cut short drops the connection.
 */
function refuseAfterAnswers(error: Error & { code?: string }, socket: Socket): void {
  const inFlight = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (!inFlight) return refuseAndClose(error, socket);
  if (!inFlight.req.complete || inFlight.destroyed) return void socket.destroy();
  inFlight.once('finish', () => refuseAfterAnswers(error, socket));
  inFlight.once('close', () => {
    if (!inFlight.writableFinished) socket.destroy();
  });
}

/** Writes the JSON refusal of what Node's parser gave up on, and closes the connection. */
function refuseAndClose(error: Error & { code?: string }, socket: Socket): void {
  writeRefusalAndClose(socket, clientErrorRefusal(error.code));
}

/**
 * Node checks header and request timeouts only every `connectionsCheckingInterval`
 * (30 s by default), so a slow-header client would get up to 30 s more than the limit.
 * Check a few times per limit instead.
 */
function timeoutOptions(settings: ServerSettings) {
  const requestTimeout = settings.requestTimeoutMs;
  // Node refuses a header timeout longer than the request timeout.
  const headersTimeout = requestTimeout > 0 ? Math.min(settings.headersTimeoutMs, requestTimeout) : settings.headersTimeoutMs;
  const shortest = Math.min(...[headersTimeout, requestTimeout].filter((ms) => ms > 0), 120_000);
  const connectionsCheckingInterval = Math.max(50, Math.min(30_000, Math.floor(shortest / 4)));
  return { headersTimeout, requestTimeout, connectionsCheckingInterval };
}

/** The responses a connection has in flight (more than one only when requests are pipelined). */
const IN_FLIGHT = Symbol('rill.inFlightResponses');
type TrackedSocket = Socket & { [IN_FLIGHT]?: ServerResponse[] };

/**
 * Shutdown of the HTTP side: stop listening, let requests in flight finish with
 * `Connection: close` (so keep-alive clients cannot keep the process up or send more),
 * and cut whatever is still open after the drain timeout.
 *
 * Responses in flight are listed on their connection, not in one server-wide Set. With a
 * Set gaining and losing an entry per request, V8 promoted every request's objects out of
 * the young generation, to be freed only by full collections (`--trace-gc-nvp`: 2 MB
 * promoted per scavenge at 25k appends/s, 0.4 MB without it; appends +16-24%). A Set
 * alone on a bare node:http server did not do this; a long-lived one whose tables reach
 * the old generation keeps what they point at alive until a full collection.
 */
class Drain {
  private readonly connections = new Set<TrackedSocket>();
  private draining = false;

  constructor(
    private readonly server: Server,
    private readonly timeoutMs: number,
    connectionEvent: 'connection' | 'secureConnection',
  ) {
    server.on(connectionEvent, (socket: TrackedSocket) => {
      socket[IN_FLIGHT] = [];
      this.connections.add(socket);
      socket.once('close', () => this.connections.delete(socket));
    });
  }

  /** Follows the response until it closes; then `ended` (the request's log line and metrics) runs. */
  track(req: IncomingMessage, res: ServerResponse, ended: (() => void) | null): void {
    if (this.draining) res.setHeader('connection', 'close');
    // The request's socket: a pipelined response is given its socket only when its turn comes.
    const list = (req.socket as TrackedSocket)[IN_FLIGHT];
    list?.push(res);
    // 'on', not 'once': a response emits 'close' once (Node guards it), and 'once' wraps the
    // listener in a closure and removes it again, work for nothing on every request.
    res.on('close', () => {
      ended?.();
      const at = list?.indexOf(res) ?? -1;
      if (at >= 0) list!.splice(at, 1);
      // A keep-alive connection whose response ended during the drain is idle now.
      if (this.draining) setImmediate(() => this.server.closeIdleConnections());
    });
  }

  async run(endLiveReaders: () => void): Promise<void> {
    this.draining = true;
    for (const socket of this.connections) {
      for (const res of socket[IN_FLIGHT] ?? []) if (!res.headersSent) res.setHeader('connection', 'close');
    }
    endLiveReaders();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    const deadline = setTimeout(() => this.server.closeAllConnections(), this.timeoutMs);
    try {
      await closed;
    } finally {
      clearTimeout(deadline);
    }
  }
}

/** Plain HTTP, or HTTPS when the settings name a certificate and its key. */
function createHttpServer(settings: ServerSettings, listener: (req: IncomingMessage, res: ServerResponse) => void): { server: Server; tls: boolean } {
  const options = { maxHeaderSize: settings.maxHeaderBytes, ...timeoutOptions(settings), keepAliveTimeout: 5_000 };
  if ((settings.tlsCertFile === null) !== (settings.tlsKeyFile === null)) throw new Error('TLS needs both --tls-cert and --tls-key');
  if (settings.tlsCertFile === null || settings.tlsKeyFile === null) return { server: createServer(options, listener), tls: false };
  const files = { certFile: settings.tlsCertFile, keyFile: settings.tlsKeyFile };
  const tls = { ...readCertificate(files), handshakeTimeout: settings.headersTimeoutMs, minVersion: settings.tlsMinVersion };
  // An https.Server is a tls.Server serving the same HTTP requests: everything rill uses of
  // it (listen, close, address, connections, request events) has the same shape.
  return { server: createHttpsServer({ ...options, ...tls }, listener) as unknown as Server, tls: true };
}

function urlOf(server: Server, tls = false): string {
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the server is not listening');
  return `${tls ? 'https' : 'http'}://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;
}

function listenOn(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** What operations add to a server: metrics, live-reader counts, readiness and the request log. */
function operations(settings: ServerSettings, store: Store, hub: LiveHub, log: Logger) {
  const live = new LiveReaders();
  const usage = new UsageTable(settings.usageMaxKeys);
  const metrics = settings.metrics ? new RillMetrics({ store, live, usage }) : null;
  if (metrics) store.observe(metrics);
  const storageHealth = new StorageHealth(store);
  const ops = {
    live,
    usage,
    metrics,
    /** Set once the server listens; /readyz answers 503 'starting' until then. */
    started: false,
    /** When it began to listen, for /stats. */
    startedAtMs: null as number | null,
    /** Set when close() begins, before the drain: /readyz answers 503 'draining' from then on. */
    leaving: false,
    readiness: { started: () => ops.started, startedAtMs: () => ops.startedAtMs, draining: () => ops.leaving || hub.isDraining, storageFailing: () => storageHealth.failing },
    requests: new RequestLog({ log, metrics, accessLogRate: settings.accessLogRate }),
    metricsListener: metrics && settings.metricsPort !== null ? metricsServer(metrics) : null,
  };
  return ops;
}

export function createRillServer(options: CreateServerOptions = {}): RillServer {
  const settings: ServerSettings = { ...DEFAULT_SETTINGS, ...options.settings };
  const log = options.logger ?? createLogger({ level: 'info' });
  const now = options.now ?? Date.now;
  // Key files are read before anything opens, so a bad one stops the start with nothing to undo.
  const access = new AccessControl(settings.auth, now());
  if (settings.tlsKeyFile !== null) refuseSharedKeyFile(settings.tlsKeyFile, 'the TLS private key');
  const browsers = new BrowserPolicy({ corsOrigins: settings.corsOrigins, authOn: isAuthOn(settings.auth), listenHost: settings.host, allowedHosts: settings.allowedHosts, tls: settings.tlsCertFile !== null, publicUrl: settings.publicUrl });
  const store = options.store ?? openStoreNow(settings, { nowMs: now, onDiskSpace: diskSpaceLog(settings, log) });
  access.keepRevocationsIn(store);
  const bucketSettings = BucketSettingsCache.of(store, now);
  access.readBucketSettingsFrom(bucketSettings);
  const hub = new LiveHub(store, settings.maxLiveConnections, settings.remoteCheckMs);
  const storageFailures = new StorageFailureLog(log, Date.now);
  const ops = operations(settings, store, hub, log);
  const { metrics, requests, metricsListener } = ops;
  let baseUrl = '';
  const subscriptions = new SubscriptionService(store, { ...settings.subscriptions, observer: metrics, nowMs: now, log, baseUrl: () => baseUrl });
  const ctx: HandlerContext = { store, hub, settings, log, metrics, live: ops.live, usage: ops.usage, readiness: ops.readiness, now, access, browsers, subscriptions, recordMarks: new RecordMarks(), creates: new CreateGate(), bucketSettings, bucketBytes: new BucketBytes(store, bucketSettings, settings.bucketLimits, now) };
  const servedOverTls = settings.tlsCertFile !== null;
  const listener = (req: IncomingMessage, res: ServerResponse) => {
    guard.requestArrived(req.socket);
    // Every answer over TLS, errors included, tells browsers to stay on HTTPS.
    if (servedOverTls) res.setHeader('strict-transport-security', HSTS);
    drain.track(req, res, requests.begin(req, res));
    const fail = (error: unknown) => {
      const failure = failureOf(error);
      const reqId = requestIdOf(res);
      if (failure.code === 'INTERNAL') log.error({ err: error, reqId, method: req.method, url: redactUrl(req.url ?? '') }, 'request failed');
      else {
        storageFailures.refused(error, reqId);
        // rill_storage_unavailable_responses_total counts 503s, not a full disk's 507s.
        if (statusOf(failure.code) === 503) metrics?.storageRefused();
      }
      sendError(res, failure);
    };
    try {
      dispatch(req, res, ctx)?.then(storageFailures.served, fail);
    } catch (error) {
      fail(error);
    }
  };
  const { server, tls } = createHttpServer(settings, listener);
  const stopWatchingCertificate = tls ? watchCertificate(server as unknown as TlsServer, { certFile: settings.tlsCertFile!, keyFile: settings.tlsKeyFile! }) : () => {};
  // A TLS connection is served on its TLS socket, announced once the handshake is done.
  const connectionEvent = tls ? 'secureConnection' : 'connection';
  server.on('clientError', onClientError);
  const guard = new ConnectionGuard(server, settings.headersTimeoutMs, settings.maxConnections, connectionEvent);
  const sweep = setInterval(() => {
    store.run('expireStreams', { limit: 1000 }).then(storageFailures.served, (error: unknown) => {
      if (storageRefusal(error)) storageFailures.refused(error);
      else log.error({ err: error }, 'expiry sweep failed');
    });
    // Age limits cut streams that are not written too (appends cut the others at once).
    store.run('trimAged', { limit: 1000 }).then(storageFailures.served, (error: unknown) => {
      if (storageRefusal(error)) storageFailures.refused(error);
      else log.error({ err: error }, 'retention age sweep failed');
    });
  }, settings.sweepIntervalMs);
  sweep.unref();

  const drain = new Drain(server, settings.drainTimeoutMs, connectionEvent);
  let closing: Promise<void> | null = null;
  return {
    server,
    store,
    settings,
    url() {
      return urlOf(server, tls);
    },
    metricsUrl() {
      return metricsListener ? urlOf(metricsListener) : null;
    },
    async listen() {
      await subscriptions.start();
      await listenOn(server, settings.port, settings.host);
      baseUrl = settings.publicUrl?.replace(/\/+$/, '') ?? urlOf(server, tls);
      await subscriptions.run(nodeNameOf(settings.store, hostname(), new URL(urlOf(server, tls)).port));
      if (metricsListener) await listenOn(metricsListener, settings.metricsPort!, settings.metricsHost);
      ops.started = true;
      ops.startedAtMs = now();
    },
    close() {
      closing ??= (async () => {
        ops.leaving = true;
        if (settings.shutdownDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, settings.shutdownDelayMs));
        metricsListener?.close();
        metricsListener?.closeAllConnections();
        clearInterval(sweep);
        stopWatchingCertificate();
        await subscriptions.close();
        await drain.run(() => hub.drain());
        hub.close();
        await store.close();
      })();
      return closing;
    },
  };
}
