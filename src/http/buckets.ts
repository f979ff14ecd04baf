/** Bucket routes: create, inspect, delete, and list a bucket's streams. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { protocolError } from '../protocol/errors.js';
import { parsePageLimit } from '../protocol/parse.js';
import { bucketStreamKey } from '../protocol/ids.js';
import { encodeOffset } from '../protocol/offset.js';
import { absenceError } from '../core/stream.js';
import { messagesHeld } from '../core/records.js';
import { listingPrefixes } from '../core/access.js';
import { bucketLimitsView } from '../core/bucket.js';
import { DEFAULT_BUCKET_SETTINGS, effectiveBucketLimits, parseBucketSettingsChange } from '../core/bucket-settings.js';
import type { BucketInfo } from '../storage/store.js';
import { listingScope } from './access.js';
import type { HandlerContext } from './context.js';
import { parseQuery, readBody } from './request.js';
import { send, sendBodyRefusal, sendError, sendJson } from './response.js';

export const MAX_LIST_LIMIT = 1000;
const DEFAULT_LIST_LIMIT = 100;

export async function handleBucket(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, bucket: string): Promise<void> {
  switch (req.method) {
    case 'PUT': {
      const outcome = await ctx.store.run('createBucket', { id: bucket });
      return sendJson(res, outcome.kind === 'created' ? 201 : 200, { id: bucket, createdAt: new Date(outcome.bucket.createdAtMs).toISOString() });
    }
    case 'GET':
    case 'HEAD': {
      const info = await ctx.store.getBucket(bucket);
      if (!info) return sendError(res, protocolError('BUCKET_NOT_FOUND', 'bucket not found'));
      return sendJson(res, 200, await bucketView(ctx, info));
    }
    case 'PATCH':
      return changeSettings(req, res, ctx, bucket);
    case 'DELETE': {
      const outcome = await ctx.store.run('deleteBucket', { id: bucket });
      ctx.bucketSettings.forget(bucket);
      if (outcome.kind === 'rejected') return sendError(res, outcome.error);
      return send(res, 204, { 'cache-control': 'no-store' });
    }
    default:
      return sendError(res, protocolError('METHOD_NOT_ALLOWED', `${req.method} is not allowed on a bucket`), { allow: 'GET, HEAD, PUT, PATCH, DELETE, OPTIONS' });
  }
}

/** Settings bodies are a few members: anything larger is not one. */
const MAX_SETTINGS_BYTES = 4096;

/**
 * `GET /{bucket}`: `limits` are those in force (its overrides, else the server-wide
 * ones; null: none), `overrides` what an admin set (null: the server-wide limit; 0: none),
 * `retainedBytes` what --bucket-max-bytes counts, `retention` the default retention policy
 * of its streams that have none of their own (null: none).
 */
async function bucketView(ctx: HandlerContext, info: BucketInfo): Promise<Record<string, unknown>> {
  const settings = info.settings ?? DEFAULT_BUCKET_SETTINGS;
  return {
    id: info.id,
    streamCount: info.streamCount,
    retainedBytes: await ctx.store.bucketHeldBytes(info.id),
    createdAt: new Date(info.createdAtMs).toISOString(),
    limits: bucketLimitsView(effectiveBucketLimits(ctx.settings.bucketLimits, info.settings)),
    publicRead: settings.publicRead,
    overrides: settings.limits,
    retention: settings.retention ?? null,
  };
}

/** `PATCH /{bucket}` (admin on `*`, access.ts): changes the members the body names, answers the bucket's view. */
async function changeSettings(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, bucket: string): Promise<void> {
  const body = await readBody(req, MAX_SETTINGS_BYTES);
  if (!body.ok) return sendBodyRefusal(res, body.error);
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.body.toString('utf8'));
  } catch {
    return sendError(res, protocolError('INVALID_JSON', 'the body is not valid JSON'));
  }
  const read = parseBucketSettingsChange(parsed);
  if (!read.ok) return sendError(res, read.error);
  const outcome = await ctx.store.run('setBucketSettings', { id: bucket, change: read.change });
  ctx.bucketSettings.forget(bucket);
  if (outcome.kind === 'rejected') return sendError(res, outcome.error);
  const info = await ctx.store.getBucket(bucket);
  if (!info) return sendError(res, protocolError('BUCKET_NOT_FOUND', 'bucket not found'));
  return sendJson(res, 200, await bucketView(ctx, info));
}

export async function handleListStreams(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, bucket: string, search: string): Promise<void> {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    return sendError(res, protocolError('METHOD_NOT_ALLOWED', 'the stream listing is read-only'), { allow: 'GET, HEAD, OPTIONS' });
  }
  const parsed = parseQuery(search);
  if (!parsed.ok) return sendError(res, parsed.error);
  const q = parsed.params;
  const page = parsePageLimit(q.get('limit'), DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT);
  if (!page.ok) return sendError(res, page.error);
  const limit = page.value;
  if (!(await ctx.store.getBucket(bucket))) return sendError(res, protocolError('BUCKET_NOT_FOUND', 'bucket not found'));
  const prefixes = listingPrefixes(listingScope(req, bucket), q.get('prefix') ?? '');
  const details = q.get('details');
  if (details !== undefined && details !== 'true') return sendError(res, protocolError('INVALID_QUERY', 'details takes only the value true'));
  const listing = await listUnder(ctx, bucket, prefixes, q.get('after') ?? null, limit);
  const streams = details === undefined ? listing.names : await streamDetails(ctx, bucket, listing.names);
  sendJson(res, 200, { bucket, streams, next: listing.nextAfter });
}

/**
 * `?details=true`: each listed stream with what its state holds (content type, tail,
 * bytes and messages held, closed, created). Answered by the server rather than by a
 * stats call per stream from the console: one state look-up per name of a page bounded by
 * `limit` (cached by the engines, batched in one turn through the storage thread), no
 * body read (messages are kept with the state, core/records.ts), and one round trip
 * instead of a page's worth. Rill stores no last-append time (`lastAccessMs` moves only
 * for a sliding TTL), so none is answered. A stream gone between the listing and its
 * look-up is left out.
 */
async function streamDetails(ctx: HandlerContext, bucket: string, names: string[]): Promise<Array<Record<string, unknown>>> {
  const states = await Promise.all(names.map((id) => ctx.store.getStream(bucketStreamKey(bucket, id))));
  const nowMs = ctx.now();
  return names.flatMap((id, i) => {
    const s = states[i];
    if (s === undefined || absenceError(s, nowMs)) return [];
    return [{ id, contentType: s.config.contentType, tail: encodeOffset(s.tail), bytes: s.tail - s.earliestOffset, messages: messagesHeld(s), closed: s.closed, createdAt: new Date(s.createdAtMs).toISOString() }];
  });
}

/**
 * One page of the names under any of `prefixes` (none nested in another, so their
 * names are disjoint): a page of each, merged in order. A token that reads only some
 * prefixes of a bucket lists only those.
 */
async function listUnder(ctx: HandlerContext, bucket: string, prefixes: string[], after: string | null, limit: number): Promise<{ names: string[]; nextAfter: string | null }> {
  if (prefixes.length === 1) return ctx.store.listStreams(bucket, prefixes[0]!, after, limit);
  const pages = await Promise.all(prefixes.map((prefix) => ctx.store.listStreams(bucket, prefix, after, limit)));
  const names = pages.flatMap((page) => page.names).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const more = names.length > limit || pages.some((page) => page.nextAfter !== null);
  const shown = names.slice(0, limit);
  return { names: shown, nextAfter: more && shown.length > 0 ? shown[shown.length - 1]! : null };
}
