/**
 * The floor: a bare node:http server that does the least a stream server must do, so
 * rill's figures can be read against what HTTP on Node costs on this machine.
 *
 * - Every request is answered 204 at once, its body unread, nothing stored.
 * - Except an SSE read (`live=sse` in the query): the response is held open, and each
 *   later POST to the same path is sent to every held reader as one `data:` event, one
 *   buffer shared by all, in memory and without durability. That is the least an SSE
 *   fan-out costs here; it also sends the `event: control` line readers wait for.
 * - And a long-poll read (`live=long-poll`): a POST to a path is kept in memory; a read
 *   from an offset (a byte count) below the path's length is answered at once with the
 *   rest, one at the length (or `now`) is held until the next POST. Nothing else of the
 *   protocol: the least a long-poll fan-out costs here.
 * Usage: node floor.js PORT
 */
import { createServer, type ServerResponse } from 'node:http';
import { answerNoContent, whenBodyRead } from './bare.js';
import { destroyHeld, fanOut, followed, hold, holdSseReader, isSseRead, pathOf, type Held } from './held-readers.js';

const port = Number(process.argv[2]);
/** Long-poll: each path's bytes so far (and their count), and the reads held at its end. */
interface Log {
  parts: Buffer[];
  bytes: number;
}
const logs = new Map<string, Log>();
const polls: Held = new Map();

/** Answers a long-poll with `body`, the bytes from `from`. */
function answerPoll(res: ServerResponse, body: Buffer, from: number): void {
  res.writeHead(200, { 'content-type': 'text/plain', 'stream-next-offset': String(from + body.length), 'content-length': body.length });
  res.end(body);
}

function longPoll(path: string, query: URLSearchParams, res: ServerResponse): void {
  const log = logs.get(path) ?? { parts: [], bytes: 0 };
  logs.set(path, log);
  const asked = query.get('offset');
  const from = asked === 'now' || asked === null ? log.bytes : Number(asked);
  if (from < log.bytes) return answerPoll(res, Buffer.concat(log.parts).subarray(from), from);
  hold(polls, path, res);
}

/** A POST to a followed path: every long-poll held at its end gets the new bytes. */
function answerPolls(path: string, body: Buffer): void {
  const log = logs.get(path)!;
  const from = log.bytes;
  log.parts.push(body);
  log.bytes += body.length;
  const held = polls.get(path);
  if (!held) return;
  polls.delete(path);
  for (const res of held) answerPoll(res, body, from);
}

const server = createServer({ keepAliveTimeout: 5_000 }, (req, res) => {
  const url = req.url ?? '/';
  const path = pathOf(url);
  if (isSseRead(req.method, url)) return holdSseReader(path, res);
  const q = url.indexOf('?');
  if (req.method === 'GET' && q >= 0 && url.includes('live=long-poll', q)) return longPoll(path, new URLSearchParams(url.slice(q + 1)), res);
  if (req.method !== 'POST' || (!followed(path) && !logs.has(path))) return answerNoContent(res);
  whenBodyRead(req, (body) => {
    answerNoContent(res);
    fanOut(path, body);
    if (logs.has(path)) answerPolls(path, body);
  });
});
server.listen(port, '127.0.0.1', () => process.stdout.write('ready\n'));
process.on('SIGTERM', () => {
  destroyHeld(polls);
  server.close(() => process.exit(0));
});
