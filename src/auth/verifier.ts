/**
 * Token verification through `jose`: HS256 with a shared secret file, and asymmetric keys
 * (RS256, ES256, EdDSA...) from a JWKS file, chosen by `kid`. Each family verifies only
 * its own algorithms, so a token signed HS256 with a public key as its "secret" (the
 * HS/RS confusion) never verifies, and `alg: none` never does.
 *
 * Public keys may also come from an https URL (`--auth-jwks-url`) or an OpenID Connect
 * issuer's discovery document (`--auth-oidc-issuer`): see remote-keys.ts. A fetched set
 * that differs from the one before forgets the remembered tokens as a key file change does.
 *
 * Key files are re-read when they change (checked at most every `keysCheckMs`), so keys
 * rotate without a restart: publish the new key next to the old one, move signers over,
 * then remove the old one. Verified tokens are remembered (exp and nbf are checked again
 * on every use), so that a request with a token seen before costs a map lookup rather
 * than a signature check; a key change forgets them all.
 */
import { statSync, readFileSync } from 'node:fs';
import { createLocalJWKSet, errors, jwtVerify, decodeProtectedHeader, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import { lifetimeRefusal } from '../core/token.js';
import { KeyFileError, refuseSharedKeyFile, secretTextProblem } from './key-files.js';

export { KeyFileError };
import { principalOf, type Principal } from './claims.js';
import { profileProblem, type TokenProfile } from './profile.js';
import { createRemoteKeys, KeySetUnavailable, MAX_REMOTE_KEYS_BYTES, REMOTE_KEYS_TIMEOUT_MS } from './remote-keys.js';

export const ASYMMETRIC_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];
/** Shortest HS256 secret accepted: RFC 7518 asks for a key at least as long as the hash. */
export const MIN_SECRET_BYTES = 32;
/** Verified tokens remembered; past it the memory starts over. */
const MAX_REMEMBERED = 10_000;
/** Longest token accepted (a header is limited anyway; this bounds the work of a bad one). */
export const MAX_TOKEN_BYTES = 8 * 1024;

/** What a verifier is told (the server's AuthSettings, http/settings.ts, carry these and more). */
export interface VerifierOptions {
  /** HS256 shared secret (at least 32 bytes). */
  secretFile: string | null;
  /** Public keys (JWKS), chosen by `kid`. At most one of jwksFile, jwksUrl and oidcIssuer (checked at startup). */
  jwksFile: string | null;
  /** Public keys (JWKS) fetched from this https URL, chosen by `kid`. */
  jwksUrl: string | null;
  /** An OpenID Connect issuer: its discovery document names the JWKS URL, and tokens must have it as `iss`. */
  oidcIssuer: string | null;
  /** With a JWKS URL: shortest time between two fetches for a token naming an unknown `kid`. */
  jwksCooldownMs: number;
  /** With a JWKS URL: age after which the fetched keys are fetched again before use. */
  jwksMaxAgeMs: number;
  /** What a verified token must carry besides: `strict` is RFC 9068's access token profile. */
  profile: TokenProfile;
  /** Required `iss`; null: not checked. */
  issuer: string | null;
  /** Required `aud`; null: not checked. */
  audience: string | null;
  /** How often the key files are checked for changes, for rotation (0: on every verification). */
  keysCheckMs: number;
  /** Longest lifetime a token may have (exp - iat, or exp - now without iat); tokens without exp are refused. */
  maxTtlMs: number;
}

interface Keys {
  secret: Uint8Array | null;
  jwks: JWTVerifyGetKey | null;
}

/** Runs a read of `path`, turning a file system error into a KeyFileError. */
function readingKeyFile<T>(path: string, read: () => T): T {
  try {
    return read();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new KeyFileError(path, 'no such file');
    if (code === 'EACCES') throw new KeyFileError(path, 'not readable by this user');
    if (code === 'EISDIR') throw new KeyFileError(path, 'is a directory, not a file');
    throw error;
  }
}

