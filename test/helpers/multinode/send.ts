/**
 * One HTTP request with a time bound, for clients of several nodes that fail over: it tells
 * "no answer" (the outcome is unknown: the server may or may not have applied the request) from
 * "connection refused" (nothing reached the server, so the same request may go elsewhere), which
 * is what decides whether a writer may resend. observed() also reports each request and what it
 * got, for tests that judge answers by the time they were given.
 */
import { call, type Reply } from '../http.js';

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export interface Answer {
  status: number;
  headers: Headers;
  body: Buffer;
  text: string;
  /** The JSON error code, when the body is a JSON error. */
  code: string | undefined;
  message: string | undefined;
  sentAt: number;
  ms: number;
}

/** No answer: `refused` means nothing reached the server; otherwise the outcome is unknown. */
export class NoAnswer extends Error {
  constructor(
    readonly reason: string,
    readonly refused: boolean,
    readonly sentAt: number,
    readonly ms: number,
  ) {
    super(`no answer: ${reason}`);
  }
}

export interface SendInit {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** Past this, the request is abandoned (outcome unknown). */
  timeoutMs?: number;
  /** Drop the answer this soon, as a network losing it would: the server may or may not have applied the request. */
  loseAfterMs?: number;
}

const DEFAULT_TIMEOUT_MS = 10_000;

/** Sends one request; an answer of any status resolves, no answer rejects with NoAnswer. */
export async function send(url: string, init: SendInit = {}): Promise<Answer> {
  const abort = new AbortController();
  const timeoutMs = init.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const lose = init.loseAfterMs !== undefined;
  const timer = setTimeout(() => abort.abort(), lose ? init.loseAfterMs : timeoutMs);
  const sentAt = Date.now();
  try {
    const reply = await call(url, { method: init.method ?? 'GET', headers: init.headers, body: init.body, signal: abort.signal });
    const { code, message } = jsonErrorOf(reply);
    return { status: reply.status, headers: reply.headers, body: reply.body, text: reply.text, code, message, sentAt, ms: Date.now() - sentAt };
  } catch (error) {
    const ms = Date.now() - sentAt;
    // Our own abort: the request may have reached the server, so the outcome is unknown.
    if (abort.signal.aborted) throw new NoAnswer(lose ? 'answer dropped' : `timeout after ${timeoutMs} ms`, false, sentAt, ms);
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    const reason = cause?.code ?? cause?.message ?? (error as Error).message;
    throw new NoAnswer(reason, cause?.code === 'ECONNREFUSED', sentAt, ms);
  } finally {
    clearTimeout(timer);
  }
}

/** Code and message of a refusal whose body is a JSON error; both undefined otherwise. */
function jsonErrorOf(reply: Reply): { code: string | undefined; message: string | undefined } {
  const jsonRefusal = reply.status >= 400 && (reply.headers.get('content-type') ?? '').startsWith('application/json');
  const error = jsonRefusal ? (reply.json as { code?: unknown; message?: unknown } | null | undefined) : undefined;
  return {
    code: typeof error?.code === 'string' ? error.code : undefined,
    message: typeof error?.message === 'string' ? error.message : undefined,
  };
}

/** One request a writer or reader made, with what it got (for tests that judge answers by time). */
export interface Observation {
  who: string;
  method: string;
  url: string;
  sentAt: number;
  endAt: number;
  /** null: no answer. */
  status: number | null;
  retryAfter: string | null;
  code: string | undefined;
  message: string | undefined;
  contentType: string | null;
  reason?: string;
}

export interface ObserveOptions {
  /** Per-request time bound. */
  timeoutMs?: number;
  observe?: (o: Observation) => void;
}

/** Sends and records the observation with `options.observe`; rethrows NoAnswer. */
export async function observed(options: ObserveOptions, who: string, url: string, init: SendInit): Promise<Answer> {
  const method = init.method ?? 'GET';
  try {
    const answer = await send(url, { timeoutMs: options.timeoutMs, ...init });
    options.observe?.({
      who,
      method,
      url,
      sentAt: answer.sentAt,
      endAt: answer.sentAt + answer.ms,
      status: answer.status,
      retryAfter: answer.headers.get('retry-after'),
      code: answer.code,
      message: answer.message,
      contentType: answer.headers.get('content-type'),
    });
    return answer;
  } catch (error) {
    if (error instanceof NoAnswer) {
      const { sentAt, ms, reason } = error;
      options.observe?.({ who, method, url, sentAt, endAt: sentAt + ms, status: null, retryAfter: null, code: undefined, message: undefined, contentType: null, reason });
    }
    throw error;
  }
}
