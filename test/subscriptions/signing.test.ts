/**
 * Webhook signing keys: a receiver verifies a delivery with nothing but the published
 * JWK Set (as the upstream conformance suite does); keys survive a restart, a rotation
 * keeps the old public key published for an hour, and nodes starting or rotating at
 * once end with one active key.
 */
import { createPublicKey, verify, type JsonWebKey } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { RETIRED_KEY_PUBLISHED_MS, WEBHOOK_KEYS_META, WebhookKeys, type StoredSigningKey, type WebhookJwks } from '../../src/subscriptions/signing.js';
import { MemoryMeta } from './memory-meta.js';

const HOUR_MS = 60 * 60 * 1000;
const T0 = Date.UTC(2026, 0, 1);

/** What a receiver does: parse the header, pick the key by kid, check the time, verify "<t>.<body>". */
function receiverAccepts(rawBody: string, header: string, jwks: WebhookJwks, receivedAtMs: number): boolean {
  const parts = /^t=(\d+),kid=([^,]+),ed25519=([A-Za-z0-9_-]+)$/.exec(header);
  if (parts === null) return false;
  const [, t, kid, signature] = parts as unknown as [string, string, string, string];
  const jwk = jwks.keys.find((k) => k.kid === kid);
  if (jwk === undefined || Math.abs(receivedAtMs / 1000 - Number(t)) > 300) return false;
  const publicKey = createPublicKey({ key: jwk as unknown as JsonWebKey, format: 'jwk' });
  return verify(null, Buffer.from(`${t}.${rawBody}`), publicKey, Buffer.from(signature, 'base64url'));
}

const stored = (meta: MemoryMeta): StoredSigningKey[] => JSON.parse(meta.values.get(WEBHOOK_KEYS_META)!);
const kids = (jwks: WebhookJwks) => jwks.keys.map((k) => k.kid);

describe('WebhookKeys', () => {
  test('a delivery verifies with the published JWK Set alone, and an altered one does not', async () => {
    const nowMs = Date.now();
    const keys = await WebhookKeys.open(new MemoryMeta(), nowMs);
    const body = JSON.stringify({ subscription_id: 's', wake_id: 'w_1', streams: [{ path: 'a/é' }] });
    const header = keys.sign(body, nowMs);
    const jwks = JSON.parse(JSON.stringify(keys.jwks(nowMs))) as WebhookJwks; // as a receiver fetches it
    expect(header).toMatch(new RegExp(`^t=${Math.floor(nowMs / 1000)},kid=ds_[A-Za-z0-9_-]{22},ed25519=[A-Za-z0-9_-]{86}$`));
    expect(jwks.keys).toEqual([{ kty: 'OKP', crv: 'Ed25519', x: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/), kid: keys.signer().kid, alg: 'EdDSA', use: 'sig' }]);
    expect(receiverAccepts(body, header, jwks, nowMs)).toBe(true);
    expect(receiverAccepts(body + ' ', header, jwks, nowMs)).toBe(false);
    expect(receiverAccepts(body, header.replace(/^t=(\d+)/, (_, t) => `t=${Number(t) + 1}`), jwks, nowMs)).toBe(false);
    expect(receiverAccepts(body, header, jwks, nowMs + 301_000)).toBe(false);
  });

  test('keys survive a reopen over the same meta, and the stored form holds what a restart needs', async () => {
    const meta = new MemoryMeta();
    const first = await WebhookKeys.open(meta, T0);
    const header = first.sign('{}', T0);
    const reopened = await WebhookKeys.open(meta, T0 + 5 * HOUR_MS);
    expect(reopened.signer().kid).toBe(first.signer().kid);
    expect(reopened.sign('{}', T0)).toBe(header); // Ed25519 is deterministic: the same private key
    expect(stored(meta)).toEqual([
      { kid: first.signer().kid, privateJwk: expect.objectContaining({ kty: 'OKP', crv: 'Ed25519', d: expect.any(String) }), publicJwk: expect.objectContaining({ x: expect.any(String) }), createdAtMs: T0, retiredAtMs: null },
    ]);
    expect(JSON.stringify(first.jwks(T0))).not.toMatch(/"d"/);
  });

  test('a rotation signs with a new key, publishes the old one for an hour, and other nodes follow on refresh', async () => {
    const meta = new MemoryMeta();
    const node1 = await WebhookKeys.open(meta, T0);
    const node2 = await WebhookKeys.open(meta, T0);
    const oldKid = node1.signer().kid;
    const beforeRotation = node1.sign('{"n":1}', T0);
    const newKid = await node1.rotate(T0 + 1000);
    expect(newKid).not.toBe(oldKid);
    expect(node1.signer().kid).toBe(newKid);
    expect(kids(node1.jwks(T0 + 1000))).toEqual([newKid, oldKid]);
    expect(receiverAccepts('{"n":1}', beforeRotation, node1.jwks(T0 + 1000), T0 + 1000)).toBe(true);
    expect(receiverAccepts('{"n":2}', node1.sign('{"n":2}', T0 + 2000), node1.jwks(T0 + 2000), T0 + 2000)).toBe(true);
    expect(kids(node1.jwks(T0 + 1000 + RETIRED_KEY_PUBLISHED_MS - 1))).toEqual([newKid, oldKid]);
    expect(kids(node1.jwks(T0 + 1000 + RETIRED_KEY_PUBLISHED_MS))).toEqual([newKid]);

    expect(node2.signer().kid).toBe(oldKid);
    await node2.refresh();
    expect(node2.signer().kid).toBe(newKid);

    // Rotations more than an hour apart: the key retired first leaves the stored list too.
    const third = await node2.rotate(T0 + 2 * HOUR_MS);
    expect(stored(meta).map((k) => [k.kid, k.retiredAtMs])).toEqual([[newKid, T0 + 2 * HOUR_MS], [third, null]]);
  });

  test('nodes opening an empty meta at once agree on one key; nodes rotating at once leave one active key', async () => {
    const meta = new MemoryMeta();
    const opened = await Promise.all([1, 2, 3].map(() => WebhookKeys.open(meta, T0)));
    expect(meta.casLost).toBeGreaterThan(0);
    expect(new Set(opened.map((k) => k.signer().kid)).size).toBe(1);
    expect(stored(meta)).toHaveLength(1);

    const lostBefore = meta.casLost;
    const rotated = await Promise.all(opened.map((k, i) => k.rotate(T0 + 10 + i)));
    expect(meta.casLost).toBeGreaterThan(lostBefore);
    const keys = stored(meta);
    expect(keys).toHaveLength(4); // the first key and one per rotation, each applied on the one before
    expect(keys.filter((k) => k.retiredAtMs === null).map((k) => k.kid)).toEqual([keys[3]!.kid]);
    expect(rotated.sort()).toEqual(keys.slice(1).map((k) => k.kid).sort());
    await Promise.all(opened.map((k) => k.refresh()));
    expect(new Set(opened.map((k) => k.signer().kid))).toEqual(new Set([keys[3]!.kid]));
  });

  test('a damaged stored value stops the opening instead of signing around it', async () => {
    const meta = new MemoryMeta();
    await WebhookKeys.open(meta, T0);
    const [key] = stored(meta);
    for (const bad of ['{}', '[]', JSON.stringify([key, key]), JSON.stringify([{ ...key, kid: 'ds_other' }]), JSON.stringify([{ ...key, retiredAtMs: T0 }])]) {
      meta.values.set(WEBHOOK_KEYS_META, bad);
      await expect(WebhookKeys.open(meta, T0), bad).rejects.toThrow(/webhook_signing_keys/);
    }
  });
});