/** A file's identity and contents version: a change of any means "read it again". */
function versionOf(path: string | null): string {
  if (path === null) return '';
  const s = readingKeyFile(path, () => statSync(path));
  return `${s.ino}:${s.size}:${s.mtimeMs}`;
}

/** The HS256 secret of a file only its owner may read, refusing a public key set or a PEM key given by mistake. */
export function readSecretFile(path: string): Uint8Array {
  const text = readingKeyFile(path, () => {
    refuseSharedKeyFile(path, 'the HS256 secret');
    return readFileSync(path, 'utf8');
  }).trim();
  const problem = secretTextProblem(text);
  if (problem !== null) throw new KeyFileError(path, problem);
  const secret = Buffer.from(text, 'utf8');
  if (secret.length < MIN_SECRET_BYTES) throw new KeyFileError(path, `the secret is ${secret.length} bytes; an HS256 secret must be at least ${MIN_SECRET_BYTES}`);
  return secret;
}

function readJwksFile(path: string): JWTVerifyGetKey {
  const text = readingKeyFile(path, () => readFileSync(path, 'utf8'));
  let parsed: JSONWebKeySet;
  try {
    parsed = JSON.parse(text) as JSONWebKeySet;
  } catch {
    throw new KeyFileError(path, 'is not JSON; a JWKS file holds {"keys": [...]}');
  }
  if (!Array.isArray(parsed?.keys)) throw new KeyFileError(path, 'a JWKS file holds {"keys": [...]}');
  return createLocalJWKSet(parsed);
}

export class TokenVerifier {
  private keys: Keys;
  private version: string;
  private checkedAtMs: number;
  /** Counts key changes: a verdict reached under another count is stale. */
  private generation = 0;
  private readonly remembered = new Map<string, Principal>();
  /** The keys of --auth-jwks-url or --auth-oidc-issuer, made once: jose caches and refetches them. */
  private readonly remote: JWTVerifyGetKey | null;

  /** Reads the key files; throws (at startup) when one is missing or malformed. */
  constructor(
    private readonly options: VerifierOptions,
    nowMs: number,
  ) {
    if (options.secretFile === null && options.jwksFile === null && options.jwksUrl === null && options.oidcIssuer === null) {
      throw new Error('auth needs a secret file, a JWKS file, a JWKS URL or an OpenID Connect issuer');
    }
    this.remote = remoteKeysOf(options, () => this.forget());
    this.version = this.currentVersion();
    this.keys = this.load();
    this.checkedAtMs = nowMs;
  }

  private currentVersion(): string {
    return `${versionOf(this.options.secretFile)}|${versionOf(this.options.jwksFile)}`;
  }

  private load(): Keys {
    const { secretFile, jwksFile } = this.options;
    return { secret: secretFile === null ? null : readSecretFile(secretFile), jwks: jwksFile === null ? this.remote : readJwksFile(jwksFile) };
  }

  /** Re-reads the key files if they changed; a file broken mid-rotation keeps the keys in use. */
  private refresh(nowMs: number): void {
    // A clock set back checks at once rather than never.
    if (nowMs >= this.checkedAtMs && nowMs - this.checkedAtMs < this.options.keysCheckMs) return;
    this.checkedAtMs = nowMs;
    try {
      const version = this.currentVersion();
      if (version === this.version) return;
      this.keys = this.load();
      this.version = version;
      this.forget();
    } catch {
      // Half-written or removed: try again at the next check.
    }
  }

  /** Keys changed: verdicts reached with the old ones no longer hold. */
  private forget(): void {
    this.generation++;
    this.remembered.clear();
  }

  /** Which keys are in use at `nowMs` (re-reading changed key files first); changes whenever they do. */
  keysVersion(nowMs: number): number {
    this.refresh(nowMs);
    return this.generation;
  }

  /**
   * The principal of a token seen and verified before and still within its times;
   * a refusal when its times have passed; undefined when it must be verified.
   */
  lookup(token: string, nowMs: number): Principal | ProtocolError | undefined {
    this.refresh(nowMs);
    const principal = this.remembered.get(token);
    return principal === undefined ? undefined : timeRefusal(principal, nowMs) ?? principal;
  }

