/**
 * Where requests meet the usage record (core/usage.ts): a write stored, stream bytes
 * served, a live reader held, and `GET /usage`, the record itself (admin on `*`, like
 * `/stats`: access.ts guards every admin route so).
 *
 * A request is counted under its route's bucket (`v1` for the /v1/stream family) and its
 * token's subject. Only what was done is counted: a refused write, a duplicate, a 404
 * counts nothing.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { V1_BUCKET } from '../core/access.js';
import { messagesWritten, usagePage } from '../core/usage.js';
import { isJsonContentType } from '../protocol/content-type.js';
import { protocolError } from '../protocol/errors.js';
import { parsePageLimit } from '../protocol/parse.js';
import { usageSubjectOf } from './access.js';
import type { HandlerContext } from './context.js';
import { parseQuery } from './request.js';
import { sendError, sendJson } from './response.js';

const DEFAULT_USAGE_LIMIT = 100;
const MAX_USAGE_LIMIT = 1000;
/** Longest `bucket` or `after` a /usage query may carry: a bucket id is at most 64 characters, a cursor that and a subject. */
const MAX_USAGE_PARAM = 1024;

/** The usage record's bucket of a stream: its own, `v1` for the bucket-less family. */
export function usageBucketOf(bucket: string | null): string {
  return bucket ?? V1_BUCKET;
}

/** A write stored `data` (framed) on a stream of `bucket`: its messages and bytes count. */
export function countWrite(req: IncomingMessage, ctx: HandlerContext, bucket: string | null, contentType: string | null, data: Uint8Array): void {
  if (data.length === 0) return;
  const json = contentType !== null && isJsonContentType(contentType);
  ctx.usage.wrote(usageBucketOf(bucket), usageSubjectOf(req), messagesWritten(json, data), data.length);
}

/** A read answered `bytes` stream bytes of a stream of `bucket`. */
export function countServed(req: IncomingMessage, ctx: HandlerContext, bucket: string | null, bytes: number): void {
  if (bytes > 0) ctx.usage.served(usageBucketOf(bucket), usageSubjectOf(req), bytes);
}

/** A live reader (SSE, or a long-poll now waiting) is counted on its row until its response closes. */
export function holdLiveUsage(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, bucket: string | null): void {
  const hold = ctx.usage.hold(usageBucketOf(bucket), usageSubjectOf(req));
  res.once('close', () => ctx.usage.release(hold));
}

/** `GET /usage[?bucket=][&limit=][&after=]`: rows ordered by bucket then subject, and the cursor of the next page. */
export function handleUsage(res: ServerResponse, ctx: HandlerContext, search: string): void {
  const parsed = parseQuery(search);
  if (!parsed.ok) return sendError(res, parsed.error);
  const asked = parsePageLimit(parsed.params.get('limit'), DEFAULT_USAGE_LIMIT, MAX_USAGE_LIMIT);
  if (!asked.ok) return sendError(res, asked.error);
  const limit = asked.value;
  const bucket = parsed.params.get('bucket') ?? null;
  const after = parsed.params.get('after') ?? null;
  if ((bucket?.length ?? 0) > MAX_USAGE_PARAM || (after?.length ?? 0) > MAX_USAGE_PARAM) {
    return sendError(res, protocolError('INVALID_QUERY', `bucket and after are at most ${MAX_USAGE_PARAM} characters`));
  }
  const page = usagePage(ctx.usage.rows(), bucket, after, limit);
  sendJson(res, 200, { rows: page.rows, next: page.next, maxKeys: ctx.usage.maxKeys, totals: ctx.usage.totals() });
}
