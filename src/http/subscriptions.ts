/**
 * The reserved `__ds` routes (PROTOCOL.md sections 6 and 7): subscriptions, their
 * membership, webhook callbacks, pull-wake claim, ack and release, and the JWK Set that
 * verifies webhook signatures. Parses requests into store commands and renders outcomes;
 * the rules are core/subscription.ts's.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createHash } from 'node:crypto';
import { V1_BUCKET } from '../core/access.js';
import { canonicalConfig, normalizePath, parseSubscriptionConfig, wakeStreamRefusal, type PathCheck } from '../core/subscription-config.js';
import { statusOf as subscriptionStatusOf, wakeStreamOf, type AckItem, type SubscriptionRefusal, type TokenClaims } from '../core/subscription.js';
import type { SubscriptionState } from '../core/subscription-types.js';
import { protocolError, statusOf, type ProtocolError } from '../protocol/errors.js';
import { bucketOfScope, scopedPathProblem } from '../protocol/ids.js';
import { parsePosition } from '../protocol/offset.js';
import { parsePageLimit } from '../protocol/parse.js';
import { newIncarnation } from '../storage/executor.js';
import { rootPathOf, streamInfo } from '../subscriptions/service.js';
import { mayManageBucket } from './access.js';
import type { HandlerContext } from './context.js';
import { header, parseQuery, readBody } from './request.js';
import { send, sendJson } from './response.js';
import { createWithinSubscriptionLimit } from './bucket-limits.js';
import type { Route } from './router.js';

type SubscriptionRoute = Extract<Route, { kind: 'subscriptions' }>;

/** Bodies on these routes are small JSON documents; a config with many explicit streams fits. */
const MAX_BODY_BYTES = 1024 * 1024;
const MAX_WORKER_BYTES = 256;
const MAX_ACKS = 10_000;
/** GET lists at most this many of a subscription's streams (the listing says when more exist). */
const MAX_LISTED_STREAMS = 1_000;

/** The protocol's names for the codes rill names otherwise. */
const PROTOCOL_CODE: Partial<Record<string, string>> = {
  BAD_REQUEST: 'INVALID_REQUEST',
  INVALID_JSON: 'INVALID_REQUEST',
  INVALID_ID: 'INVALID_REQUEST',
  INVALID_ACK_OFFSET: 'INVALID_OFFSET',
};

/** rill's error body, with the protocol's `error` object beside it so Durable Streams clients read it too. */
export function sendSubscriptionError(res: ServerResponse, error: SubscriptionRefusal | ProtocolError): void {
  const refusal = error as SubscriptionRefusal;
  const nested: Record<string, unknown> = { code: PROTOCOL_CODE[error.code] ?? error.code, message: error.message };
  if (refusal.currentHolder !== undefined) nested.current_holder = refusal.currentHolder;
  if (refusal.generation !== undefined) nested.generation = refusal.generation;
  const headers: Record<string, string> = { 'content-type': 'application/json', 'cache-control': 'no-store' };
  if (statusOf(error.code) === 401) headers['www-authenticate'] = 'Bearer realm="rill-wake"';
  send(res, statusOf(error.code), headers, JSON.stringify({ code: error.code, message: error.message, error: nested }));
}

const methodNotAllowed = (res: ServerResponse, allow: string) =>
  send(res, 405, { allow, 'content-type': 'application/json' }, JSON.stringify({ code: 'METHOD_NOT_ALLOWED', message: `allowed: ${allow}`, error: { code: 'METHOD_NOT_ALLOWED', message: `allowed: ${allow}` } }));

