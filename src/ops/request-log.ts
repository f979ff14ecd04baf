/**
 * What happens to every request besides its answer: an id (`X-Request-Id`, the client's
 * own when it sends a sane one), one access-log line at `info` when it ends (sampled or
 * off as configured; every 5xx is logged), and its count and latency in the metrics.
 *
 * The line names the route template, never the URL: paths and query strings may carry
 * stream names and tokens, and a template keeps both out of the log.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { AccessLines } from './access-line.js';
import { infoLines } from './logger.js';
import type { RillMetrics } from './metrics.js';

/** A client's own request id is kept when it is this short and plain; otherwise one is made. */
const CLIENT_ID = /^[A-Za-z0-9._:-]{1,64}$/;

const ROUTE = Symbol('rill.route');
const REQUEST_ID = Symbol('rill.requestId');
type Routed = ServerResponse & { [ROUTE]?: string; [REQUEST_ID]?: string };

/**
 * The request's id, for its answer's `X-Request-Id`. The response writers put it among the
 * headers they pass to writeHead: a `res.setHeader` would send every header of the answer
 * through Node's slower per-header path (about 7,000 more instructions an append).
 */
export function requestIdOf(res: ServerResponse): string | undefined {
  return (res as Routed)[REQUEST_ID];
}

/** The route template a request matched, for its log line and metrics (set by the router's caller). */
export function setRouteTemplate(res: ServerResponse, template: string): void {
  (res as Routed)[ROUTE] = template;
}

export interface RequestLogOptions {
  log: Logger;
  metrics: RillMetrics | null;
  /** Share of requests that get an access-log line: 1 all, 0 none (5xx are always logged). */
  accessLogRate: number;
  /** Draws the sampling decision; Math.random unless a test fixes it. */
  random?: () => number;
}

export class RequestLog {
  /** Ids are this process's random prefix and a counter: unique, and cheaper than a UUID each. */
  private readonly prefix = randomBytes(6).toString('base64url');
  private next = 0;
  private readonly random: () => number;
  /** Share of requests logged: the configured one, or 0 when the logger leaves out `info`. */
  private readonly rate: number;
  /**
   * Where access lines go: the server's logger without its redaction, which cost 3 of the
   * 8 µs a line took. A line holds only fields made here (the route template, never the
   * URL; an id checked against CLIENT_ID), so there is nothing in it to redact.
   */
  private readonly lines: Logger;
  /** Lines made by rill and queued on the logger's destination, when it writes JSON (logger.ts). */
  private readonly accessLines: AccessLines | null;

  constructor(private readonly options: RequestLogOptions) {
    this.random = options.random ?? Math.random;
    this.rate = options.log.isLevelEnabled('info') ? options.accessLogRate : 0;
    this.lines = options.log.child({}, { redact: [] });
    const lines = infoLines(options.log, 'request');
    this.accessLines = lines && new AccessLines(lines);
  }

  /**
   * Gives the request its id (answered in `X-Request-Id`, see requestIdOf) and answers
   * what to call once its response closes (its log line and metrics), or null when
   * nothing is to be done then. The caller calls it from a 'close' listener it has anyway:
   * one more listener per request cost as much as the rest of the metrics.
   */
  begin(req: IncomingMessage, res: ServerResponse): (() => void) | null {
    const offered = req.headers['x-request-id'];
    const id = typeof offered === 'string' && CLIENT_ID.test(offered) ? offered : `${this.prefix}-${(this.next++).toString(36)}`;
    (res as Routed)[REQUEST_ID] = id;
    const { metrics } = this.options;
    const rate = this.rate;
    if (metrics === null && rate === 0) return null;
    const startedMs = performance.now();
    const socket = req.socket;
    // Read only when a line may be written: the getter walks the socket's pending writes.
    const writtenBefore = rate > 0 ? socket.bytesWritten : 0;
    return () => {
      const seconds = (performance.now() - startedMs) / 1000;
      const route = (res as Routed)[ROUTE] ?? 'unrouted';
      const status = res.headersSent ? res.statusCode : 0;
      const method = req.method ?? '';
      metrics?.request(route, method, status, seconds, method === 'POST' && isAppendRoute(route));
      if (status < 500 && (rate === 0 || (rate < 1 && this.random() >= rate))) return;
      const durationMicros = Math.round(seconds * 1e6);
      // The response's bytes on the wire, its head included.
      const bytes = socket.bytesWritten - writtenBefore;
      const completed = res.writableFinished;
      if (this.accessLines === null) return void this.lines.info({ reqId: id, method, route, status, durationMs: durationMicros / 1000, bytes, completed }, 'request');
      // The id matched CLIENT_ID or was made here: nothing in it to escape.
      this.accessLines.write({ reqId: id, method, route, status, durationMicros, bytes, completed });
    };
  }
}

function isAppendRoute(route: string): boolean {
  // `{stream}/append-batch` in a bucket, `{name}?ext=append-batch` in /v1/stream.
  return route === '/{bucket}/{stream}' || route === '/v1/stream/{name}' || route.endsWith('/append-batch') || route.endsWith('=append-batch');
}
