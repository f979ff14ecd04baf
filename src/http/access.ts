/**
 * Access control at the front door: the one place that decides, for a routed request and
 * its token, whether it is served, refused (401, 403, 429) or concealed. Every route's
 * permission is a row of `ROUTE_PERMISSIONS`: a new route is a new row.
 *
 * Concealment: a request on a stream or bucket the token cannot read is served as a
 * request on one that does not exist (`PHANTOM_*`), by the same handler, so that its
 * answer (status, headers, body, and the work done to find it) is that of a missing one
 * on every route, request errors included. Only creating a bucket is answered here,
 * since creating the phantom would create it.
 *
 * A request without a token is refused, except a read of a stream in a bucket an admin
 * made public (admitAnonymous): it is then served as a read-only token on that bucket.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { decideAccess, readablePrefixes, V1_BUCKET, type AccessTarget, type Permission } from '../core/access.js';
import { usageSubject } from '../core/usage.js';
import type { Principal } from '../auth/claims.js';
import { messagesOf, Quotas, type WrittenPayload } from '../auth/quota.js';
import { Revocations } from './revocations.js';
import type { BucketSettingsCache } from './bucket-settings.js';
import { anonymousMayRead, DEFAULT_BUCKET_SETTINGS } from '../core/bucket-settings.js';
import { TokenVerifier, timeRefusal, unauthorized } from '../auth/verifier.js';
import type { MetaStore } from '../subscriptions/meta.js';
import { protocolError, statusOf, type ProtocolError } from '../protocol/errors.js';
import { bucketOfScope } from '../protocol/ids.js';
import type { HeaderMap } from './response.js';
import { asksParam, mayHoldParam } from './request.js';
import type { Route, StreamAddress } from './router.js';
import { isAuthOn, type AuthSettings } from './settings.js';

/**
 * What each route and method needs. Methods a route does not serve need read: a token
 * that sees the target gets its 405, one that does not gets the 404 of a missing one.
 * `buckets GET` (listing every bucket) is the server-wide route.
 */
export const ROUTE_PERMISSIONS: Readonly<Record<string, Permission>> = {
  'stream GET': 'read',
  'stream HEAD': 'read',
  'stream POST': 'write',
  'stream PUT': 'manage',
  'stream DELETE': 'manage',
  'snapshot GET': 'read',
  'snapshot HEAD': 'read',
  'snapshot PUT': 'manage',
  'retention PUT': 'manage',
  'bootstrap GET': 'read',
  'bootstrap HEAD': 'read',
  'attrs GET': 'read',
  'attrs HEAD': 'read',
  'attrs PUT': 'manage',
  'append-batch POST': 'write',
  // A stream's producer records: read, as its stats (which count them) are.
  'producers GET': 'read',
  'producers HEAD': 'read',
  'bucket GET': 'read',
  'bucket HEAD': 'read',
  'bucket PUT': 'admin',
  'bucket DELETE': 'admin',
  // Settings: admin on `*` (accessRuleOf), since a bucket's admin is its tenant and must not lift its own limits.
  'bucket PATCH': 'admin',
  'bucket-streams GET': 'read',
  'bucket-streams HEAD': 'read',
  'buckets GET': 'admin',
  // Subscriptions span a scope's streams: they need a grant on the whole bucket (`v1` for /v1/stream).
  'subscription GET': 'read',
  'subscription HEAD': 'read',
  'subscription PUT': 'manage',
  'subscription DELETE': 'manage',
  'subscription-list GET': 'read',
  'subscription-list HEAD': 'read',
  'subscription-streams POST': 'manage',
  'subscription-stream DELETE': 'manage',
  'subscription-claim POST': 'write',
  // The webhook signing keys serve every subscription of the server.
  'subscription-rotate-key POST': 'admin',
  // Revoking tokens acts on every bucket's.
  'revocations GET': 'admin',
  'revocations HEAD': 'admin',
  'revocations POST': 'admin',
};

/** ROUTE_PERMISSIONS by route and then method: looked up by constant strings, no key built per request. */
const PERMISSION_OF: Readonly<Record<string, Readonly<Record<string, Permission>>>> = (() => {
  const table: Record<string, Record<string, Permission>> = {};
  for (const [row, need] of Object.entries(ROUTE_PERMISSIONS)) {
    const [target, method] = row.split(' ') as [string, string];
    (table[target] ??= {})[method] = need;
  }
  return table;
})();

/** Never a stored stream or bucket: keys are `b/...` or `v1/...`, bucket ids `[a-z0-9_-]`. */
export const PHANTOM_BUCKET = '~concealed';
const PHANTOM_KEY = 'x/concealed';