export async function handleSubscriptions(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, route: SubscriptionRoute, search: string): Promise<void> {
  const { target, scope } = route;
  const method = req.method ?? 'GET';
  if (target.what === 'jwks') return method === 'GET' || method === 'HEAD' ? sendJwks(res, ctx) : methodNotAllowed(res, 'GET, HEAD');
  if (target.what === 'rotate-key') return method === 'POST' ? rotateKey(res, ctx) : methodNotAllowed(res, 'POST');
  // A read token sees a webhook's origin only, and no delivery error: the URL's path and query may hold a secret.
  const full = mayManageBucket(req, bucketOfScope(scope) ?? V1_BUCKET);
  if (target.what === 'list') return method === 'GET' || method === 'HEAD' ? listSubscriptions(res, ctx, scope, search, full) : methodNotAllowed(res, 'GET, HEAD');
  const key = `${scope}/${target.id}`;
  switch (target.what) {
    case 'subscription':
      if (method === 'PUT') return putSubscription(req, res, ctx, route, target.id);
      if (method === 'GET' || method === 'HEAD') return getSubscription(res, ctx, key, full);
      if (method === 'DELETE') return deleteSubscription(res, ctx, key);
      return methodNotAllowed(res, 'GET, HEAD, PUT, DELETE');
    case 'streams':
      return method === 'POST' ? addStreams(req, res, ctx, scope, key) : methodNotAllowed(res, 'POST');
    case 'stream':
      return method === 'DELETE' ? removeStream(res, ctx, key, normalizePath(target.path)) : methodNotAllowed(res, 'DELETE');
    case 'claim':
      return method === 'POST' ? claim(req, res, ctx, key) : methodNotAllowed(res, 'POST');
    case 'callback':
    case 'ack':
    case 'release':
      return method === 'POST' ? holderRequest(req, res, ctx, key, target.what) : methodNotAllowed(res, 'POST');
  }
}

async function sendJwks(res: ServerResponse, ctx: HandlerContext): Promise<void> {
  // Read again: another node sharing the store may have rotated the key (one small row).
  await ctx.subscriptions.keys.refresh();
  // Short caching: a rotated key reaches verifiers within minutes.
  send(res, 200, { 'content-type': 'application/jwk-set+json', 'cache-control': 'public, max-age=300' }, JSON.stringify(ctx.subscriptions.keys.jwks(ctx.now())));
}

/**
 * A new key signs from now on; the old one stays in the JWK Set for an hour, so deliveries
 * it signed still verify. The wake-token secret is replaced too; tokens already handed out
 * keep working until they expire (tokens.ts).
 */
async function rotateKey(res: ServerResponse, ctx: HandlerContext): Promise<void> {
  const kid = await ctx.subscriptions.rotateSecrets();
  sendJson(res, 200, { kid, ...ctx.subscriptions.keys.jwks(ctx.now()) });
}

/**
 * Reads the body as a JSON object (an empty body is `{}`); answers the refusal itself and
 * returns undefined when it cannot. Every body of these routes is an object: `null`, an
 * array or a number is refused here, so that no handler reads a field of one.
 */
async function readJsonObject(req: IncomingMessage, res: ServerResponse): Promise<Record<string, unknown> | undefined> {
  const body = await readBody(req, MAX_BODY_BYTES);
  if (!body.ok) {
    res.setHeader('connection', 'close');
    sendSubscriptionError(res, body.error);
    return undefined;
  }
  if (body.body.length === 0) return {};
  let value: unknown;
  try {
    value = JSON.parse(body.body.toString('utf8')) as unknown;
  } catch {
    sendSubscriptionError(res, protocolError('INVALID_JSON', 'the body is not valid JSON'));
    return undefined;
  }
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
  sendSubscriptionError(res, protocolError('BAD_REQUEST', 'the body must be a JSON object'));
  return undefined;
}

export function pathCheckOf(scope: string): PathCheck {
  return (path) => scopedPathProblem(scope, path);
}

/** Whether a wake stream is there to take wake events (true for none; true in a missing bucket, which the create refuses as such). */
async function wakeStreamExists(ctx: HandlerContext, scope: string, wakeStream: string | null): Promise<boolean> {
  if (wakeStream === null) return true;
  const bucket = bucketOfScope(scope);
  if (bucket !== null && (await ctx.store.getBucket(bucket)) === undefined) return true;
  return (await ctx.store.getStream(`${scope}/${wakeStream}`)) !== undefined;
}

