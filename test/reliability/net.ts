/** Raw HTTP over sockets, for requests and readers that fetch cannot express. */
import type { IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** Splits one HTTP/1.1 response head and returns it with the bytes after it. */
export function parseHead(data: Buffer): { status: number; headers: Record<string, string>; rest: Buffer } | null {
  const end = data.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const lines = data.subarray(0, end).toString('latin1').split('\r\n');
  const match = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '');
  if (!match) throw new Error(`not an HTTP response: ${JSON.stringify(lines[0])}`);
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(match[1]), headers, rest: data.subarray(end + 4) };
}

/** Connects to host:port; resolves with the socket or rejects with the connect error. */
export function openSocket(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => resolve(socket));
    socket.once('error', reject);
  });
}

export interface Collected {
  data: Buffer;
  /** How the connection ended: the server closed it (end), reset it, or we gave up. */
  ended: 'end' | 'reset' | 'timeout';
  afterMs: number;
}

/** Reads everything the socket delivers until the peer closes it or `timeoutMs` passes. */
export function collect(socket: Socket, timeoutMs: number): Promise<Collected> {
  const started = Date.now();
  return new Promise((resolve) => {
    const parts: Buffer[] = [];
    let settled = false;
    const done = (ended: Collected['ended']) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ data: Buffer.concat(parts), ended, afterMs: Date.now() - started });
    };
    const timer = setTimeout(() => done('timeout'), timeoutMs);
    socket.on('data', (chunk: Buffer) => parts.push(chunk));
    socket.once('end', () => done('end'));
    socket.once('close', () => done('end'));
    socket.once('error', () => done('reset'));
    socket.resume();
  });
}

export function readIncoming(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => (text += chunk));
    res.once('end', () => resolve(text));
    res.once('error', reject);
  });
}
