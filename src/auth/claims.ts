/**
 * rill's claims in a token, and their validation. The layout (documented in docs/security.md, Claims):
 *
 *   { "sub": "billing-worker", "exp": 1767225600,
 *     "rill": { "grants": [ { "bucket": "orders", "can": ["read", "write"], "prefix": "eu-" } ] } }
 *
 * `bucket` is a bucket id, `v1` for the /v1/stream family, or `*` for all of them; `can`
 * lists permissions (the highest counts, each includes those below it); `prefix` is
 * optional. A token whose rill claim is malformed is refused as a whole (401), never
 * read in part.
 */
import { ANY_BUCKET, highestPermission, isPermission, V1_BUCKET, type Grant, type Permission } from '../core/access.js';
import { isValidBucketId, MAX_STREAM_ID_BYTES, MAX_V1_NAME_BYTES } from '../protocol/ids.js';

export const RILL_CLAIM = 'rill';
/** Grants one token may carry: each request scans them. */
export const MAX_GRANTS = 64;

/** A verified token, as the HTTP layer uses it. */
export interface Principal {
  /** `sub`, the key quotas count under; '' when the token has none. */
  subject: string;
  grants: Grant[];
  /** `exp` in milliseconds; null when the token has none. */
  expiresAtMs: number | null;
  /** `nbf` in milliseconds; null when the token has none. */
  notBeforeMs: number | null;
  /** `iat` in milliseconds; null when the token has none. */
  issuedAtMs: number | null;
  /** `jti`, which a revocation may name; null when the token has none. */
  jti: string | null;
}

export type ClaimsResult = { ok: true; principal: Principal } | { ok: false; reason: string };

function isValidGrantBucket(bucket: unknown): bucket is string {
  return typeof bucket === 'string' && (bucket === ANY_BUCKET || bucket === V1_BUCKET || isValidBucketId(bucket));
}

function grantOf(raw: unknown, at: number): Grant | string {
  if (typeof raw !== 'object' || raw === null) return `grant ${at} is not an object`;
  const { bucket, can, prefix } = raw as Record<string, unknown>;
  if (!isValidGrantBucket(bucket)) return `grant ${at}: bucket must be a bucket id, "v1" or "*"`;
  if (!Array.isArray(can) || !can.every(isPermission)) return `grant ${at}: can must list read, write, manage or admin`;
  const level = highestPermission(can as Permission[]);
  if (level === null) return `grant ${at}: can is empty`;
  // A prefix may be as long as the longest name it can match: /v1/stream names are longer than bucket ids.
  const maxPrefixBytes = bucket === V1_BUCKET || bucket === ANY_BUCKET ? MAX_V1_NAME_BYTES : MAX_STREAM_ID_BYTES;
  if (prefix !== undefined && (typeof prefix !== 'string' || Buffer.byteLength(prefix) > maxPrefixBytes)) {
    return `grant ${at}: prefix must be a string of at most ${maxPrefixBytes} bytes`;
  }
  return { bucket, prefix: (prefix as string | undefined) ?? '', level };
}

function secondsToMs(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value * 1000 : null;
}

/** The principal a verified payload describes; jose has already checked exp, nbf, iss and aud. */
export function principalOf(payload: Record<string, unknown>): ClaimsResult {
  const claim = payload[RILL_CLAIM];
  if (typeof claim !== 'object' || claim === null) return { ok: false, reason: `the token has no "${RILL_CLAIM}" claim` };
  const rawGrants = (claim as Record<string, unknown>).grants;
  if (!Array.isArray(rawGrants)) return { ok: false, reason: `"${RILL_CLAIM}.grants" must be a list` };
  if (rawGrants.length > MAX_GRANTS) return { ok: false, reason: `a token carries at most ${MAX_GRANTS} grants` };
  const grants: Grant[] = [];
  for (const [at, raw] of rawGrants.entries()) {
    const grant = grantOf(raw, at);
    if (typeof grant === 'string') return { ok: false, reason: grant };
    grants.push(grant);
  }
  const subject = typeof payload.sub === 'string' ? payload.sub : '';
  const jti = typeof payload.jti === 'string' ? payload.jti : null;
  const times = { expiresAtMs: secondsToMs(payload.exp), notBeforeMs: secondsToMs(payload.nbf), issuedAtMs: secondsToMs(payload.iat) };
  return { ok: true, principal: { subject, grants, ...times, jti } };
}

/** The claims `rill token` signs: the inverse of principalOf. */
export function grantClaims(grants: ReadonlyArray<{ bucket: string; can: Permission[]; prefix?: string }>): Record<string, unknown> {
  return { [RILL_CLAIM]: { grants: grants.map((g) => ({ bucket: g.bucket, can: g.can, ...(g.prefix ? { prefix: g.prefix } : {}) })) } };
}