const PRINCIPAL = Symbol('rill.principal');
/**
 * The last Authorization header a connection sent and the principal it verified to, under
 * one version of the keys: a keep-alive client sends the same header on every request, so
 * its next requests skip parsing the header and looking the token up (which hashes
 * hundreds of characters each time).
 */
const SEEN = Symbol('rill.seenToken');
type RememberingSocket = Socket & { [SEEN]?: { header: string; keys: number; principal: Principal } };
type Tagged = IncomingMessage & { [PRINCIPAL]?: Principal };

export type Admission = { ok: true; route: Route; search: string } | { ok: false; error: ProtocolError; headers?: HeaderMap };

/** The permission a request needs (its row of ROUTE_PERMISSIONS) and what it acts on; null for routes nobody guards. */
export function accessRuleOf(route: Route, method: string): { need: Permission; target: AccessTarget } | null {
  switch (route.kind) {
    case 'stream':
      return { need: PERMISSION_OF.stream![method] ?? 'read', target: streamTarget(route.stream) };
    case 'stream-ext':
      return { need: PERMISSION_OF[route.ext]?.[method] ?? 'read', target: streamTarget(route.stream) };
    case 'bucket':
      if (method === 'PATCH') return { need: 'admin', target: { kind: 'server' } };
      return { need: PERMISSION_OF.bucket![method] ?? 'read', target: { kind: 'bucket', bucket: route.bucket } };
    case 'bucket-streams':
      return { need: PERMISSION_OF['bucket-streams']![method] ?? 'read', target: { kind: 'listing', bucket: route.bucket } };
    case 'subscriptions': {
      // The JWK Set is public; callback, ack and release carry a wake token instead (http/subscriptions.ts).
      if (!guardsSubscriptionRoute(route)) return null;
      const row = route.target.what === 'subscription' ? 'subscription' : `subscription-${route.target.what}`;
      const bucket = bucketOfScope(route.scope) ?? V1_BUCKET;
      const target: AccessTarget = route.target.what === 'rotate-key' ? { kind: 'server' } : { kind: 'bucket', bucket };
      return { need: PERMISSION_OF[row]?.[method] ?? 'read', target };
    }
    case 'health':
    case 'error':
    // A transaction needs write permission on each stream it names, which only its body
    // tells: the handler asks for each (writableOrMissing); here the token is only authenticated.
    case 'transaction':
      return null;
    default:
      // Any other route acts on the server as a whole (listing every bucket: `buckets GET`).
      // Fail closed: one without a row of its own needs admin on `*`.
      return { need: PERMISSION_OF[(route as { kind: string }).kind]?.[method] ?? 'admin', target: { kind: 'server' } };
  }
}

/** Whether a subscription route needs an access token: not the JWK Set, not a wake token's callback, ack or release. */
export function guardsSubscriptionRoute(route: Extract<Route, { kind: 'subscriptions' }>): boolean {
  const what = route.target.what;
  return what !== 'jwks' && what !== 'callback' && what !== 'ack' && what !== 'release';
}

function streamTarget(address: StreamAddress): AccessTarget {
  return { kind: 'stream', bucket: address.bucket ?? V1_BUCKET, stream: address.id };
}

function phantomStream(address: StreamAddress): StreamAddress {
  return { key: PHANTOM_KEY, bucket: PHANTOM_BUCKET, id: address.id, path: address.path, affinity: address.affinity };
}

/** The same request on a target that does not exist; null when that cannot be served safely. */
function concealed(route: Route, method: string): Route | null {
  switch (route.kind) {
    case 'stream':
    case 'stream-ext':
      return { ...route, stream: phantomStream(route.stream) };
    case 'bucket':
      return method === 'PUT' ? null : { kind: 'bucket', bucket: PHANTOM_BUCKET };
    case 'bucket-streams':
      return { kind: 'bucket-streams', bucket: PHANTOM_BUCKET };
    case 'subscriptions':
      return { ...route, scope: `b/${PHANTOM_BUCKET}`, rootPath: `/${PHANTOM_BUCKET}` };
    default:
      return route;
  }
}

/** The token of `Authorization: Bearer <token>`; '' for another scheme (refused as no valid token). */
function bearerOf(header: string | undefined): string | null {
  if (header === undefined) return null;
  return header.length > 7 && header.slice(0, 7).toLowerCase() === 'bearer ' ? header.slice(7).trim() : '';
}

/**
 * The refusal of an Authorization header without `Bearer `: the commonest slip is the
 * token alone, so the answer says to add the scheme. The value itself is never echoed
 * (it may be a secret); a scheme name of another kind is.
 */
