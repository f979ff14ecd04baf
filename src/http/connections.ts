/**
 * Connections a client opens and holds. Node's header timeout starts with a request's
 * first byte, so a connection that sent nothing stayed open for good: 2,000 silent
 * connections were all open after 150 s, and 25,500 reached the process's file limit,
 * after which every new request failed. A connection must bring its first request within
 * about the header timeout (later ones: Node's keep-alive timeout), and past the most
 * connections open at once a new one is answered 503 and closed.
 */
import { STATUS_CODES, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { protocolError, statusOf, type ProtocolError } from '../protocol/errors.js';
import { baseHeaders } from './response.js';

const FIRST_REQUEST_TIMER = Symbol('rill.firstRequestTimer');
type GuardedSocket = Socket & { [FIRST_REQUEST_TIMER]?: NodeJS.Timeout };

/** Writes a JSON refusal on a connection Node's HTTP layer is not answering, and closes it. */
export function writeRefusalAndClose(socket: Socket, refusal: ProtocolError): void {
  if (!socket.writable) return void socket.destroy();
  const body = JSON.stringify({ code: refusal.code, message: refusal.message });
  const status = statusOf(refusal.code);
  const fields: Record<string, string> = { ...baseHeaders(undefined), 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), connection: 'close' };
  if (refusal.fields?.retryAfterSeconds !== undefined) fields['retry-after'] = String(refusal.fields.retryAfterSeconds);
  const head = Object.entries(fields).map(([k, v]) => `${k}: ${v}`);
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\n${head.join('\r\n')}\r\n\r\n${body}`);
}

export class ConnectionGuard {
  private open = 0;

  constructor(
    server: Server,
    private readonly firstRequestMs: number,
    private readonly maxConnections: number,
    connectionEvent: 'connection' | 'secureConnection' = 'connection',
  ) {
    server.on(connectionEvent, (socket: GuardedSocket) => this.admit(socket));
  }

  private admit(socket: GuardedSocket): void {
    this.open++;
    socket.once('close', () => {
      this.open--;
      clearTimeout(socket[FIRST_REQUEST_TIMER]);
    });
    if (this.open > this.maxConnections) {
      const refusal = protocolError('TOO_MANY_CONNECTIONS', `the server holds its most connections (${this.maxConnections}); retry later`, { retryAfterSeconds: 1 });
      return writeRefusalAndClose(socket, refusal);
    }
    if (this.firstRequestMs > 0) {
      // Half as long again as the header timeout: a client whose headers trickle in meets
      // Node's own 408 first (its checks run every quarter of that timeout).
      socket[FIRST_REQUEST_TIMER] = setTimeout(() => socket.destroy(), this.firstRequestMs * 1.5);
      socket[FIRST_REQUEST_TIMER].unref();
    }
  }

  /** A request arrived on `socket`: it is in use, and Node's own timeouts govern it from now on. */
  requestArrived(socket: GuardedSocket): void {
    const timer = socket[FIRST_REQUEST_TIMER];
    if (timer === undefined) return;
    clearTimeout(timer);
    socket[FIRST_REQUEST_TIMER] = undefined;
  }
}
