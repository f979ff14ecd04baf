/**
 * Which tokens open the door: none, a bad signature, the wrong issuer or audience, expiry
 * and nbf at the boundary (a clock the test controls), key rotation through the JWKS
 * file, tampering, `alg: none`, and an HS256 token signed with an RSA public key.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { exportJWK, exportSPKI, generateKeyPair, SignJWT, UnsecuredJWT, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { grantClaims, principalOf } from '../../src/auth/claims.js';
import { signToken } from '../../src/auth/sign.js';
import { readSecretFile } from '../../src/auth/verifier.js';
import { RillClient } from '../../src/client/index.js';
import { createRillServer } from '../../src/http/server.js';
import { AUTH_OFF } from '../../src/http/settings.js';
import { withoutToken } from '../../src/http/access.js';
import { call, type Reply } from '../http/client.js';
import { bearer, useAuthServer, type GrantSpec } from './setup.js';

const ISSUER = 'https://issuer.example';
const AUDIENCE = 'rill-test';
const jwksFile = join(process.env.TMPDIR ?? '/tmp', `rill-jwks-${process.pid}-${randomBytes(4).toString('hex')}.json`);
const keys: Record<string, { privateKey: CryptoKey; jwk: JWK; pem: string }> = {};

async function makeKey(kid: string, alg: 'RS256' | 'ES256'): Promise<void> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  keys[kid] = { privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' }, pem: await exportSPKI(publicKey) };
}

function publishKeys(...kids: string[]): void {
  writeFileSync(jwksFile, JSON.stringify({ keys: kids.map((kid) => keys[kid]!.jwk) }));
}

// The JWKS file must exist before the server starts (it reads it then).
beforeAll(async () => {
  await makeKey('k1', 'RS256');
  await makeKey('k2', 'ES256');
  publishKeys('k1');
});
afterAll(() => rmSync(jwksFile, { force: true }));

const env = useAuthServer({ auth: { jwksFile, issuer: ISSUER, audience: AUDIENCE } });
const BUCKET = 'tokb';
const GRANTS: GrantSpec[] = [{ bucket: '*', can: ['admin'] }];
const claims = { rill: { grants: GRANTS } };

function hs256(options: { secret?: Uint8Array; issuer?: string; audience?: string; ttlMs?: number; nowMs?: number } = {}): Promise<string> {
  return signToken(options.secret ?? env.secret, { grants: GRANTS, issuer: options.issuer ?? ISSUER, audience: options.audience ?? AUDIENCE, ttlMs: options.ttlMs ?? 3_600_000, nowMs: options.nowMs ?? env.clock.now() });
}

function asymmetric(kid: string): Promise<string> {
  const key = keys[kid]!;
  return new SignJWT(claims).setProtectedHeader({ alg: key.jwk.alg!, kid }).setIssuer(ISSUER).setAudience(AUDIENCE).setExpirationTime('1h').sign(key.privateKey);
}

const get = (token: string | null, path = `/${BUCKET}`): Promise<Reply> => call(env.url, 'GET', path, { headers: token === null ? {} : bearer(token) });

function expect401(reply: Reply, code: 'UNAUTHORIZED' | 'TOKEN_EXPIRED' | 'TOKEN_LIFETIME_TOO_LONG' = 'UNAUTHORIZED'): void {
  expect(reply.status, reply.text()).toBe(401);
  expect(reply.headers['www-authenticate']).toMatch(/^Bearer realm="rill"/);
  expect(reply.headers['content-type']).toBe('application/json');
  expect((reply.json() as { code: string }).code).toBe(code);
}

describe('tokens', () => {
  beforeAll(async () => {
    env.clock.reset();
    expect((await call(env.url, 'PUT', `/${BUCKET}`, { headers: bearer(await hs256()) })).status).toBe(201);
  });

  it('answers 401 with WWW-Authenticate: Bearer and the JSON error without a token, except /healthz', async () => {
    const reply = await get(null);
    expect401(reply);
    expect(reply.headers['www-authenticate']).toBe('Bearer realm="rill"');
    expect((await get(null, '/healthz')).status).toBe(200);
    expect401(await call(env.url, 'PUT', `/${BUCKET}/s`, {}));
    const basic = await call(env.url, 'GET', '/v1/stream/x', { headers: { authorization: 'Basic dXNlcjpwYXNz' } });
    expect401(basic);
    expect((basic.json() as { message: string }).message).toBe('the Authorization header uses the Basic scheme: rill takes Authorization: Bearer <token>');
    // The token alone, without its scheme: the answer says to add it, and never echoes the value.
    const bare = await call(env.url, 'GET', `/${BUCKET}`, { headers: { authorization: await hs256() } });
    expect401(bare);
    expect((bare.json() as { message: string }).message).toBe('the Authorization header has no scheme: send Authorization: Bearer <token> (add "Bearer " before the token)');
  });

  it('says why a sent token was refused in its challenge too, the only place an answer to HEAD has for it, and the client reads it there', async () => {
    const forged = await hs256({ secret: randomBytes(32) });
    const why = ((await get(forged)).json() as { message: string }).message;
    expect(why).toMatch(/signature/);
    const head = await call(env.url, 'HEAD', `/${BUCKET}`, { headers: bearer(forged) });
    expect(head.status).toBe(401);
    expect(head.headers['www-authenticate']).toBe(`Bearer realm="rill", error="invalid_token", error_description="${why}", code="UNAUTHORIZED"`);
    const client = new RillClient({ url: env.url, token: forged });
    await expect(client.stream(`${BUCKET}/s`).head()).rejects.toMatchObject({ code: 'UNAUTHORIZED', status: 401, message: why });
  });

  it('refuses a bad signature, the wrong issuer or audience, a tampered payload, alg none and malformed claims', async () => {
    expect((await get(await hs256())).status).toBe(200);
    expect401(await get(await hs256({ secret: randomBytes(32) })));
    expect401(await get(await hs256({ issuer: 'https://other.example' })));
    expect401(await get(await hs256({ audience: 'someone-else' })));
    const [header, , signature] = (await hs256()).split('.');
    const forged = Buffer.from(JSON.stringify({ ...claims, rill: { grants: [{ bucket: 'other', can: ['admin'] }] }, iss: ISSUER, aud: AUDIENCE, exp: 9_999_999_999 })).toString('base64url');
    expect401(await get(`${header}.${forged}.${signature}`));
    const unsecured = new UnsecuredJWT(claims).setIssuer(ISSUER).setAudience(AUDIENCE).setExpirationTime('1h').encode();
    expect401(await get(unsecured));
    const noneWithSignature = `${Buffer.from('{"alg":"none"}').toString('base64url')}.${unsecured.split('.')[1]}.${signature}`;
    expect401(await get(noneWithSignature));
    const malformed = await new SignJWT({ rill: { grants: [{ bucket: 'x', can: ['everything'] }] } }).setProtectedHeader({ alg: 'HS256' }).setIssuer(ISSUER).setAudience(AUDIENCE).sign(env.secret);
    expect401(await get(malformed));
    expect401(await get('not-a-jwt'));
  });

  it('refuses an HS256 token signed with an RSA public key (algorithm confusion)', async () => {
    for (const secret of [keys.k1!.pem, JSON.stringify(keys.k1!.jwk)]) {
      const confused = await new SignJWT(claims).setProtectedHeader({ alg: 'HS256', kid: 'k1' }).setIssuer(ISSUER).setAudience(AUDIENCE).setExpirationTime('1h').sign(new TextEncoder().encode(secret));
      expect401(await get(confused));
    }
  });

  it('accepts a token until the millisecond its exp is reached, verified fresh or remembered', async () => {
    const issuedMs = Math.floor(Date.now() / 1000) * 1000;
    const token = await hs256({ nowMs: issuedMs, ttlMs: 60_000 });
    const expMs = issuedMs + 60_000;
    env.clock.stopAt(expMs - 1);
    expect((await get(token)).status).toBe(200);
    env.clock.stopAt(expMs);
    expect401(await get(token), 'TOKEN_EXPIRED');
    // HEAD has no body: the challenge's code says expired, and the client reads it there.
    const head = new RillClient({ url: env.url, token }).stream(`${BUCKET}/s`).head();
    await expect(head).rejects.toMatchObject({ code: 'TOKEN_EXPIRED', status: 401, message: 'the token has expired' });
    // Never seen before, verified at the boundary:
    const other = await hs256({ nowMs: issuedMs + 1000, ttlMs: 59_000 });
    expect401(await get(other), 'TOKEN_EXPIRED');
    env.clock.reset();
  });

  it('refuses a token without exp, or living longer than --auth-max-ttl (24 h by default) from iat, or from now without iat', async () => {
    const signed = (payload: Record<string, unknown>) => new SignJWT({ ...claims, ...payload }).setProtectedHeader({ alg: 'HS256' }).setIssuer(ISSUER).setAudience(AUDIENCE).sign(env.secret);
    const nowSeconds = Math.floor(Date.now() / 1000);
    env.clock.stopAt(nowSeconds * 1000);
    const day = 86_400;
    expect401(await get(await signed({})), 'TOKEN_LIFETIME_TOO_LONG');
    expect401(await get(await signed({ exp: 1e308 })), 'TOKEN_LIFETIME_TOO_LONG');
    expect401(await get(await signed({ iat: nowSeconds, exp: 1e308 })), 'TOKEN_LIFETIME_TOO_LONG');
    expect401(await get(await signed({ iat: nowSeconds, exp: nowSeconds + day + 1 })), 'TOKEN_LIFETIME_TOO_LONG');
    expect401(await get(await signed({ exp: nowSeconds + day + 1 })), 'TOKEN_LIFETIME_TOO_LONG');
    // An iat in the future does not make a long token short.
    expect401(await get(await signed({ iat: nowSeconds + day, exp: nowSeconds + 2 * day })), 'TOKEN_LIFETIME_TOO_LONG');
    expect((await get(await signed({ iat: nowSeconds, exp: nowSeconds + day }))).status).toBe(200);
    expect((await get(await signed({ exp: nowSeconds + day }))).status).toBe(200);
    // Issued a while ago for exactly a day: its lifetime is a day, though less of it is left.
    expect((await get(await signed({ iat: nowSeconds - 3600, exp: nowSeconds - 3600 + day }))).status).toBe(200);
    expect401(await get(await signed({ iat: nowSeconds - 3600, exp: nowSeconds + day })), 'TOKEN_LIFETIME_TOO_LONG');
    const message = ((await get(await signed({}))).json() as { message: string }).message;
    expect(message).toMatch(/no exp/);
    env.clock.reset();
  });

  it('will not start with a secret file others may read, or one holding a JWKS, a JWK or a PEM key; nor with a TLS key others may read', () => {
    const start = (settings: Parameters<typeof createRillServer>[0]) => () => createRillServer({ ...settings, logger: pino({ level: 'silent' }) });
    const file = (name: string, text: string, mode = 0o600) => {
      const path = join(env.dir, name);
      writeFileSync(path, text, { mode });
      chmodSync(path, mode);
      return path;
    };
    const secretIn = (path: string) => start({ settings: { auth: { ...AUTH_OFF, secretFile: path } } });
    const shared = file('shared-secret', 'x'.repeat(40), 0o644);
    expect(secretIn(shared)).toThrow(`${shared}: the HS256 secret is readable by other users (mode 644); make it private with chmod 600 ${shared}`);
    expect(secretIn(file('group-secret', 'x'.repeat(40), 0o640))).toThrow(/readable by other users \(mode 640\)/);
    expect(secretIn(file('jwks-secret', JSON.stringify({ keys: [keys.k1!.jwk] })))).toThrow(/is JSON \(a JWK or JWKS\?\), not a shared secret/);
    expect(secretIn(file('jwk-secret', JSON.stringify(keys.k1!.jwk)))).toThrow(/is JSON/);
    expect(secretIn(file('pem-secret', keys.k1!.pem))).toThrow(/is a PEM key or certificate/);
    // Random text that merely starts with a bracket is a secret.
    expect(readSecretFile(file('bracket-secret', `{${'x'.repeat(40)}`)).length).toBe(41);
    const tlsKey = file('tls-key', keys.k1!.pem, 0o604);
    expect(start({ settings: { tlsCertFile: tlsKey, tlsKeyFile: tlsKey } })).toThrow(/the TLS private key is readable by other users/);
  });

  it('refuses a token before its nbf and accepts it from that second on', async () => {
    const nbfSeconds = Math.floor(Date.now() / 1000) + 100;
    const token = await new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setIssuer(ISSUER).setAudience(AUDIENCE).setNotBefore(nbfSeconds).setExpirationTime(nbfSeconds + 60).sign(env.secret);
    env.clock.stopAt(nbfSeconds * 1000 - 1);
    expect401(await get(token));
    env.clock.stopAt(nbfSeconds * 1000);
    expect((await get(token)).status).toBe(200);
    env.clock.reset();
  });

  it('rotates keys through the JWKS file: old and new both valid, then the old one removed', async () => {
    const old = await asymmetric('k1');
    expect((await get(old)).status).toBe(200);
    const next = await asymmetric('k2');
    expect401(await get(next));
    publishKeys('k1', 'k2');
    expect((await get(next)).status).toBe(200);
    expect((await get(old)).status).toBe(200);
    publishKeys('k2');
    expect401(await get(old));
    expect((await get(next)).status).toBe(200);
    // HS256 tokens are untouched by a JWKS change.
    expect((await get(await hs256())).status).toBe(200);
  });

  it('takes a token from the query on GET only, and keeps it out of logged URLs', async () => {
    const token = await hs256();
    expect((await call(env.url, 'GET', `/${BUCKET}?token=${token}`)).status).toBe(200);
    expect((await call(env.url, 'GET', `/${BUCKET}/streams?limit=5&token=${token}`)).status).toBe(200);
    const head = await call(env.url, 'HEAD', `/${BUCKET}?token=${token}`);
    expect(head.status).toBe(401);
    expect401(await call(env.url, 'PUT', `/${BUCKET}/q?token=${token}`, { headers: { 'content-type': 'text/plain' } }));
    expect((await call(env.url, 'GET', `/${BUCKET}/q`, { headers: bearer(token) })).status).toBe(404);
    const both = await call(env.url, 'GET', `/${BUCKET}?token=${token}`, { headers: bearer(token) });
    expect(both.status).toBe(400);
    expect(withoutToken(`/b/s?offset=-1&token=${token}&live=sse`)).toBe('/b/s?offset=-1&token=[redacted]&live=sse');
  });
});

describe('grant prefixes', () => {
  it('may be as long as the longest name of their family: 1024 bytes on v1 and *, 122 in a bucket', () => {
    const principal = (bucket: string, prefix: string) => principalOf(grantClaims([{ bucket, can: ['read'], prefix }]));
    expect(principal('v1', 'y'.repeat(1024)).ok).toBe(true);
    expect(principal('*', 'y'.repeat(1024)).ok).toBe(true);
    expect(principal('v1', 'y'.repeat(1025))).toEqual({ ok: false, reason: 'grant 0: prefix must be a string of at most 1024 bytes' });
    expect(principal('orders', 'y'.repeat(122)).ok).toBe(true);
    expect(principal('orders', 'y'.repeat(123))).toEqual({ ok: false, reason: 'grant 0: prefix must be a string of at most 122 bytes' });
  });
});