function notBearer(header: string): ProtocolError {
  const scheme = /^([A-Za-z][A-Za-z0-9-]{0,19}) /.exec(header)?.[1];
  if (scheme === undefined) return unauthorized('the Authorization header has no scheme: send Authorization: Bearer <token> (add "Bearer " before the token)');
  return unauthorized(`the Authorization header uses the ${scheme} scheme: rill takes Authorization: Bearer <token>`);
}

/** The token of a request: the Authorization header, or on GET the `token` query parameter (taken out of the query). */
function tokenOf(req: IncomingMessage, search: string): { token: string | null; search: string } | ProtocolError {
  const fromHeader = bearerOf(req.headers.authorization);
  const fromQuery = mayHoldParam(search, 'token') ? new URLSearchParams(search).get('token') : null;
  if (fromHeader === '' && fromQuery === null) return notBearer(req.headers.authorization!);
  if (fromQuery === null) return { token: fromHeader, search };
  const params = new URLSearchParams(search);
  if (req.method !== 'GET') return unauthorized('a token in the query is accepted on GET only; send Authorization: Bearer');
  if (fromHeader !== null || params.getAll('token').length > 1) return protocolError('INVALID_QUERY', 'send one token, in the Authorization header or the query');
  params.delete('token');
  return { token: fromQuery, search: params.toString() };
}

const CHALLENGE = 'Bearer realm="rill"';
const INVALID_TOKEN_CHALLENGE = 'Bearer realm="rill", error="invalid_token"';

export class AccessControl {
  readonly on: boolean;
  private readonly verifier: TokenVerifier | null;
  private readonly quotas: Quotas;
  /** Null with auth off, and until the store is open (keepRevocationsIn). */
  revocations: Revocations | null = null;
  /** Null with auth off (everything is readable then), and until the store is open. */
  private bucketSettings: BucketSettingsCache | null = null;

  constructor(private readonly settings: AuthSettings, nowMs: number) {
    this.on = isAuthOn(settings);
    this.verifier = this.on ? new TokenVerifier(settings, nowMs) : null;
    this.quotas = new Quotas(settings.quotas);
  }

  /** Where the public-read setting of buckets is found (bucket-settings.ts). */
  readBucketSettingsFrom(settings: BucketSettingsCache): void {
    if (this.on) this.bucketSettings = settings;
  }

  /** Keeps revocations in the store's meta table, shared by every node on it. */
  keepRevocationsIn(meta: MetaStore): void {
    if (this.on) this.revocations = new Revocations(meta, this.settings.revocationsCheckMs);
  }

  /**
   * Authenticates and authorises a routed request: its route to serve (the phantom one
   * when concealed) and its query without the token, or a refusal. Answers synchronously
   * for a token verified before, which is nearly every request.
   */
  admit(req: IncomingMessage, res: ServerResponse, route: Route, search: string, nowMs: number): Admission | Promise<Admission> {
    // Once per --auth-revocations-check a request waits for the revocations to be re-read.
    if (this.revocations?.stale(nowMs)) return this.revocations.refresh(nowMs).then(() => this.admitNow(req, res, route, search, nowMs));
    return this.admitNow(req, res, route, search, nowMs);
  }

  private admitNow(req: IncomingMessage, res: ServerResponse, route: Route, search: string, nowMs: number): Admission | Promise<Admission> {
    const verifier = this.verifier!;
    const keys = verifier.keysVersion(nowMs);
    const header = req.headers.authorization;
    const socket = req.socket as RememberingSocket;
    const seen = socket[SEEN];
    if (seen !== undefined && seen.header === header && seen.keys === keys && !mayHoldParam(search, 'token')) {
      return this.authorize(req, res, route, search, timeRefusal(seen.principal, nowMs) ?? seen.principal, nowMs);
    }
    const found = tokenOf(req, search);
    if ('code' in found) return refusal(found);
    if (found.token === null) return this.admitAnonymous(req, res, route, found.search, nowMs);
    const known = verifier.lookup(found.token, nowMs);
    const remember = (principal: Principal | ProtocolError): Principal | ProtocolError => {
      if (!('code' in principal) && header !== undefined && found.search === search) socket[SEEN] = { header, keys, principal };
      return principal;
    };
    if (known !== undefined) return this.authorize(req, res, route, found.search, remember(known), nowMs);
    return verifier.verify(found.token, nowMs).then((principal) => this.authorize(req, res, route, found.search, remember(principal), nowMs));
  }