async function putSubscription(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, route: SubscriptionRoute, id: string): Promise<void> {
  const body = await readJsonObject(req, res);
  if (body === undefined) return;
  const { limits, allowLocalhost } = ctx.settings.subscriptions;
  const parsed = parseSubscriptionConfig(body, limits, pathCheckOf(route.scope), allowLocalhost);
  if (!parsed.ok) return sendSubscriptionError(res, protocolError(parsed.refusal.code, parsed.refusal.message));
  const missing = wakeStreamRefusal(parsed.config.wakeStream, await wakeStreamExists(ctx, route.scope, parsed.config.wakeStream));
  if (missing) return sendSubscriptionError(res, protocolError(missing.code, missing.message));
  const candidate: SubscriptionState = {
    key: `${route.scope}/${id}`,
    scope: route.scope,
    id,
    incarnation: newIncarnation(),
    config: parsed.config,
    configHash: createHash('sha256').update(canonicalConfig(parsed.config)).digest('hex'),
    createdAtMs: ctx.now(),
    generation: 0,
    wake: null,
  };
  const outcome = await createWithinSubscriptionLimit(ctx, route.scope, candidate.key, () => ctx.store.run('createSubscription', { candidate, limits }));
  if ('code' in outcome) return sendSubscriptionError(res, outcome);
  if (outcome.kind === 'rejected') return sendSubscriptionError(res, outcome.error);
  if (outcome.kind === 'created') await ctx.subscriptions.indexSubscription(outcome.subscription);
  const headers: Record<string, string> = outcome.kind === 'created' ? { location: `${route.rootPath}/__ds/subscriptions/${encodeURIComponent(id)}` } : {};
  sendJson(res, outcome.kind === 'created' ? 201 : 200, await resourceOf(ctx, outcome.subscription, true), headers);
}

async function getSubscription(res: ServerResponse, ctx: HandlerContext, key: string, full: boolean): Promise<void> {
  const sub = await ctx.store.getSubscription(key);
  if (!sub) return sendSubscriptionError(res, protocolError('SUBSCRIPTION_NOT_FOUND', 'no such subscription'));
  sendJson(res, 200, await resourceOf(ctx, sub, full));
}

async function deleteSubscription(res: ServerResponse, ctx: HandlerContext, key: string): Promise<void> {
  await ctx.store.run('deleteSubscription', { key });
  ctx.subscriptions.forget(key);
  send(res, 204, { 'cache-control': 'no-store' });
}

async function listSubscriptions(res: ServerResponse, ctx: HandlerContext, scope: string, search: string, full: boolean): Promise<void> {
  const query = parseQuery(search);
  if (!query.ok) return sendSubscriptionError(res, query.error);
  const asked = parsePageLimit(query.params.get('limit'), 100, 1000);
  if (!asked.ok) return sendSubscriptionError(res, asked.error);
  const limit = asked.value;
  const after = query.params.get('after');
  const subs = await ctx.store.listSubscriptions(scope, after === undefined ? null : `${scope}/${after}`, limit + 1);
  const page = subs.slice(0, limit);
  sendJson(res, 200, {
    subscriptions: page.map((sub) => summaryOf(ctx, sub, full)),
    next: subs.length > limit ? page[page.length - 1]!.id : null,
  });
}

async function addStreams(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, scope: string, key: string): Promise<void> {
  const body = await readJsonObject(req, res);
  if (body === undefined) return;
  const streams = body.streams;
  const check = pathCheckOf(scope);
  if (!Array.isArray(streams) || streams.length === 0 || streams.some((s) => typeof s !== 'string' || check(normalizePath(s)) !== null)) {
    return sendSubscriptionError(res, protocolError('BAD_REQUEST', 'streams must be a non-empty array of stream paths'));
  }
  const { limits } = ctx.settings.subscriptions;
  if (streams.length > limits.maxStreamsPerSubscription) {
    return sendSubscriptionError(res, protocolError('SUBSCRIPTION_FULL', `a subscription holds at most ${limits.maxStreamsPerSubscription} streams`));
  }
  const paths = [...new Set((streams as string[]).map(normalizePath))];
  const outcome = await ctx.store.run('addSubscriptionStreams', { key, paths, limits });
  if (outcome.kind === 'rejected') return sendSubscriptionError(res, outcome.error);
  const sub = await ctx.store.getSubscription(key);
  if (sub) await ctx.subscriptions.indexSubscription(sub);
  send(res, 204, { 'cache-control': 'no-store' });
}

