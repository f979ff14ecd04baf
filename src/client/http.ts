/**
 * The one place the client calls `fetch`. It adds the configured headers, bounds every
 * request with a timeout, and turns transport failures into typed errors
 * (NETWORK_ERROR, TIMEOUT, ABORTED) so callers can tell "no answer" from a refusal.
 */
import { RillError } from './errors.js';

export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

/**
 * A bearer token, or a function that returns a valid one (called before each request,
 * so it may cache; called again after a 401, so a long tail outlives each token).
 */
export type TokenSource = string | (() => string | Promise<string>);

export interface TransportOptions {
  /** A fetch implementation; the global one by default. */
  fetch?: FetchLike;
  /** Headers sent on every request (authorization, for example). */
  headers?: Record<string, string>;
  /** Time allowed for one request, answer body included. Default 30 s. */
  timeoutMs?: number;
  /** Sent as `Authorization: Bearer <token>` on every request, for a server with auth on. */
  token?: TokenSource;
}

export interface RequestOptions {
  method: string;
  headers?: Record<string, string>;
  body?: Uint8Array | string;
  signal?: AbortSignal;
  /** Overrides the transport's timeout for this request. */
  timeoutMs?: number;
}

/** An answer whose body was read within the request's time limit. */
export interface BufferedResponse {
  status: number;
  headers: Headers;
  body: Uint8Array;
  /** The answer itself, body already consumed; kept for error parsing. */
  response: Response;
}

export const DEFAULT_TIMEOUT_MS = 30_000;
const TIMED_OUT = Symbol('timeout');

export class Transport {
  /** @internal */ private readonly fetchImpl: FetchLike;
  readonly headers: Record<string, string>;
  readonly timeoutMs: number;
  /** @internal */ private readonly token: TokenSource | undefined;

  constructor(options: TransportOptions = {}) {
    const globalFetch = globalThis.fetch?.bind(globalThis) as FetchLike | undefined;
    const impl = options.fetch ?? globalFetch;
    if (impl === undefined) throw new Error('no fetch implementation: pass options.fetch');
    this.fetchImpl = impl;
    this.headers = { ...(options.headers ?? {}) };
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.token = options.token;
  }

  /** @internal */ private async currentToken(): Promise<string | null> {
    const token = this.token;
    if (token === undefined) return null;
    try {
      return typeof token === 'string' ? token : await token();
    } catch (error) {
      throw new RillError({ code: 'UNAUTHORIZED', message: 'the token function failed', cause: error });
    }
  }

  /**
   * Sends once with the current token; a 401 with a token function is sent once more if
   * the function then returns another token (the first one expired meanwhile).
   */
  /** @internal */ private async withToken<T extends { status: number }>(send: (token: string | null) => Promise<T>, discardRefusal: (answer: T) => void): Promise<T> {
    const token = await this.currentToken();
    const answer = await send(token);
    if (answer.status !== 401 || typeof this.token !== 'function') return answer;
    const fresh = await this.currentToken();
    if (fresh === token) return answer;
    discardRefusal(answer);
    return send(fresh);
  }

  /** Sends a request and reads the whole answer body, all within the timeout. */
  async request(url: string, options: RequestOptions): Promise<BufferedResponse> {
    return this.withToken((token) => this.requestOnce(url, options, token), (answer) => discard(answer.response));
  }

  /** @internal */ private async requestOnce(url: string, options: RequestOptions, token: string | null): Promise<BufferedResponse> {
    return this.withDeadline(url, options, async (signal) => {
      const response = await this.fetchImpl(url, this.init(options, signal, token));
      const status = response.status;
      // A refusal's body is parsed by errorFromResponse, so it is left unread here.
      if (status >= 300 || status === 204 || options.method === 'HEAD') {
        return { status, headers: response.headers, body: new Uint8Array(0), response };
      }
      const body = new Uint8Array(await response.arrayBuffer());
      return { status, headers: response.headers, body, response };
    });
  }

  /**
   * Sends a request and returns as soon as the headers arrive; the timeout covers only
   * that. For answers that stream for a long time (SSE). The caller must read or cancel
   * the body, and may abort it through `signal`.
   */
  async open(url: string, options: RequestOptions): Promise<Response> {
    return this.withToken((token) => this.withDeadline(url, options, (signal) => this.fetchImpl(url, this.init(options, signal, token)), true), discard);
  }

