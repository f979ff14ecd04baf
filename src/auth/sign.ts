/** Signing HS256 tokens with a secret file, for `rill token` and for tests. */
import { randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import type { Permission } from '../core/access.js';
import { grantClaims } from './claims.js';
import { readSecretFile } from './verifier.js';

export interface TokenRequest {
  grants: ReadonlyArray<{ bucket: string; can: Permission[]; prefix?: string }>;
  subject?: string;
  issuer?: string;
  audience?: string;
  /** The token's id, which `rill revoke --jti` names; a random UUID unless given. */
  jti?: string;
  /** Lifetime from `nowMs`. */
  ttlMs: number;
  nowMs: number;
}

export async function signToken(secret: Uint8Array, request: TokenRequest): Promise<string> {
  const nowSeconds = Math.floor(request.nowMs / 1000);
  let jwt = new SignJWT(grantClaims(request.grants))
    // RFC 9068's type for access tokens, which --auth-profile strict asks for: rill's own tokens meet it.
    .setProtectedHeader({ alg: 'HS256', typ: 'at+jwt' })
    .setIssuedAt(nowSeconds)
    .setExpirationTime(nowSeconds + Math.ceil(request.ttlMs / 1000))
    .setJti(request.jti ?? randomUUID());
  if (request.subject) jwt = jwt.setSubject(request.subject);
  if (request.issuer) jwt = jwt.setIssuer(request.issuer);
  if (request.audience) jwt = jwt.setAudience(request.audience);
  return jwt.sign(secret);
}

export function signTokenWithFile(secretFile: string, request: TokenRequest): Promise<string> {
  return signToken(readSecretFile(secretFile), request);
}
