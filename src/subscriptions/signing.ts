/**
 * Ed25519 keys that sign webhook deliveries (`Webhook-Signature`). The keys live in the
 * storage engine's meta table under `webhook_signing_keys`, so they survive restarts and
 * every node sharing an engine signs with the same key. Exactly one key is active; a
 * rotation retires it, and a retired key stays in the published JWK Set for
 * `RETIRED_KEY_PUBLISHED_MS`, long enough for a receiver to verify a delivery signed just
 * before the rotation with a JWK Set it fetched later. After that it is dropped at the
 * next rotation. Private keys are stored as JWK in the same database as the streams:
 * whoever reads the database could sign deliveries, as they could read every stream.
 */
import { createHash, createPrivateKey, generateKeyPairSync, sign, type JsonWebKey, type KeyObject } from 'node:crypto';
import { ensureMeta, updateMeta, type MetaStore } from './meta.js';

export const WEBHOOK_KEYS_META = 'webhook_signing_keys';
export const RETIRED_KEY_PUBLISHED_MS = 60 * 60 * 1000;
/** Bytes of the public key's SHA-256 in a kid: 128 bits, so kids do not collide. */
const KID_HASH_BYTES = 16;

export interface StoredSigningKey {
  kid: string;
  privateJwk: JsonWebKey;
  publicJwk: JsonWebKey;
  createdAtMs: number;
  /** Null for the one active key. */
  retiredAtMs: number | null;
}

export interface WebhookPublicJwk {
  kty: 'OKP';
  crv: 'Ed25519';
  x: string;
  kid: string;
  alg: 'EdDSA';
  use: 'sig';
}

export interface WebhookJwks {
  keys: WebhookPublicJwk[];
}

export class WebhookKeys {
  private keys: StoredSigningKey[];
  private readonly privateKeys = new Map<string, KeyObject>();

  private constructor(
    private readonly meta: MetaStore,
    stored: string,
  ) {
    this.keys = parseKeys(stored);
  }

  /** Loads the keys, creating the first one if there is none (two nodes starting together agree on one). */
  static async open(meta: MetaStore, nowMs: number): Promise<WebhookKeys> {
    const stored = await ensureMeta(meta, WEBHOOK_KEYS_META, () => JSON.stringify([newKey(nowMs)]));
    return new WebhookKeys(meta, stored);
  }

  /** The active key, which signs every delivery. */
  signer(): { kid: string; privateKey: KeyObject } {
    const active = activeOf(this.keys);
    let privateKey = this.privateKeys.get(active.kid);
    if (privateKey === undefined) {
      privateKey = createPrivateKey({ key: active.privateJwk, format: 'jwk' });
      this.privateKeys.set(active.kid, privateKey);
    }
    return { kid: active.kid, privateKey };
  }

  /** The `Webhook-Signature` value for a delivery of `rawBody` made at `nowMs`: the signature covers `<t>.<rawBody>`. */
  sign(rawBody: string, nowMs: number): string {
    const { kid, privateKey } = this.signer();
    const t = Math.floor(nowMs / 1000);
    const signature = sign(null, Buffer.from(`${t}.${rawBody}`, 'utf8'), privateKey).toString('base64url');
    return `t=${t},kid=${kid},ed25519=${signature}`;
  }

  /** The public keys a receiver may need at `nowMs`: the active one first, then those retired less than an hour ago. */
  jwks(nowMs: number): WebhookJwks {
    const published = this.keys.filter((k) => isPublished(k, nowMs));
    published.sort((a, b) => (a.retiredAtMs === null ? -1 : b.retiredAtMs === null ? 1 : b.retiredAtMs - a.retiredAtMs));
    return { keys: published.map(publicJwkOf) };
  }

  /** Makes a new active key and retires the current one, on every node; answers the new kid. */
  async rotate(nowMs: number): Promise<string> {
    let kid = '';
    const stored = await updateMeta(this.meta, WEBHOOK_KEYS_META, (current) => {
      if (current === undefined) throw new Error(`meta ${WEBHOOK_KEYS_META} is missing: open the keys first`);
      const kept = parseKeys(current)
        .filter((k) => isPublished(k, nowMs))
        .map((k) => (k.retiredAtMs === null ? { ...k, retiredAtMs: nowMs } : k));
      const fresh = newKey(nowMs);
      kid = fresh.kid;
      return JSON.stringify([...kept, fresh]);
    });
    this.keys = parseKeys(stored);
    return kid;
  }

  /** Re-reads the keys: another node may have rotated them. */
  async refresh(): Promise<void> {
    const stored = await this.meta.getMeta(WEBHOOK_KEYS_META);
    if (stored === undefined) throw new Error(`meta ${WEBHOOK_KEYS_META} is missing`);
    this.keys = parseKeys(stored);
  }
}

/** The active key, and retired ones for an hour after their retirement. */
function isPublished(key: StoredSigningKey, nowMs: number): boolean {
  return key.retiredAtMs === null || nowMs - key.retiredAtMs < RETIRED_KEY_PUBLISHED_MS;
}

function newKey(nowMs: number): StoredSigningKey {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const publicJwk = publicKey.export({ format: 'jwk' });
  return { kid: kidOf(publicJwk), privateJwk: privateKey.export({ format: 'jwk' }), publicJwk, createdAtMs: nowMs, retiredAtMs: null };
}

/** `ds_` and the base64url of the first 16 bytes of the SHA-256 of the raw public key. */
export function kidOf(publicJwk: JsonWebKey): string {
  if (typeof publicJwk.x !== 'string') throw new Error('an Ed25519 public JWK has an x');
  const digest = createHash('sha256').update(Buffer.from(publicJwk.x, 'base64url')).digest();
  return `ds_${digest.subarray(0, KID_HASH_BYTES).toString('base64url')}`;
}

function publicJwkOf(key: StoredSigningKey): WebhookPublicJwk {
  return { kty: 'OKP', crv: 'Ed25519', x: key.publicJwk.x as string, kid: key.kid, alg: 'EdDSA', use: 'sig' };
}

function activeOf(keys: StoredSigningKey[]): StoredSigningKey {
  return keys.find((k) => k.retiredAtMs === null)!;
}

/** The stored keys, checked: a malformed value is a broken invariant, not something to sign around. */
function parseKeys(stored: string): StoredSigningKey[] {
  const keys: unknown = JSON.parse(stored);
  if (!Array.isArray(keys)) throw new Error(`meta ${WEBHOOK_KEYS_META} is not a list`);
  for (const key of keys as StoredSigningKey[]) {
    const wellFormed =
      typeof key === 'object' && key !== null && typeof key.kid === 'string' &&
      key.publicJwk?.kty === 'OKP' && key.publicJwk?.crv === 'Ed25519' && typeof key.privateJwk?.d === 'string' &&
      kidOf(key.publicJwk) === key.kid && Number.isFinite(key.createdAtMs) &&
      (key.retiredAtMs === null || Number.isFinite(key.retiredAtMs));
    if (!wellFormed) throw new Error(`meta ${WEBHOOK_KEYS_META} holds a malformed key`);
  }
  const active = (keys as StoredSigningKey[]).filter((k) => k.retiredAtMs === null).length;
  if (active !== 1) throw new Error(`meta ${WEBHOOK_KEYS_META} holds ${active} active keys, not 1`);
  return keys as StoredSigningKey[];
}