async function removeStream(res: ServerResponse, ctx: HandlerContext, key: string, path: string): Promise<void> {
  const outcome = await ctx.store.run('removeSubscriptionStream', { key, path });
  if (outcome.kind === 'rejected') return sendSubscriptionError(res, outcome.error);
  send(res, 204, { 'cache-control': 'no-store' });
}

async function claim(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, key: string): Promise<void> {
  const body = await readJsonObject(req, res);
  if (body === undefined) return;
  const worker = body.worker;
  if (typeof worker !== 'string' || worker.length === 0 || Buffer.byteLength(worker) > MAX_WORKER_BYTES) {
    return sendSubscriptionError(res, protocolError('BAD_REQUEST', `worker must be a string of 1 to ${MAX_WORKER_BYTES} bytes`));
  }
  const outcome = await ctx.store.run('claimSubscription', { key, worker, maxStreams: ctx.settings.subscriptions.limits.maxStreamsPerWake });
  if (outcome.kind === 'rejected') return sendSubscriptionError(res, outcome.error);
  const sub = outcome.subscription;
  sendJson(res, 200, {
    wake_id: sub.wake!.id,
    generation: sub.generation,
    token: ctx.subscriptions.issueToken(sub),
    streams: sub.wake!.snapshot.map(streamInfo),
    lease_ttl_ms: sub.config.leaseTtlMs,
  });
}

/** Callback (webhook), ack and release (pull-wake): the wake token is the credential. */
async function holderRequest(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext, key: string, what: 'callback' | 'ack' | 'release'): Promise<void> {
  const claims = await verifyWakeToken(req, ctx, key);
  if ('code' in claims) {
    req.resume();
    return sendSubscriptionError(res, claims);
  }
  const body = await readJsonObject(req, res);
  if (body === undefined) return;
  const parsed = parseHolderBody(body);
  if ('code' in parsed) return sendSubscriptionError(res, parsed);
  const maxStreams = ctx.settings.subscriptions.limits.maxStreamsPerWake;
  const outcome =
    what === 'release'
      ? await ctx.store.run('releaseSubscription', { key, claims, reference: parsed.reference, maxStreams })
      : await ctx.store.run('ackSubscription', { key, mode: what === 'callback' ? 'callback' : 'ack', claims, reference: parsed.reference, acks: parsed.acks, done: parsed.done, maxStreams });
  if (outcome.kind === 'rejected') return sendSubscriptionError(res, outcome.error);
  const nextWake = 'nextWake' in outcome && outcome.nextWake === true;
  if (nextWake) ctx.subscriptions.woke(outcome.subscription);
  if (what === 'release') return send(res, 204, { 'cache-control': 'no-store' });
  sendJson(res, 200, { ok: true, next_wake: nextWake });
}

async function verifyWakeToken(req: IncomingMessage, ctx: HandlerContext, key: string): Promise<TokenClaims | ProtocolError> {
  const authorization = header(req, 'authorization');
  const match = authorization === undefined ? null : /^Bearer ([^\s]+)$/i.exec(authorization);
  if (!match) return protocolError('TOKEN_INVALID', 'the request needs Authorization: Bearer with the wake token');
  const verified = await ctx.subscriptions.verifyToken(match[1]!, key);
  if (!verified.ok) return protocolError(verified.code, verified.code === 'TOKEN_EXPIRED' ? 'the wake token has expired' : 'the wake token is not valid for this subscription');
  return { incarnation: verified.claims.incarnation, generation: verified.claims.generation, wakeId: verified.claims.wakeId };
}

