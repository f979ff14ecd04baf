/**
 * The `node:http` front door: limits, routing, and the mapping of routes to handlers.
 * A request can never crash the server: every handler failure is answered with a JSON
 * error and logged.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { pino, type Logger } from 'pino';
import { LiveHub } from '../live/hub.js';
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import { repeatedHeaderError } from '../protocol/parse.js';
import { storageRefusal } from '../storage/batched.js';
import { MemoryStore } from '../storage/memory/engine.js';
import { PostgresStore } from '../storage/postgres/engine.js';
import { SqliteStore } from '../storage/sqlite/engine.js';
import type { Store } from '../storage/store.js';
import { handleBucket, handleListStreams } from './buckets.js';
import type { HandlerContext } from './context.js';
import { handleRead } from './reads.js';
import { ALLOWED_METHODS, send, sendError, sendJson } from './response.js';
import { route, type Route, type StreamAddress } from './router.js';
import { handleAppendBatch, handleGetAttrs, handlePutAttrs } from './attrs-batch.js';
import { handleBootstrap, handlePublishSnapshot, handleReadSnapshot, handleRetention } from './snapshots.js';
import { DEFAULT_SETTINGS, type ServerSettings } from './settings.js';
import { ConnectionGuard, writeRefusalAndClose } from './connections.js';
import { StorageFailureLog } from './failure-log.js';
import { handleAppend, handleCreate, handleDelete, handleHead } from './writes.js';

export interface RillServer {
  readonly server: Server;
  readonly store: Store;
  readonly settings: ServerSettings;
  /** Base URL once listening. */
  url(): string;
  listen(): Promise<void>;
  /** Stops accepting, finishes in-flight requests, ends live readers, closes storage. */
  close(): Promise<void>;
}

export interface CreateServerOptions {
  settings?: Partial<ServerSettings>;
  logger?: Logger;
  store?: Store;
}

function openStore(settings: ServerSettings): Store {
  const options = { producers: settings.producers };
  if (settings.store === 'postgres') throw new Error('the postgres store opens asynchronously: use openRillServer');
  return settings.store === 'memory' ? new MemoryStore(options) : new SqliteStore({ ...options, dataDir: settings.dataDir, streamCacheEntries: settings.streamCacheEntries });
}

/** Opens the PostgreSQL store the settings name: connects, migrates the schema, listens for other nodes' commits. */
export function openPostgresStore(settings: ServerSettings): Promise<PostgresStore> {
  if (!settings.postgresUrl) throw new Error('the postgres store needs --postgres-url (or RILL_POSTGRES_URL)');
  return PostgresStore.open({
    producers: settings.producers,
    url: settings.postgresUrl,
    poolSize: settings.postgresPoolSize,
    statementTimeoutMs: settings.postgresStatementTimeoutMs,
    connectTimeoutMs: settings.postgresConnectTimeoutMs,
  });
}

/** createRillServer, for every store: one whose opening takes I/O (PostgreSQL) is opened first. */
export async function openRillServer(options: CreateServerOptions = {}): Promise<RillServer> {
  const settings: ServerSettings = { ...DEFAULT_SETTINGS, ...options.settings };
  const store = options.store ?? (settings.store === 'postgres' ? await openPostgresStore(settings) : undefined);
  return createRillServer({ ...options, store });
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
  const requested = req.headers['access-control-request-headers'];
  send(res, 204, {
    'access-control-allow-methods': ALLOWED_METHODS,
    'access-control-allow-headers': typeof requested === 'string' && requested.length > 0 ? requested : '*',
    'access-control-max-age': '86400',
    'cache-control': 'no-store',
  });
}

