/**
 * The one place the client calls `fetch`. It adds the configured headers, bounds every
 * request with a timeout, and turns transport failures into typed errors
 * (NETWORK_ERROR, TIMEOUT, ABORTED) so callers can tell "no answer" from a refusal.
 */
import { RillError } from './errors.js';

export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

export interface TransportOptions {
  /** A fetch implementation; the global one by default. */
  fetch?: FetchLike;
  /** Headers sent on every request (authorization, for example). */
  headers?: Record<string, string>;
  /** Time allowed for one request, answer body included. Default 30 s. */
  timeoutMs?: number;
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
  private readonly fetchImpl: FetchLike;
  readonly headers: Record<string, string>;
  readonly timeoutMs: number;

  constructor(options: TransportOptions = {}) {
    const globalFetch = globalThis.fetch?.bind(globalThis) as FetchLike | undefined;
    const impl = options.fetch ?? globalFetch;
    if (impl === undefined) throw new Error('no fetch implementation: pass options.fetch');
    this.fetchImpl = impl;
    this.headers = { ...(options.headers ?? {}) };
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  /** Sends a request and reads the whole answer body, all within the timeout. */
  async request(url: string, options: RequestOptions): Promise<BufferedResponse> {
    return this.withDeadline(options, async (signal) => {
      const response = await this.fetchImpl(url, this.init(options, signal));
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
    return this.withDeadline(options, (signal) => this.fetchImpl(url, this.init(options, signal)), true);
  }

  private init(options: RequestOptions, signal: AbortSignal): RequestInit {
    const init: RequestInit = { method: options.method, headers: { ...this.headers, ...options.headers }, signal };
    if (options.body !== undefined) init.body = options.body as BodyInit;
    return init;
  }

  /**
   * Runs `run` with a signal that fires on the caller's abort or after the timeout.
   * With `keepLinked`, the caller's signal stays connected after `run` resolves, so it
   * can still abort a body that is read later.
   */
  private async withDeadline<T>(options: RequestOptions, run: (signal: AbortSignal) => Promise<T>, keepLinked = false): Promise<T> {
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
      throw transportError(error, controller.signal, options, this.timeoutMs);
    } finally {
      clearTimeout(timer);
      if (!ok || !keepLinked) outer?.removeEventListener('abort', onAbort);
    }
  }
}

function abortedError(reason: unknown): RillError {
  return new RillError({ code: 'ABORTED', message: 'the request was aborted', cause: reason });
}

function transportError(error: unknown, signal: AbortSignal, options: RequestOptions, defaultTimeoutMs: number): unknown {
  if (error instanceof RillError) return error;
  if (signal.aborted && signal.reason === TIMED_OUT) {
    return new RillError({ code: 'TIMEOUT', message: `no answer within ${options.timeoutMs ?? defaultTimeoutMs} ms`, cause: error });
  }
  if (signal.aborted) return abortedError(signal.reason);
  const detail = error instanceof Error ? error.message : String(error);
  return new RillError({ code: 'NETWORK_ERROR', message: `${options.method} failed: ${detail}`, cause: error });
}

/** Cancels an answer body that will not be read, so its connection can be reused. */
export function discard(response: Response): void {
  if (response.body && !response.bodyUsed) response.body.cancel().catch(() => undefined);
}