  /** @internal */ private init(options: RequestOptions, signal: AbortSignal, token: string | null): RequestInit {
    const headers: Record<string, string> = token === null ? { ...this.headers, ...options.headers } : { authorization: `Bearer ${token}`, ...this.headers, ...options.headers };
    const init: RequestInit = { method: options.method, headers, signal };
    if (options.body !== undefined) init.body = options.body as BodyInit;
    return init;
  }

  /**
   * Runs `run` with a signal that fires on the caller's abort or after the timeout.
   * With `keepLinked`, the caller's signal stays connected after `run` resolves, so it
   * can still abort a body that is read later.
   */
  /** @internal */ private async withDeadline<T>(url: string, options: RequestOptions, run: (signal: AbortSignal) => Promise<T>, keepLinked = false): Promise<T> {
    const controller = new AbortController();
    const outer = options.signal;
    const onAbort = () => controller.abort(outer?.reason);
    if (outer?.aborted) throw abortedError(outer.reason);
    outer?.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => controller.abort(TIMED_OUT), options.timeoutMs ?? this.timeoutMs);
    let ok = false;
    try {
      const result = await run(controller.signal);
      ok = true;
      return result;
    } catch (error) {
      throw transportError(error, url, controller.signal, options, this.timeoutMs);
    } finally {
      clearTimeout(timer);
      if (!ok || !keepLinked) outer?.removeEventListener('abort', onAbort);
    }
  }
}

function abortedError(reason: unknown): RillError {
  return new RillError({ code: 'ABORTED', message: 'the request was aborted', cause: reason });
}

/**
 * Socket errors raised before a connection exists: the request never left this machine.
 * `HOST` stands for the URL's host and port, so that the message says where nothing answered.
 */
const NOT_CONNECTED: Record<string, string> = {
  ECONNREFUSED: 'the connection was refused: nothing listens on HOST',
  ERR_SSL_WRONG_VERSION_NUMBER: 'HOST does not speak TLS (https): it may be an http server; use an http:// URL',
  ENOTFOUND: 'unknown host',
  EAI_AGAIN: 'host name lookup failed',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
};

/** The system error code under fetch's "fetch failed" (undici puts it in `cause`, perhaps in an AggregateError). */
function socketCode(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e !== null && typeof e === 'object' && depth < 4; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^(E[A-Z]+|UND_ERR_\w+|ERR_SSL_\w+)$/.test(code)) return code;
    const inner = (e as { errors?: unknown[] }).errors;
    if (Array.isArray(inner) && inner.length > 0) e = inner[0];
    else e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}

function transportError(error: unknown, url: string, signal: AbortSignal, options: RequestOptions, defaultTimeoutMs: number): unknown {
  if (error instanceof RillError) return error;
  const target = `${options.method} ${url}`;
  if (signal.aborted && signal.reason === TIMED_OUT) {
    return new RillError({ code: 'TIMEOUT', message: `${target}: no answer within ${options.timeoutMs ?? defaultTimeoutMs} ms`, cause: error });
  }
  if (signal.aborted) return abortedError(signal.reason);
  const code = socketCode(error);
  // fetch refuses some ports itself (the spec's "bad ports"): nothing was sent.
  if ((error as { cause?: { message?: unknown } } | null)?.cause?.message === 'bad port') {
    return new RillError({ code: 'CONNECTION_FAILED', message: `${target}: fetch does not connect to this port`, cause: error });
  }
  const refused = code === undefined ? undefined : NOT_CONNECTED[code];
  if (refused !== undefined) return new RillError({ code: 'CONNECTION_FAILED', message: `${target}: ${refused.replace('HOST', hostOf(url))} (${code})`, cause: error });
  const detail = code ?? (error instanceof Error ? error.message : String(error));
  return new RillError({ code: 'NETWORK_ERROR', message: `${target}: no answer (${detail})`, cause: error });
}

/** Cancels an answer body that will not be read, so its connection can be reused. */
export function discard(response: Response): void {
  if (response.body && !response.bodyUsed) response.body.cancel().catch(() => undefined);
}
