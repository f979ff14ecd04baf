/**
 * Rules about a verified token's life: how long it may live (`--auth-max-ttl`) and
 * whether an admin has revoked it. Pure: the caller verified the signature (src/auth/),
 * keeps the revocations (src/auth/revocations.ts) and passes the time in.
 */
import { protocolError, type ProtocolError } from '../protocol/errors.js';

/** What these rules read of a token; times in milliseconds, null when the claim is absent. */
export interface TokenTimes {
  issuedAtMs: number | null;
  expiresAtMs: number | null;
}

/**
 * Why a token lives too long, or null. Its lifetime is `exp - iat`, or `exp - now` when it
 * has no `iat` (how long it would still be accepted); a token without `exp` never expires
 * and is refused. An `iat` in the future does not shorten the lifetime: it counts from now.
 */
export function lifetimeRefusal(token: TokenTimes, maxTtlMs: number, nowMs: number): ProtocolError | null {
  if (token.expiresAtMs === null) return protocolError('TOKEN_LIFETIME_TOO_LONG', `the token has no exp: tokens must expire within ${maxTtlMs} ms of being issued`);
  const from = token.issuedAtMs === null ? nowMs : Math.min(token.issuedAtMs, nowMs);
  // Infinity (exp: 1e308 in seconds) and NaN both fail `<=`.
  if (token.expiresAtMs - from <= maxTtlMs) return null;
  return protocolError('TOKEN_LIFETIME_TOO_LONG', `the token lives longer than this server accepts (at most ${maxTtlMs} ms from iat to exp)`);
}

/** Who a revocation names: one token by its `jti`, or every token of a subject (`sub`). */
export type RevocationTarget = { jti: string } | { sub: string };

/** A revocation: tokens it names are refused while `nowMs < untilMs`. */
export type Revocation = RevocationTarget & { untilMs: number };

/** Longest `jti` or `sub` a revocation may name (a token's are not bounded otherwise than by its size). */
export const MAX_REVOKED_NAME_BYTES = 256;

export interface RevocableToken {
  jti: string | null;
  subject: string;
}

/** Revocations by name, the latest `until` of each: a token is looked up, not compared with every one. */
export interface RevocationIndex {
  jti: ReadonlyMap<string, number>;
  sub: ReadonlyMap<string, number>;
}

export function indexRevocations(revocations: ReadonlyArray<Revocation>): RevocationIndex {
  const jti = new Map<string, number>();
  const sub = new Map<string, number>();
  for (const r of revocations) {
    const [map, name] = 'jti' in r ? [jti, r.jti] : [sub, r.sub];
    map.set(name, Math.max(map.get(name) ?? -Infinity, r.untilMs));
  }
  return { jti, sub };
}

/** The revocation that refuses this token at `nowMs`, as a refusal, or null. */
export function revocationRefusal(token: RevocableToken, index: RevocationIndex, nowMs: number): ProtocolError | null {
  const byJti = token.jti === null ? undefined : index.jti.get(token.jti);
  const bySub = token.subject === '' ? undefined : index.sub.get(token.subject);
  const [kind, untilMs] = byJti !== undefined && nowMs < byJti ? ['jti', byJti] : ['subject', bySub];
  if (untilMs === undefined || nowMs >= untilMs) return null;
  return protocolError('TOKEN_REVOKED', `the token has been revoked (by ${kind}) until ${new Date(untilMs).toISOString()}`);
}

/** The revocations still in force at `nowMs`: those past their time are forgotten. */
export function liveRevocations(revocations: ReadonlyArray<Revocation>, nowMs: number): Revocation[] {
  return revocations.filter((r) => nowMs < r.untilMs);
}

/**
 * A revocation asked for in a request body: `{"jti": ...}` or `{"sub": ...}` with an
 * optional `until` (RFC 3339 time). Without `until` it lasts `defaultMs` (the server's max
 * TTL: the longest any token accepted now can still live); `until` is at most `maxAheadMs` ahead.
 */
export function revocationOf(body: unknown, defaultMs: number, maxAheadMs: number, nowMs: number): Revocation | ProtocolError {
  const bad = (message: string) => protocolError('BAD_REQUEST', message);
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return bad('the body must be a JSON object');
  const { jti, sub, until } = body as Record<string, unknown>;
  if ((jti === undefined) === (sub === undefined)) return bad('name exactly one of "jti" and "sub"');
  const name = jti ?? sub;
  if (typeof name !== 'string' || name === '' || Buffer.byteLength(name) > MAX_REVOKED_NAME_BYTES) {
    return bad(`"${jti !== undefined ? 'jti' : 'sub'}" must be a non-empty string of at most ${MAX_REVOKED_NAME_BYTES} bytes`);
  }
  let untilMs = nowMs + defaultMs;
  if (until !== undefined) {
    untilMs = typeof until === 'string' ? Date.parse(until) : NaN;
    if (!Number.isFinite(untilMs) || untilMs <= nowMs || untilMs - nowMs > maxAheadMs) return bad(`"until" must be a time (RFC 3339) in the future, at most ${maxAheadMs} ms ahead`);
  }
  return jti !== undefined ? { jti: name, untilMs } : { sub: name, untilMs };
}
