/** The two steps every bare bench server takes, written once. */
import type { IncomingMessage, ServerResponse } from 'node:http';

export function answerNoContent(res: ServerResponse): void {
  res.writeHead(204);
  res.end();
}

/** Calls `done` with the whole request body once it has arrived. */
export function whenBodyRead(req: IncomingMessage, done: (body: Buffer) => void): void {
  const parts: Buffer[] = [];
  req.on('data', (chunk: Buffer) => parts.push(chunk));
  req.on('end', () => done(parts.length === 1 ? parts[0]! : Buffer.concat(parts)));
}
