/**
 * The client's receiving end of webhooks and its reading of subscription refusals,
 * without a server (nothing here depends on a storage engine): Ed25519 signatures over
 * `"<t>.<raw body>"` made with WebCrypto keys, the JWK Set cache's refetch on an unknown
 * kid (rate-limited), `handleWakeRequest`'s answers, and both error body shapes (rill's
 * `{code, message, error}` and the protocol's nested `{error: {code}}`).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import {
  AlreadyClaimedError,
  handleWakeRequest,
  RillError,
  verifyWebhook,
  WakeFencedError,
  WebhookJwksCache,
  wakeRequestListener,
  type WebhookJwk,
  type WebhookJwks,
} from '../../src/client/index.js';
import { errorFromResponse } from '../../src/client/errors.js';

interface SigningKey {
  jwk: WebhookJwk;
  sign(body: string, timestampSeconds?: number): Promise<string>;
}

async function signingKey(kid: string): Promise<SigningKey> {
  const pair = (await crypto.subtle.generateKey({ name: 'Ed25519' }, true, ['sign', 'verify'])) as CryptoKeyPair;
  const exported = await crypto.subtle.exportKey('jwk', pair.publicKey);
  const jwk: WebhookJwk = { kty: 'OKP', crv: 'Ed25519', x: exported.x!, kid, alg: 'EdDSA', use: 'sig' };
  return {
    jwk,
    async sign(body, timestampSeconds = Math.floor(Date.now() / 1000)) {
      const signature = new Uint8Array(await crypto.subtle.sign({ name: 'Ed25519' }, pair.privateKey, new TextEncoder().encode(`${timestampSeconds}.${body}`)));
      return `t=${timestampSeconds},kid=${kid},ed25519=${Buffer.from(signature).toString('base64url')}`;
    },
  };
}

const BODY = JSON.stringify({
  subscription_id: 'orders',
  wake_id: 'w_1',
  generation: 4,
  streams: [{ path: 'orders/1', link_type: 'glob', acked_offset: '00000000000000000000', tail_offset: '00000000000000000022', has_pending: true }],
  callback_url: 'http://127.0.0.1:1/v1/stream/__ds/subscriptions/orders/callback',
  callback_token: 'tok',
});

describe('verifyWebhook', () => {
  it('accepts the body exactly as signed, as text or bytes, and refuses any change', async () => {
    const key = await signingKey('k1');
    const jwks: WebhookJwks = { keys: [key.jwk] };
    const header = await key.sign(BODY);
    const now = Number(/t=(\d+)/.exec(header)![1]);
    expect(await verifyWebhook(BODY, header, jwks)).toEqual({ valid: true, kid: 'k1', timestampSeconds: now });
    expect((await verifyWebhook(new TextEncoder().encode(BODY), header, jwks)).valid).toBe(true);
    expect(await verifyWebhook(BODY.replace('"generation":4', '"generation":5'), header, jwks)).toEqual({ valid: false, reason: 'bad-signature' });
    // The same JSON re-serialised with spaces is other bytes: it does not verify.
    expect((await verifyWebhook(JSON.stringify(JSON.parse(BODY), null, 1), header, jwks)).valid).toBe(false);
    // Another key under the same kid does not verify either.
    const other = await signingKey('k1');
    expect(await verifyWebhook(BODY, header, { keys: [other.jwk] })).toEqual({ valid: false, reason: 'bad-signature' });
  });

  it("with subscriptionId, refuses a delivery signed for another subscription (the server signs every one with the same keys)", async () => {
    const key = await signingKey('k1');
    const jwks: WebhookJwks = { keys: [key.jwk] };
    const header = await key.sign(BODY);
    expect((await verifyWebhook(BODY, header, jwks, { subscriptionId: 'orders' })).valid).toBe(true);
    expect(await verifyWebhook(BODY, header, jwks, { subscriptionId: 'payments' })).toEqual({ valid: false, reason: 'wrong-subscription' });
    // The signature is judged first: a forged body is a bad signature whatever it names.
    expect(await verifyWebhook(BODY.replace('"orders"', '"payments"'), header, jwks, { subscriptionId: 'payments' })).toEqual({ valid: false, reason: 'bad-signature' });
    const noId = '{"wake_id":"w_1"}';
    expect(await verifyWebhook(noId, await key.sign(noId), jwks, { subscriptionId: 'orders' })).toEqual({ valid: false, reason: 'wrong-subscription' });
    const handled: string[] = [];
    const refused = await handleWakeRequest({ body: BODY, signature: header }, { jwks, subscriptionId: 'payments', handle: (wake) => void handled.push(wake.wakeId) });
    expect([refused.status, JSON.parse(refused.body), handled]).toEqual([401, { error: 'signature wrong-subscription' }, []]);
    expect((await handleWakeRequest({ body: BODY, signature: header }, { jwks, subscriptionId: 'orders', handle: (wake) => void handled.push(wake.wakeId) })).status).toBe(200);
    expect(handled).toEqual(['w_1']);
  });

  it('refuses a signature time outside the tolerance, an unknown kid and malformed headers', async () => {
    const key = await signingKey('k1');
    const jwks: WebhookJwks = { keys: [key.jwk] };
    const signedAt = 1_700_000_000;
    const header = await key.sign(BODY, signedAt);
    expect(await verifyWebhook(BODY, header, jwks)).toEqual({ valid: false, reason: 'stale' });
    expect((await verifyWebhook(BODY, header, jwks, { nowMs: (signedAt + 300) * 1000 })).valid).toBe(true);
    expect((await verifyWebhook(BODY, header, jwks, { nowMs: (signedAt - 300) * 1000 })).valid).toBe(true);
    expect(await verifyWebhook(BODY, header, jwks, { nowMs: (signedAt + 301) * 1000 })).toEqual({ valid: false, reason: 'stale' });
    expect(await verifyWebhook(BODY, header, jwks, { nowMs: (signedAt + 30) * 1000, toleranceSeconds: 10 })).toEqual({ valid: false, reason: 'stale' });
    expect(await verifyWebhook(BODY, header.replace('kid=k1', 'kid=k2'), jwks, { nowMs: signedAt * 1000 })).toEqual({ valid: false, reason: 'unknown-kid' });
    for (const bad of [undefined, null, '', 'garbage', `t=${signedAt},kid=k1`, `t=soon,kid=k1,ed25519=AAAA`, `kid=k1,ed25519=AAAA`, `t=${signedAt},ed25519=AAAA`]) {
      expect(await verifyWebhook(BODY, bad, jwks, { nowMs: signedAt * 1000 }), String(bad)).toEqual({ valid: false, reason: 'malformed' });
    }
    // A signature of the wrong length, or not base64url at all, is refused, never thrown.
    for (const signature of ['A', 'AAAA', 'A'.repeat(87)]) {
      expect(await verifyWebhook(BODY, `t=${signedAt},kid=k1,ed25519=${signature}`, jwks, { nowMs: signedAt * 1000 })).toEqual({ valid: false, reason: 'bad-signature' });
    }
    // With several signatures (a key being rotated), one that verifies is enough.
    const [, good] = /ed25519=(.+)$/.exec(header)!;
    expect((await verifyWebhook(BODY, `t=${signedAt},kid=k1,ed25519=${'A'.repeat(86)},ed25519=${good}`, jwks, { nowMs: signedAt * 1000 })).valid).toBe(true);
  });
});

describe('WebhookJwksCache', () => {
  it('refetches on an unknown kid, at most once per interval, and retries a failed fetch', async () => {
    const old = await signingKey('old');
    const rotated = await signingKey('new');
    let published: WebhookJwks = { keys: [old.jwk] };
    let failNext = true;
    let nowMs = 1_000_000;
    const cache = new WebhookJwksCache(
      async () => {
        if (failNext) {
          failNext = false;
          throw new Error('unreachable');
        }
        return published;
      },
      { minRefetchIntervalMs: 60_000, nowMs: () => nowMs },
    );
    await expect(cache.keys()).rejects.toThrow('unreachable');
    expect((await cache.verify(BODY, await old.sign(BODY))).valid).toBe(true);
    expect(cache.fetches).toBe(2);

    // The server rotated its key: the first delivery under the new kid fetches the set again.
    published = { keys: [old.jwk, rotated.jwk] };
    nowMs += 60_000;
    expect(await cache.verify(BODY, await rotated.sign(BODY))).toMatchObject({ valid: true, kid: 'new' });
    expect(cache.fetches).toBe(3);
    // Junk kids within the interval cost no fetch.
    for (let i = 0; i < 5; i++) expect(await cache.verify(BODY, (await rotated.sign(BODY)).replace('kid=new', `kid=junk${i}`))).toEqual({ valid: false, reason: 'unknown-kid' });
    expect(cache.fetches).toBe(3);
    nowMs += 60_000;
    expect((await cache.verify(BODY, (await rotated.sign(BODY)).replace('kid=new', 'kid=junk'))).valid).toBe(false);
    expect(cache.fetches).toBe(4);
  });
});

describe('handleWakeRequest', () => {
  it('answers 401 to a bad signature, 400 to a body that is no wake, 500 when processing throws, and done when it succeeds', async () => {
    const key = await signingKey('k1');
    const jwks: WebhookJwks = { keys: [key.jwk] };
    const seen: unknown[] = [];
    const handle = (body: string, signature: string | null, process: () => unknown = () => undefined) =>
      handleWakeRequest({ body, signature }, { jwks, handle: (wake) => (seen.push(wake), process() as undefined) });

    expect((await handle(BODY, null)).status).toBe(401);
    expect((await handle(BODY, (await key.sign(BODY)).replace('kid=k1', 'kid=k9'))).status).toBe(401);
    expect((await handle('{"subscription_id":"x"}', await key.sign('{"subscription_id":"x"}'))).status).toBe(400);
    expect(seen).toEqual([]);

    const failed = await handle(BODY, await key.sign(BODY), () => {
      throw new Error('database down');
    });
    expect([failed.status, JSON.parse(failed.body)]).toEqual([500, { error: 'database down' }]);
    const done = await handle(BODY, await key.sign(BODY));
    expect([done.status, JSON.parse(done.body), done.headers['content-type']]).toEqual([200, { done: true }, 'application/json']);
    const later = await handle(BODY, await key.sign(BODY), () => ({ done: false }));
    expect([later.status, JSON.parse(later.body)]).toEqual([200, {}]);
    expect(seen[0]).toEqual({
      subscriptionId: 'orders',
      wakeId: 'w_1',
      generation: 4,
      streams: [{ path: 'orders/1', linkType: 'glob', ackedOffset: '00000000000000000000', tailOffset: '00000000000000000022', hasPending: true }],
      callbackUrl: 'http://127.0.0.1:1/v1/stream/__ds/subscriptions/orders/callback',
      callbackToken: 'tok',
    });
  });
});

describe('wakeRequestListener', () => {
  it('answers a body past its limit with 413, a delivery it cannot verify yet with 503, and a good one with done', async () => {
    const key = await signingKey('k1');
    let reachable = false;
    const jwks = new WebhookJwksCache(async () => {
      if (!reachable) throw new Error('jwks unreachable');
      return { keys: [key.jwk] };
    });
    const handled: string[] = [];
    const server = createServer((req, res) => void wakeRequestListener({ jwks, maxBodyBytes: 4096, handle: (wake) => void handled.push(wake.wakeId) })(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const post = async (body: string) => fetch(url, { method: 'POST', headers: { 'webhook-signature': await key.sign(body) }, body });
    try {
      const big = await post(`{"pad":"${'x'.repeat(5000)}"}`);
      expect([big.status, await big.json()]).toEqual([413, { error: 'body larger than 4096 bytes' }]);
      const early = await post(BODY);
      expect([early.status, ((await early.json()) as { error: string }).error]).toEqual([503, 'cannot verify: jwks unreachable']);
      reachable = true;
      const ok = await post(BODY);
      expect([ok.status, await ok.json()]).toEqual([200, { done: true }]);
      expect(handled).toEqual(['w_1']);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe('subscription refusals', () => {
  const refusal = (status: number, body: unknown) => errorFromResponse(new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } }), 'http://x/v1/stream/__ds/subscriptions/s');

  it("reads rill's body and the protocol's nested error object alike", async () => {
    const rill = await refusal(409, { code: 'FENCED', message: 'wake generation 3 is stale', error: { code: 'FENCED', message: 'wake generation 3 is stale' } });
    expect(rill).toBeInstanceOf(WakeFencedError);
    expect([rill.code, rill.status, rill.message]).toEqual(['FENCED', 409, 'wake generation 3 is stale']);
    const nested = await refusal(409, { error: { code: 'FENCED', message: 'Wake generation is stale' } });
    expect(nested).toBeInstanceOf(WakeFencedError);

    const claimed = await refusal(409, { code: 'ALREADY_CLAIMED', message: 'held', error: { code: 'ALREADY_CLAIMED', message: 'held', current_holder: 'w1', generation: 3 } });
    expect(claimed).toBeInstanceOf(AlreadyClaimedError);
    expect([(claimed as AlreadyClaimedError).currentHolder, (claimed as AlreadyClaimedError).generation]).toEqual(['w1', 3]);
    const claimedNested = (await refusal(409, { error: { code: 'ALREADY_CLAIMED', current_holder: 'w2', generation: 7 } })) as AlreadyClaimedError;
    expect([claimedNested.code, claimedNested.currentHolder, claimedNested.generation]).toEqual(['ALREADY_CLAIMED', 'w2', 7]);

    // The protocol's names for what rill calls otherwise.
    expect((await refusal(400, { error: { code: 'INVALID_REQUEST', message: 'bad' } })).code).toBe('BAD_REQUEST');
    expect((await refusal(409, { error: { code: 'INVALID_OFFSET', message: 'regresses' } })).code).toBe('INVALID_ACK_OFFSET');
    expect((await refusal(409, { code: 'INVALID_ACK_OFFSET', message: 'regresses', error: { code: 'INVALID_OFFSET', message: 'regresses' } })).code).toBe('INVALID_ACK_OFFSET');
    expect((await refusal(400, { code: 'INVALID_OFFSET', message: 'bad offset' })).code).toBe('INVALID_OFFSET');
    const missing = await refusal(404, { code: 'SUBSCRIPTION_NOT_FOUND', message: 'subscription not found', error: { code: 'SUBSCRIPTION_NOT_FOUND', message: 'subscription not found' } });
    expect([missing.code, missing.message]).toEqual(['SUBSCRIPTION_NOT_FOUND', 'subscription not found: /v1/stream/__ds/subscriptions/s']);
    for (const code of ['NO_PENDING_WORK', 'SUBSCRIPTION_FULL', 'SUBSCRIPTION_LIMIT', 'TOKEN_INVALID', 'WEBHOOK_URL_REJECTED']) {
      const error = await refusal(code === 'SUBSCRIPTION_LIMIT' ? 429 : 409, { error: { code } });
      expect([error.code, error instanceof RillError]).toEqual([code, true]);
    }
  });
});