  /**
   * A request without any token: refused, unless it reads a stream of a public bucket
   * (core/bucket-settings.ts anonymousMayRead). It is then served as a token granting
   * read on that bucket alone would be, so every later check (concealment of other
   * streams, quotas under one shared subject) holds as for any token. A request that
   * sent a token, even a bad one, never comes here.
   */
  private admitAnonymous(req: IncomingMessage, res: ServerResponse, route: Route, search: string, nowMs: number): Admission | Promise<Admission> {
    const refused: Admission = { ok: false, error: unauthorized('this server needs a token: send Authorization: Bearer <token>'), headers: { 'www-authenticate': CHALLENGE } };
    const method = req.method ?? 'GET';
    const rule = accessRuleOf(route, method);
    if (this.bucketSettings === null || rule === null || rule.target.kind !== 'stream' || rule.target.bucket === V1_BUCKET) return refused;
    if (!anonymousMayRead(PUBLIC_PROBE, method, rule.need, rule.target.kind)) return refused;
    const bucket = rule.target.bucket;
    return this.bucketSettings.get(bucket).then((settings) =>
      anonymousMayRead(settings, method, rule.need, 'stream') ? this.authorize(req, res, route, search, anonymousReader(bucket), nowMs) : refused,
    );
  }

  private authorize(req: IncomingMessage, res: ServerResponse, route: Route, search: string, principal: Principal | ProtocolError, nowMs: number): Admission {
    if ('code' in principal) return refusal(principal);
    const revoked = this.revocations?.refusal(principal, nowMs);
    if (revoked) return refusal(revoked);
    (req as Tagged)[PRINCIPAL] = principal;
    const method = req.method ?? 'GET';
    const rule = accessRuleOf(route, method);
    if (rule !== null) {
      const verdict = decideAccess(principal.grants, rule.need, rule.target);
      if (verdict === 'forbid') return { ok: false, error: protocolError('FORBIDDEN', `this token lacks the ${rule.need} permission here`) };
      if (verdict === 'conceal') {
        const hidden = concealed(route, method);
        return hidden === null ? { ok: false, error: protocolError('BUCKET_NOT_FOUND', 'bucket not found') } : { ok: true, route: hidden, search };
      }
    }
    const overQuota = this.quotas.enabled ? this.takeQuota(req, res, route, search, principal.subject, nowMs) : null;
    if (overQuota) return { ok: false, error: overQuota };
    return { ok: true, route, search };
  }

  /** Whether writes are charged per message (a quota on appends): else callers skip counting. */
  get chargesMessages(): boolean {
    return this.quotas.limitsMessages;
  }

  /**
   * Charges the messages a write stores (quota.ts messagesOf) to its token's subject, once
   * its body is framed and before anything is written; a refusal means write nothing.
   */
  chargeMessages(req: IncomingMessage, payloads: readonly WrittenPayload[], nowMs: number): ProtocolError | null {
    const subject = principalOfRequest(req)?.subject;
    if (subject === undefined || !this.chargesMessages) return null;
    return this.quotas.takeMessages(subject, messagesOf(payloads), nowMs);
  }

  /** Charges the request to its subject's quotas, or refuses it having charged nothing. */
  private takeQuota(req: IncomingMessage, res: ServerResponse, route: Route, search: string, subject: string, nowMs: number): ProtocolError | null {
    const method = req.method;
    const write = arrivingWrite(route, method);
    if (write !== null) {
      const declared = req.headers['content-length'];
      if (declared === undefined && req.headers['transfer-encoding'] !== undefined && this.quotas.limitsBytes) {
        return protocolError('LENGTH_REQUIRED', 'with a quota on bytes, a body must come with Content-Length');
      }
      return this.quotas.takeArrival(subject, { ...write, bytes: Number(declared ?? 0) || 0 }, nowMs);
    }
    // The read handler's own reading of the query: `%6Cive=sse` is a live read too.
    if (method === 'GET' && route.kind === 'stream' && asksParam(search, 'live')) {
      const refused = this.quotas.takeLive(subject, nowMs);
      if (refused) return refused;
      res.once('close', () => this.quotas.releaseLive(subject));
    }
    return null;
  }
}

/**
 * Whether a request writes, and how quotas see it; null for one that does not. A POST to
 * a stream, its append-batch or a transaction appends (its messages are charged once its
 * body is framed: chargeMessages); a PUT of a stream creates or forks it, and a PUT of a
 * subscription creates it. Other PUTs (attributes, snapshots, retention) are charged their
 * bytes only.
 */