function parseHolderBody(body: Record<string, unknown>): { reference: { wakeId: string; generation: number }; acks: AckItem[]; done: boolean } | ProtocolError {
  const { wake_id: wakeId, generation, acks, done } = body;
  if (typeof wakeId !== 'string' || typeof generation !== 'number' || !Number.isSafeInteger(generation)) {
    return protocolError('BAD_REQUEST', 'wake_id (a string) and generation (an integer) are required');
  }
  if (done !== undefined && typeof done !== 'boolean') return protocolError('BAD_REQUEST', 'done must be a boolean');
  if (acks !== undefined && (!Array.isArray(acks) || acks.length > MAX_ACKS)) return protocolError('BAD_REQUEST', `acks must be an array of at most ${MAX_ACKS} items`);
  const items: AckItem[] = [];
  for (const ack of (acks as unknown[] | undefined) ?? []) {
    // Checked before a field is read: an item may be null.
    const a = (typeof ack === 'object' && ack !== null ? ack : {}) as { stream?: unknown; path?: unknown; offset?: unknown };
    const path = typeof a.stream === 'string' ? a.stream : a.path;
    if (typeof path !== 'string' || typeof a.offset !== 'string') {
      return protocolError('BAD_REQUEST', 'each ack is {"stream": path, "offset": offset}');
    }
    items.push({ path: normalizePath(path), offset: parsePosition(a.offset) ?? null });
  }
  return { reference: { wakeId, generation }, acks: items, done: done === true };
}

/** A subscription's answer; without `full` (a read token), the webhook URL is its origin and delivery errors are left out. */
function summaryOf(ctx: HandlerContext, sub: SubscriptionState, full: boolean): Record<string, unknown> {
  const rootUrl = `${ctx.subscriptions.options.baseUrl()}${rootPathOf(sub.scope)}`;
  const { config } = sub;
  return {
    id: sub.id,
    subscription_id: sub.id,
    type: config.type,
    ...(config.pattern === null ? {} : { pattern: config.pattern }),
    ...(config.webhookUrl === null
      ? {}
      : { webhook: { url: full ? config.webhookUrl : new URL(config.webhookUrl).origin, ...(full ? {} : { url_hidden: true }), signing: { alg: 'ed25519', kid: ctx.subscriptions.keys.signer().kid, jwks_url: `${rootUrl}/__ds/jwks.json` } } }),
    ...(config.wakeStream === null ? {} : { wake_stream: config.wakeStream }),
    lease_ttl_ms: config.leaseTtlMs,
    ...(config.description === null ? {} : { description: config.description }),
    created_at: new Date(sub.createdAtMs).toISOString(),
    status: subscriptionStatusOf(sub),
    generation: sub.generation,
    wake: sub.wake === null ? null : wakeSummary(sub, full),
  };
}

function wakeSummary(sub: SubscriptionState, full: boolean): Record<string, unknown> {
  const wake = sub.wake!;
  return {
    wake_id: wake.id,
    holder: wake.holder,
    lease_expires_at: wake.leaseExpiresAtMs === null ? null : new Date(wake.leaseExpiresAtMs).toISOString(),
    delivery:
      wake.delivery === null
        ? null
        : { attempts: wake.delivery.attempts, next_attempt_at: new Date(wake.delivery.nextAttemptAtMs).toISOString(), ...(full ? { last_error: wake.delivery.lastError } : {}) },
  };
}

async function resourceOf(ctx: HandlerContext, sub: SubscriptionState, full: boolean): Promise<Record<string, unknown>> {
  const views = await ctx.store.subscriptionLinks(sub.key, null, MAX_LISTED_STREAMS + 1);
  const streams = views.slice(0, MAX_LISTED_STREAMS).map((view) => streamInfo(wakeStreamOf(view)));
  return { ...summaryOf(ctx, sub, full), streams, streams_truncated: views.length > MAX_LISTED_STREAMS };
}
