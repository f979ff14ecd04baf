/**
 * The floor: a bare node:http server that does the least a stream server must do, so
 * rill's figures can be read against what HTTP on Node costs on this machine.
 *
 * - Every request is answered 204 at once, its body unread, nothing stored.
 * - Except an SSE read (`live=sse` in the query): the response is held open, and each
 *   later POST to the same path is sent to every held reader as one `data:` event, one
 *   buffer shared by all, in memory and without durability. That is the least an SSE
 *   fan-out costs here; it also sends the `event: control` line readers wait for.
 * Usage: node floor.js PORT
 */
import { createServer, type ServerResponse } from 'node:http';
import { answerNoContent, whenBodyRead } from './bare.js';

const port = Number(process.argv[2]);
const readers = new Map<string, Set<ServerResponse>>();

function holdSseReader(path: string, res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
  res.write('event: control\ndata: {}\n\n');
  let set = readers.get(path);
  if (!set) readers.set(path, (set = new Set()));
  const held = set;
  held.add(res);
  res.once('close', () => held.delete(res));
}

function fanOut(path: string, body: Buffer): void {
  const held = readers.get(path);
  if (!held || held.size === 0) return;
  const event = Buffer.concat([Buffer.from('data:'), body, Buffer.from('\n\n')]);
  for (const res of held) res.write(event);
}

const server = createServer({ keepAliveTimeout: 5_000 }, (req, res) => {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  if (req.method === 'GET' && q >= 0 && url.includes('live=sse', q)) return holdSseReader(path, res);
  if (req.method !== 'POST' || !readers.has(path)) return answerNoContent(res);
  whenBodyRead(req, (body) => {
    answerNoContent(res);
    fanOut(path, body);
  });
});
server.listen(port, '127.0.0.1', () => process.stdout.write('ready\n'));
process.on('SIGTERM', () => {
  for (const set of readers.values()) for (const res of set) res.destroy();
  server.close(() => process.exit(0));
});