function arrivingWrite(route: Route, method: string | undefined): { append: boolean; create: boolean } | null {
  if (method !== 'POST' && method !== 'PUT') return null;
  const append = method === 'POST';
  switch (route.kind) {
    case 'stream':
      return { append, create: !append };
    case 'stream-ext':
    case 'transaction':
      return { append, create: false };
    case 'subscriptions':
      return route.target.what === 'subscription' && method === 'PUT' ? { append: false, create: true } : null;
    default:
      return null;
  }
}

/** Settings of a public bucket: asks whether a request could be a public read before any lookup. */
const PUBLIC_PROBE = { ...DEFAULT_BUCKET_SETTINGS, publicRead: true };

/** The subject anonymous readers share: quotas count them together, apart from every token's. */
export const ANONYMOUS_SUBJECT = '~anonymous';

/** What a request without a token may do in a public bucket: read its streams, nothing else. */
function anonymousReader(bucket: string): Principal {
  return { subject: ANONYMOUS_SUBJECT, grants: [{ bucket, prefix: '', level: 'read' }], expiresAtMs: null, notBeforeMs: null, issuedAtMs: null, jti: null };
}

function refusal(error: ProtocolError): Admission {
  if (statusOf(error.code) !== 401) return { ok: false, error };
  return { ok: false, error, headers: { 'www-authenticate': invalidTokenChallenge(error) } };
}

/**
 * The challenge of a token that was sent and refused, saying why (RFC 6750's
 * error_description) and with which code (an extension parameter, `code`): an answer to
 * HEAD has no body, so it is the only place a client finds them, and an expired token
 * says so on HEAD too. The quoted string may not hold `"` or `\`, nor anything unprintable.
 */
function invalidTokenChallenge(error: ProtocolError): string {
  return `${INVALID_TOKEN_CHALLENGE}, error_description="${error.message.replace(/[^\x20-\x21\x23-\x5b\x5d-\x7e]/g, "'")}", code="${error.code}"`;
}

/** The subject a request's usage is counted under (core/usage.ts): its token's `sub`, `-` without auth or without one. */
export function usageSubjectOf(req: IncomingMessage): string {
  return usageSubject(principalOfRequest(req)?.subject);
}

function principalOfRequest(req: IncomingMessage): Principal | undefined {
  return (req as Tagged)[PRINCIPAL];
}

/** When the request's token expires (ms), for live readers that must end then; null without one. */
export function tokenExpiryOf(req: IncomingMessage): number | null {
  return principalOfRequest(req)?.expiresAtMs ?? null;
}

/** Why a live reader must stop now, its token having expired, or null. */
export function tokenRefusalAt(req: IncomingMessage, nowMs: number): ProtocolError | null {
  const principal = principalOfRequest(req);
  return principal === undefined ? null : timeRefusal(principal, nowMs);
}

/** A stream another one names (a fork source): itself if the request may read it, else one that does not exist. */
export function readableOrMissing(req: IncomingMessage, address: StreamAddress): StreamAddress {
  const principal = principalOfRequest(req);
  if (principal === undefined) return address;
  return decideAccess(principal.grants, 'read', streamTarget(address)) === 'allow' ? address : phantomStream(address);
}

/**
 * A stream a request writes besides its route's own (a group transaction's operations):
 * itself when the token may write it, the refusal when it may only see it, and one that
 * does not exist when it may not even see it (concealment).
 */
export function writableOrMissing(req: IncomingMessage, address: StreamAddress): StreamAddress | ProtocolError {
  const principal = principalOfRequest(req);
  if (principal === undefined) return address;
  const verdict = decideAccess(principal.grants, 'write', streamTarget(address));
  if (verdict === 'forbid') return protocolError('FORBIDDEN', 'this token lacks the write permission here');
  return verdict === 'allow' ? address : phantomStream(address);
}

/**
 * Whether the request may manage a bucket as a whole (true with auth off): what a
 * subscription answer shows of a webhook's URL and errors depends on it.
 */
export function mayManageBucket(req: IncomingMessage, bucket: string): boolean {
  const principal = principalOfRequest(req);
  return principal === undefined || decideAccess(principal.grants, 'manage', { kind: 'bucket', bucket }) === 'allow';
}

/** The name prefixes a bucket listing may show this request ('all' without auth). */
export function listingScope(req: IncomingMessage, bucket: string): 'all' | string[] {
  const principal = principalOfRequest(req);
  return principal === undefined ? 'all' : readablePrefixes(principal.grants, bucket);
}

/** A request URL fit for a log: the value of a `token` query parameter replaced. */
export function withoutToken(url: string | undefined): string | undefined {
  return url?.replace(/([?&]token=)[^&]*/g, '$1[redacted]');
}
