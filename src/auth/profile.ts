/**
 * Token profiles: what a verified token must carry besides a valid signature and times.
 *
 * `default` asks nothing more (rill's own rules on exp and grants still apply). `strict`
 * takes the JWT access token profile (RFC 9068): the header says `typ: at+jwt`, so that an
 * ID token or any other JWT the same issuer signs is not taken for an access token, and
 * the token has `sub` (who quotas and revocations count), `iat` and `exp` (its lifetime
 * can be judged) and `jti` (it can be revoked alone).
 */
export const TOKEN_PROFILES = ['default', 'strict'] as const;
export type TokenProfile = (typeof TOKEN_PROFILES)[number];

/** RFC 9068's `typ`; a media type, so case does not count and `application/` may be written out (RFC 7515, 4.1.9). */
function isAccessTokenType(typ: unknown): boolean {
  return typeof typ === 'string' && typ.toLowerCase().replace(/^application\//, '') === 'at+jwt';
}

const STRICT_CLAIMS: ReadonlyArray<[name: string, holds: (value: unknown) => boolean, what: string]> = [
  ['sub', (v) => typeof v === 'string' && v !== '', 'a non-empty string'],
  ['iat', (v) => typeof v === 'number' && Number.isFinite(v), 'a NumericDate'],
  ['exp', (v) => typeof v === 'number' && Number.isFinite(v), 'a NumericDate'],
  ['jti', (v) => typeof v === 'string' && v !== '', 'a non-empty string'],
];

/** Why a verified token does not meet `profile`, or null when it does. */
export function profileProblem(profile: TokenProfile, header: Record<string, unknown>, payload: Record<string, unknown>): string | null {
  if (profile === 'default') return null;
  if (!isAccessTokenType(header.typ)) return `the token's header must say typ "at+jwt" (it says ${header.typ === undefined ? 'none' : JSON.stringify(header.typ)})`;
  for (const [name, holds, what] of STRICT_CLAIMS) {
    if (payload[name] === undefined) return `the token has no "${name}" claim`;
    if (!holds(payload[name])) return `the token's "${name}" claim must be ${what}`;
  }
  return null;
}
