/**
 * Live readers the bench's floors hold open, by path: SSE readers, sent each later POST
 * to their path as one `data:` event (one buffer shared by all), and the reads any floor
 * holds until something arrives. Shared by the bare floor (floor.ts), which fans a POST
 * out at once, and the durable floors (group-commit.ts), which fan it out once its flush
 * has ended.
 */
import type { ServerResponse } from 'node:http';

/** Responses held open, by path; a response leaves its set when it closes. */
export type Held = Map<string, Set<ServerResponse>>;

const sseReaders: Held = new Map();

/** Keeps `res` among `held`'s responses for `path` until it closes. */
export function hold(held: Held, path: string, res: ServerResponse): void {
  let set = held.get(path);
  if (!set) held.set(path, (set = new Set()));
  const forPath = set;
  forPath.add(res);
  res.once('close', () => forPath.delete(res));
}

/** Whether `url` (path and query) asks for an SSE read. */
export function isSseRead(method: string | undefined, url: string): boolean {
  const q = url.indexOf('?');
  return method === 'GET' && q >= 0 && url.includes('live=sse', q);
}

/** Answers an SSE read and holds it: the `event: control` line readers wait for, then POSTs to its path. */
export function holdSseReader(path: string, res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
  res.write('event: control\ndata: {}\n\n');
  hold(sseReaders, path, res);
}

/** Whether `path` has had an SSE reader: a POST to it is read and fanned out. */
export function followed(path: string): boolean {
  return sseReaders.has(path);
}

/** Sends `body` to every SSE reader of `path` as one data event. */
export function fanOut(path: string, body: Buffer): void {
  const held = sseReaders.get(path);
  if (!held || held.size === 0) return;
  const event = Buffer.concat([Buffer.from('data:'), body, Buffer.from('\n\n')]);
  for (const res of held) res.write(event);
}

/** Ends every held response of `held` (at shutdown). */
export function destroyHeld(...held: Held[]): void {
  for (const map of [sseReaders, ...held]) for (const set of map.values()) for (const res of set) res.destroy();
}

/** A request's path: its URL without the query. */
export function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}