  /** Verifies a token's signature and claims at `nowMs`. */
  async verify(token: string, nowMs: number): Promise<Principal | ProtocolError> {
    if (token.length > MAX_TOKEN_BYTES) return unauthorized(`tokens are at most ${MAX_TOKEN_BYTES} bytes`);
    const keys = this.keys;
    const generation = this.generation;
    try {
      const symmetric = decodeProtectedHeader(token).alg === 'HS256';
      const common = { currentDate: new Date(nowMs), ...(this.options.issuer ? { issuer: this.options.issuer } : {}), ...(this.options.audience ? { audience: this.options.audience } : {}) };
      let verified: { payload: Record<string, unknown>; protectedHeader: Record<string, unknown> };
      if (symmetric && keys.secret) verified = await jwtVerify(token, keys.secret, { ...common, algorithms: ['HS256'] });
      else if (!symmetric && keys.jwks) verified = await jwtVerify(token, keys.jwks, { ...common, algorithms: ASYMMETRIC_ALGORITHMS });
      else return unauthorized('the token is signed with an algorithm this server does not accept');
      const { payload } = verified;
      const unfit = profileProblem(this.options.profile, verified.protectedHeader, payload);
      if (unfit !== null) return protocolError('TOKEN_PROFILE', `${unfit} (--auth-profile ${this.options.profile})`);
      const claims = principalOf(payload);
      if (!claims.ok) return unauthorized(`the token's claims are malformed: ${claims.reason}`);
      const tooLong = lifetimeRefusal(claims.principal, this.options.maxTtlMs, nowMs);
      if (tooLong) return tooLong;
      // Keys changed while this was verified: do not remember a verdict of the old ones.
      if (keys === this.keys && generation === this.generation) this.remember(token, claims.principal);
      return claims.principal;
    } catch (error) {
      if (error instanceof errors.JWTExpired) return protocolError('TOKEN_EXPIRED', 'the token has expired');
      // The key server's fault, not the token's: a 503 the client may retry.
      if (error instanceof KeySetUnavailable || error instanceof errors.JWKSTimeout || error instanceof errors.JWKSInvalid) {
        return protocolError('UNAVAILABLE', `the keys to verify the token could not be fetched: ${error.message}`, { retryAfterSeconds: 1 });
      }
      const detail = error instanceof errors.JOSEError ? error.message : 'it is not a JWT';
      return unauthorized(`the token is not valid: ${detail}`);
    }
  }

  private remember(token: string, principal: Principal): void {
    if (this.remembered.size >= MAX_REMEMBERED) this.remembered.clear();
    this.remembered.set(token, principal);
  }
}

/** The fetched key set of the options, or null when they name none. */
function remoteKeysOf(options: VerifierOptions, onChange: () => void): JWTVerifyGetKey | null {
  if (options.jwksUrl === null && options.oidcIssuer === null) return null;
  return createRemoteKeys({
    jwksUrl: options.jwksUrl,
    issuer: options.oidcIssuer,
    cooldownMs: options.jwksCooldownMs,
    maxAgeMs: options.jwksMaxAgeMs,
    timeoutMs: REMOTE_KEYS_TIMEOUT_MS,
    maxBytes: MAX_REMOTE_KEYS_BYTES,
    onChange,
  });
}

export function unauthorized(message: string): ProtocolError {
  return protocolError('UNAUTHORIZED', message);
}

/** exp and nbf at `nowMs`, as jose judges them (whole seconds: valid while now < exp). */
export function timeRefusal(principal: Principal, nowMs: number): ProtocolError | null {
  if (principal.expiresAtMs !== null && nowMs >= principal.expiresAtMs) return protocolError('TOKEN_EXPIRED', 'the token has expired');
  if (principal.notBeforeMs !== null && nowMs < principal.notBeforeMs) return unauthorized('the token is not valid yet (nbf)');
  return null;
}
