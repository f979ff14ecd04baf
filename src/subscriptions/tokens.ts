/**
 * Wake tokens: the webhook's `callback_token` and the pull-wake claim token. Opaque to
 * clients, they carry the subscription key, its incarnation, the wake's generation and
 * id, and an expiry, MACed with HMAC-SHA256 under a 32-byte secret kept in the storage
 * engine's meta table (`wake_token_secret`), so every node sharing an engine accepts
 * every node's tokens, also after a restart. The caller compares incarnation, generation
 * and wake id with the stored subscription (core fences); this file only answers whether
 * the server issued the token, for this subscription, and whether it is still valid.
 *
 * Form: base64url(JSON claims) `.` base64url(MAC), the MAC over a versioned label and the
 * encoded claims.
 *
 * Rotation makes a new secret that MACs every token from then on. The one it replaces
 * still verifies for one token lifetime (`previousValidMs`), so that the tokens workers
 * and webhooks hold keep working, and never after: a leaked secret is dead one token
 * lifetime after the rotation. The stored value is the secret alone until the first
 * rotation (as servers before rotation wrote it), then a JSON object with both.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { ensureMeta, updateMeta, type MetaStore } from './meta.js';

export const WAKE_TOKEN_SECRET_META = 'wake_token_secret';
/** Longer tokens are refused before any work. */
export const MAX_WAKE_TOKEN_BYTES = 1024;
const SECRET_BYTES = 32;
const MAC_LABEL = 'rill-wake-token-v1.';
const TOKEN_FORM = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

export interface WakeTokenClaims {
  subKey: string;
  incarnation: string;
  generation: number;
  wakeId: string;
  expiresAtMs: number;
}

export type WakeTokenCheck = { ok: true; claims: WakeTokenClaims } | { ok: false; code: 'TOKEN_INVALID' | 'TOKEN_EXPIRED' };

/** Claims as stored in a token: one-letter names keep tokens short. */
interface Wire {
  s: string;
  i: string;
  g: number;
  w: string;
  e: number;
}

/** The stored value after a rotation. */
interface RotatedSecrets {
  current: string;
  previous: string;
  rotatedAtMs: number;
}

interface Secrets {
  current: Buffer;
  /** The secret the last rotation replaced, and when. */
  previous: { secret: Buffer; rotatedAtMs: number } | null;
}

export class WakeTokens {
  private constructor(
    private readonly meta: MetaStore,
    /** How long a replaced secret still verifies: the longest a token lives. */
    private readonly previousValidMs: number,
    private secrets: Secrets,
  ) {}

  /** Loads the secret, creating it if there is none (two nodes starting together agree on one). */
  static async open(meta: MetaStore, previousValidMs: number): Promise<WakeTokens> {
    const stored = await ensureMeta(meta, WAKE_TOKEN_SECRET_META, newSecret);
    return new WakeTokens(meta, previousValidMs, parseSecrets(stored));
  }

  issue(claims: WakeTokenClaims): string {
    const wire: Wire = { s: claims.subKey, i: claims.incarnation, g: claims.generation, w: claims.wakeId, e: claims.expiresAtMs };
    const payload = Buffer.from(JSON.stringify(wire), 'utf8').toString('base64url');
    return `${payload}.${mac(this.secrets.current, payload).toString('base64url')}`;
  }

  /** A new secret MACs tokens from now on, on every node sharing the store; the replaced one verifies for `previousValidMs`. */
  async rotate(nowMs: number): Promise<void> {
    const stored = await updateMeta(this.meta, WAKE_TOKEN_SECRET_META, (current) => {
      if (current === undefined) throw new Error(`meta ${WAKE_TOKEN_SECRET_META} is missing: open the tokens first`);
      const rotated: RotatedSecrets = { current: newSecret(), previous: parseSecrets(current).current.toString('base64url'), rotatedAtMs: nowMs };
      return JSON.stringify(rotated);
    });
    this.secrets = parseSecrets(stored);
  }

  /** Re-reads the secrets: another node may have rotated them. */
  async refresh(): Promise<void> {
    const stored = await this.meta.getMeta(WAKE_TOKEN_SECRET_META);
    if (stored === undefined) throw new Error(`meta ${WAKE_TOKEN_SECRET_META} is missing`);
    this.secrets = parseSecrets(stored);
  }

  /** Whether `token` was issued for `subKey` and has not expired at `nowMs`. A forged or altered token is invalid, never expired. */
  verify(token: string, subKey: string, nowMs: number): WakeTokenCheck {
    const invalid: WakeTokenCheck = { ok: false, code: 'TOKEN_INVALID' };
    if (typeof token !== 'string' || token.length > MAX_WAKE_TOKEN_BYTES || !TOKEN_FORM.test(token)) return invalid;
    const [payload, macText] = token.split('.') as [string, string];
    const { current, previous } = this.secrets;
    const previousValid = previous !== null && nowMs < previous.rotatedAtMs + this.previousValidMs;
    if (!macMatches(current, payload, macText) && !(previousValid && macMatches(previous.secret, payload, macText))) return invalid;
    const claims = claimsOf(payload);
    if (claims === null || claims.subKey !== subKey) return invalid;
    if (nowMs >= claims.expiresAtMs) return { ok: false, code: 'TOKEN_EXPIRED' };
    return { ok: true, claims };
  }
}

const newSecret = (): string => randomBytes(SECRET_BYTES).toString('base64url');

function mac(secret: Buffer, payload: string): Buffer {
  return createHmac('sha256', secret).update(MAC_LABEL).update(payload).digest();
}

/** Compared as text, so that only the one canonical spelling of the MAC passes. */
function macMatches(secret: Buffer, payload: string, macText: string): boolean {
  const given = Buffer.from(macText, 'latin1');
  const expected = Buffer.from(mac(secret, payload).toString('base64url'), 'latin1');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** The stored value: the secret alone (never rotated) or the rotated form; anything else is a broken invariant. */
function parseSecrets(stored: string): Secrets {
  if (!stored.startsWith('{')) return { current: secretOf(stored), previous: null };
  const value = JSON.parse(stored) as Partial<RotatedSecrets>;
  if (typeof value.current !== 'string' || typeof value.previous !== 'string' || !Number.isFinite(value.rotatedAtMs)) {
    throw new Error(`meta ${WAKE_TOKEN_SECRET_META} is malformed`);
  }
  return { current: secretOf(value.current), previous: { secret: secretOf(value.previous), rotatedAtMs: value.rotatedAtMs! } };
}

function secretOf(text: string): Buffer {
  const secret = Buffer.from(text, 'base64url');
  if (secret.length !== SECRET_BYTES) throw new Error(`meta ${WAKE_TOKEN_SECRET_META} is not ${SECRET_BYTES} bytes`);
  return secret;
}

/** The claims of a payload whose MAC matched; null if they are not what `issue` writes. */
function claimsOf(payload: string): WakeTokenClaims | null {
  let wire: Partial<Wire>;
  try {
    wire = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Partial<Wire>;
  } catch {
    return null;
  }
  const { s, i, g, w, e } = wire ?? {};
  if (typeof s !== 'string' || typeof i !== 'string' || typeof w !== 'string') return null;
  if (!Number.isSafeInteger(g) || !Number.isFinite(e)) return null;
  return { subKey: s, incarnation: i, generation: g!, wakeId: w, expiresAtMs: e! };
}