function dispatch(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext): Handled {
  const rawUrl = req.url ?? '/';
  if (Buffer.byteLength(rawUrl) > ctx.settings.maxUrlBytes) {
    res.setHeader('connection', 'close');
    return sendError(res, protocolError('URI_TOO_LONG', `the URL is longer than ${ctx.settings.maxUrlBytes} bytes`));
  }
  const q = rawUrl.indexOf('?');
  const pathname = q < 0 ? rawUrl : rawUrl.slice(0, q);
  const search = q < 0 ? '' : rawUrl.slice(q + 1);
  if (req.method === 'OPTIONS') return preflight(req, res);
  const repeated = repeatedHeaderError(req.rawHeaders);
  if (repeated) return sendError(res, repeated);
  const target = route(pathname);
  switch (target.kind) {
    case 'error':
      return sendError(res, target.error);
    case 'health':
      return sendJson(res, 200, { status: ctx.hub.isDraining ? 'draining' : 'ok' });
    case 'bucket':
      return handleBucket(req, res, ctx, target.bucket);
    case 'bucket-streams':
      return handleListStreams(req, res, ctx, target.bucket, search);
    case 'stream':
      return dispatchStream(req, res, ctx, target.stream, search);
    case 'stream-ext':
      return dispatchExtension(req, res, ctx, target, search);
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
    'snapshot PUT': arg === null ? undefined : () => handlePublishSnapshot(req, res, ctx, stream, arg),
    'retention PUT': arg === null ? undefined : () => handleRetention(req, res, ctx, stream, arg),
    'bootstrap GET': () => handleBootstrap(req, res, ctx, stream, search),
    'attrs GET': () => handleGetAttrs(req, res, ctx, stream),
    'attrs PUT': () => handlePutAttrs(req, res, ctx, stream),
    'append-batch POST': () => handleAppendBatch(req, res, ctx, stream),
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
  const inFlight = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (socket.writable && inFlight && !inFlight.writableEnded && inFlight.req.complete) {
    // A whole valid request came before what the parser refused: it is answered first,
    // then the refusal, then the connection closes (the client gets both, in order). A
    // request still arriving (a timeout cut it) is dropped with its connection.
    inFlight.once('finish', () => refuseAndClose(error, socket));
    inFlight.once('close', () => socket.destroySoon());
    return;
  }
  if (!socket.writable || inFlight) {
    socket.destroy();
    return;
  }
  refuseAndClose(error, socket);
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
  ) {
    server.on('connection', (socket: TrackedSocket) => {
      socket[IN_FLIGHT] = [];
      this.connections.add(socket);
      socket.once('close', () => this.connections.delete(socket));
    });
  }

  track(req: IncomingMessage, res: ServerResponse): void {
    if (this.draining) res.setHeader('connection', 'close');
    // The request's socket: a pipelined response is given its socket only when its turn comes.
    const list = (req.socket as TrackedSocket)[IN_FLIGHT];
    list?.push(res);
    res.once('close', () => {
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

export function createRillServer(options: CreateServerOptions = {}): RillServer {
  const settings: ServerSettings = { ...DEFAULT_SETTINGS, ...options.settings };
  const log = options.logger ?? pino({ level: process.env.RILL_LOG_LEVEL ?? 'info' });
  const store = options.store ?? openStore(settings);
  const hub = new LiveHub(store, settings.maxLiveConnections, settings.remoteCheckMs);
  const ctx: HandlerContext = { store, hub, settings, log, now: Date.now };
  const storageFailures = new StorageFailureLog(log, Date.now);
  const server = createServer(
    { maxHeaderSize: settings.maxHeaderBytes, ...timeoutOptions(settings), keepAliveTimeout: 5_000 },
    (req, res) => {
      guard.requestArrived(req.socket);
      drain.track(req, res);
      const fail = (error: unknown) => {
        const failure = failureOf(error);
        if (failure.code === 'INTERNAL') log.error({ err: error, method: req.method, url: req.url }, 'request failed');
        else storageFailures.refused(error);
        sendError(res, failure);
      };
      try {
        dispatch(req, res, ctx)?.then(storageFailures.served, fail);
      } catch (error) {
        fail(error);
      }
    },
  );
  server.on('clientError', onClientError);
  const guard = new ConnectionGuard(server, settings.headersTimeoutMs, settings.maxConnections);
  const sweep = setInterval(() => {
    store.run('expireStreams', { limit: 1000 }).then(storageFailures.served, (error: unknown) => {
      if (storageRefusal(error)) storageFailures.refused(error);
      else log.error({ err: error }, 'expiry sweep failed');
    });
  }, settings.sweepIntervalMs);
  sweep.unref();

  const drain = new Drain(server, settings.drainTimeoutMs);
  let closing: Promise<void> | null = null;
  return {
    server,
    store,
    settings,
    url() {
      const address = server.address();
      if (address === null || typeof address === 'string') throw new Error('the server is not listening');
      return `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;
    },
    listen() {
      return new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(settings.port, settings.host, () => {
          server.off('error', reject);
          resolve();
        });
      });
    },
    close() {
      closing ??= (async () => {
        clearInterval(sweep);
        await drain.run(() => hub.drain());
        hub.close();
        await store.close();
      })();
      return closing;
    },
  };
}
