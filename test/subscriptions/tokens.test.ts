/**
 * Wake tokens: what the server issued verifies on any node sharing the engine, for its
 * own subscription, until it expires; anything altered, forged, foreign or oversized is
 * TOKEN_INVALID. A rotation replaces the secret on every node; the replaced one verifies
 * for one token lifetime more, then never.
 */
import { createHmac } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { MAX_WAKE_TOKEN_BYTES, WAKE_TOKEN_SECRET_META, WakeTokens, type WakeTokenClaims } from '../../src/subscriptions/tokens.js';
import { MemoryMeta } from './memory-meta.js';

const NOW = Date.UTC(2026, 0, 1);
const CLAIMS: WakeTokenClaims = { subKey: 'v1/orders', incarnation: 'inc_7f3a', generation: 12, wakeId: 'w_0123456789abcdef', expiresAtMs: NOW + 30_000 };
const INVALID = { ok: false, code: 'TOKEN_INVALID' };
/** The longest a token lives, and so how long a replaced secret still verifies. */
const TOKEN_TTL_MS = 3_600_000;

describe('WakeTokens', () => {
  test('a token verifies with its claims for its subscription until it expires', async () => {
    const tokens = await WakeTokens.open(new MemoryMeta(), TOKEN_TTL_MS);
    const token = tokens.issue(CLAIMS);
    expect(token).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    expect(token.length).toBeLessThan(200);
    expect(tokens.verify(token, 'v1/orders', NOW)).toEqual({ ok: true, claims: CLAIMS });
    expect(tokens.verify(token, 'v1/orders', CLAIMS.expiresAtMs - 1)).toEqual({ ok: true, claims: CLAIMS });
    expect(tokens.verify(token, 'v1/orders', CLAIMS.expiresAtMs)).toEqual({ ok: false, code: 'TOKEN_EXPIRED' });
    expect(tokens.verify(token, 'b/shop/orders', NOW)).toEqual(INVALID);
  });

  test('another node, or this one after a restart, accepts the token; a server with another secret does not', async () => {
    const meta = new MemoryMeta();
    const [a, b] = await Promise.all([WakeTokens.open(meta, TOKEN_TTL_MS), WakeTokens.open(meta, TOKEN_TTL_MS)]);
    expect(meta.casLost).toBe(1);
    const token = a.issue(CLAIMS);
    expect(b.verify(token, 'v1/orders', NOW).ok).toBe(true);
    expect((await WakeTokens.open(meta, TOKEN_TTL_MS)).verify(token, 'v1/orders', NOW).ok).toBe(true);
    expect(Buffer.from(meta.values.get(WAKE_TOKEN_SECRET_META)!, 'base64url')).toHaveLength(32);
    expect((await WakeTokens.open(new MemoryMeta(), TOKEN_TTL_MS)).verify(token, 'v1/orders', NOW)).toEqual(INVALID);
  });

  test('altered, re-encoded, malformed and oversized tokens are invalid, never expired', async () => {
    const tokens = await WakeTokens.open(new MemoryMeta(), TOKEN_TTL_MS);
    const token = tokens.issue(CLAIMS);
    const [payload, mac] = token.split('.') as [string, string];
    const later = Buffer.from(JSON.stringify({ s: 'v1/orders', i: 'inc_7f3a', g: 13, w: 'w_0123456789abcdef', e: NOW + 30_000 })).toString('base64url');
    const flipLast = (s: string) => s.slice(0, -1) + (s.endsWith('A') ? 'B' : 'A');
    // The MAC's last character carries 2 unused bits: another spelling of the same bytes.
    const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const sameBytesOtherSpelling = mac.slice(0, -1) + ALPHABET[ALPHABET.indexOf(mac.at(-1)!) ^ 1];
    expect(Buffer.from(sameBytesOtherSpelling, 'base64url')).toEqual(Buffer.from(mac, 'base64url'));
    const bad = [
      `${later}.${mac}`, `${payload}.${flipLast(mac)}`, `${flipLast(payload)}.${mac}`, `${payload}.${sameBytesOtherSpelling}`,
      `${payload}.${mac}.x`, `${payload}`, `.${mac}`, `${payload}.`, `${payload}.${mac}=`, `${payload} .${mac}`, '', '.',
      `${payload}.${mac.slice(0, 22)}`, `${'A'.repeat(MAX_WAKE_TOKEN_BYTES)}.${mac}`,
    ];
    for (const t of bad) expect(tokens.verify(t, 'v1/orders', CLAIMS.expiresAtMs + 1), t).toEqual(INVALID);
  });

  test('a correctly MACed payload that is not a claims object is invalid', async () => {
    const meta = new MemoryMeta();
    const tokens = await WakeTokens.open(meta, TOKEN_TTL_MS);
    const secret = Buffer.from(meta.values.get(WAKE_TOKEN_SECRET_META)!, 'base64url');
    // Forge with the real secret, as only a bug in issue() could: verify still checks the shape.
    const forge = (json: string) => {
      const payload = Buffer.from(json).toString('base64url');
      const mac = createHmac('sha256', secret).update('rill-wake-token-v1.').update(payload).digest('base64url');
      return `${payload}.${mac}`;
    };
    expect(tokens.verify(forge(JSON.stringify({ s: 'v1/orders', i: 'x', g: 1, w: 'w', e: NOW + 1 })), 'v1/orders', NOW).ok).toBe(true);
    for (const json of ['null', '5', 'not json', '{"s":"v1/orders","i":"x","g":1.5,"w":"w","e":1}', '{"s":"v1/orders","i":"x","g":1,"w":"w"}', '{"s":"v1/orders","i":1,"g":1,"w":"w","e":1}']) {
      expect(tokens.verify(forge(json), 'v1/orders', 0), json).toEqual(INVALID);
    }
  });

  test('rotation: new tokens use the new secret on every node; tokens of the old one verify for one token lifetime, then never', async () => {
    const meta = new MemoryMeta();
    const [a, b] = [await WakeTokens.open(meta, TOKEN_TTL_MS), await WakeTokens.open(meta, TOKEN_TTL_MS)];
    const before = a.issue({ ...CLAIMS, expiresAtMs: NOW + 2 * TOKEN_TTL_MS });
    const legacy = meta.values.get(WAKE_TOKEN_SECRET_META)!;
    await a.rotate(NOW);
    expect(meta.values.get(WAKE_TOKEN_SECRET_META)).not.toBe(legacy);
    const after = a.issue(CLAIMS);
    expect(after.split('.')[1]).not.toBe(before.split('.')[1]);
    // b has not read the rotation yet: it issues under the old secret, which a accepts.
    expect(b.verify(after, 'v1/orders', NOW)).toEqual(INVALID);
    expect(a.verify(b.issue(CLAIMS), 'v1/orders', NOW).ok).toBe(true);
    await b.refresh();
    for (const node of [a, b]) {
      expect(node.verify(after, 'v1/orders', NOW).ok).toBe(true);
      expect(node.verify(before, 'v1/orders', NOW + TOKEN_TTL_MS - 1).ok).toBe(true);
      // Even a token the old secret made to live longer: past one lifetime the secret is dead.
      expect(node.verify(before, 'v1/orders', NOW + TOKEN_TTL_MS)).toEqual(INVALID);
    }
    // A second rotation drops the first secret at once, whatever the time.
    await b.rotate(NOW + 1);
    await a.refresh();
    expect(a.verify(before, 'v1/orders', NOW + 2)).toEqual(INVALID);
    expect(a.verify(after, 'v1/orders', NOW + 2).ok).toBe(true);
    expect((await WakeTokens.open(meta, TOKEN_TTL_MS)).verify(after, 'v1/orders', NOW + 2).ok).toBe(true);
  });

  test('two nodes rotating at once both land, one after the other, and agree on the result', async () => {
    const meta = new MemoryMeta();
    const [a, b] = [await WakeTokens.open(meta, TOKEN_TTL_MS), await WakeTokens.open(meta, TOKEN_TTL_MS)];
    const initial = a.issue(CLAIMS);
    await Promise.all([a.rotate(NOW), b.rotate(NOW)]);
    expect(meta.casLost).toBeGreaterThan(0);
    await Promise.all([a.refresh(), b.refresh()]);
    // Had one rotation been lost, the first secret would still be the previous one.
    expect(a.verify(initial, 'v1/orders', NOW)).toEqual(INVALID);
    expect(b.verify(a.issue(CLAIMS), 'v1/orders', NOW).ok).toBe(true);
    expect(a.verify(b.issue(CLAIMS), 'v1/orders', NOW).ok).toBe(true);
  });
});

