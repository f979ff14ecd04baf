/**
 * Public keys fetched over HTTPS (`--auth-jwks-url`, `--auth-oidc-issuer`) and the strict
 * token profile (`--auth-profile strict`). The key server is a real HTTPS server this file
 * starts on 127.0.0.1 with a certificate made by openssl; rill runs as the real binary in
 * a child process that trusts that certificate through NODE_EXTRA_CA_CERTS, as an operator
 * with a private CA would do. Tokens are signed with jose.
 */
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jwksUriOf } from '../../src/auth/remote-keys.js';
import { discoveryUrlOf, remoteKeysUrlProblem } from '../../src/auth/key-urls.js';
import { profileProblem } from '../../src/auth/profile.js';
import type { ErrorCode } from '../../src/protocol/errors.js';
import { call, expectRefusal, type Reply } from '../http/client.js';
import { CLI, removeDir, startServer, tempDataDir, type ServerProcess } from '../helpers/server.js';
import { bearer } from './setup.js';

const certDir = tempDataDir('rill-jwks-');
const cert = join(certDir, 'cert.pem');
const certKey = join(certDir, 'key.pem');
/** The child rill trusts the key server's certificate as an extra CA. */
const TRUST = { NODE_EXTRA_CA_CERTS: cert };

interface Key {
  privateKey: CryptoKey;
  jwk: JWK;
}
const keys: Record<string, Key> = {};

async function makeKey(kid: string, alg: 'RS256' | 'ES256'): Promise<Key> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return (keys[kid] = { privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' } });
}

/** The key server: the set it publishes now, and how many times /jwks was fetched. */
const keyServer = { published: [] as string[], fetches: 0, url: '', server: null as Server | null };

function publish(...kids: string[]): void {
  keyServer.published = kids;
}

function startKeyServer(): Promise<void> {
  const server = createServer({ cert: readFileSync(cert), key: readFileSync(certKey) }, (req, res) => {
    const json = (body: unknown) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (req.url === '/jwks') {
      keyServer.fetches++;
      return json({ keys: keyServer.published.map((kid) => keys[kid]!.jwk) });
    }
    if (req.url === '/.well-known/openid-configuration') return json({ issuer: keyServer.url, jwks_uri: `${keyServer.url}/jwks` });
    // An issuer whose discovery document names another one (the issuer at the root).
    if (req.url === '/liar/.well-known/openid-configuration') return json({ issuer: keyServer.url, jwks_uri: `${keyServer.url}/jwks` });
    // A set padded past rill's limit on a key server's answer (256 KiB).
    if (req.url === '/huge') return json({ keys: keyServer.published.map((kid) => keys[kid]!.jwk), padding: 'x'.repeat(300 * 1024) });
    res.writeHead(404).end();
  });
  keyServer.server = server;
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      keyServer.url = `https://127.0.0.1:${(server.address() as { port: number }).port}`;
      resolve();
    }),
  );
}

beforeAll(async () => {
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-keyout', certKey, '-out', cert, '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
  ], { stdio: 'ignore' });
  await Promise.all([makeKey('k1', 'RS256'), makeKey('k2', 'ES256'), makeKey('k3', 'ES256')]);
  await startKeyServer();
});
afterAll(async () => {
  await new Promise((resolve) => keyServer.server?.close(resolve));
  removeDir(certDir);
});

const GRANTS = { rill: { grants: [{ bucket: '*', can: ['admin'] }] } };

/** A token of `kid` signed with `signer`'s private key (a foreign key when they differ). */
function tokenOf(kid: string, options: { signer?: Key; issuer?: string; claims?: Record<string, unknown> } = {}): Promise<string> {
  const signer = options.signer ?? keys[kid]!;
  let jwt = new SignJWT({ ...GRANTS, ...options.claims }).setProtectedHeader({ alg: signer.jwk.alg!, kid }).setExpirationTime('1h');
  if (options.issuer) jwt = jwt.setIssuer(options.issuer);
  return jwt.sign(signer.privateKey);
}

/** GET of a bucket this file never creates: 404 once the token is accepted, a refusal otherwise. */
const probe = (url: string, token: string): Promise<Reply> => call(url, 'GET', '/jwksb', { headers: bearer(token) });

function expectAccepted(reply: Reply): void {
  expect(reply.status, reply.text()).toBe(404);
  expect((reply.json() as { code: string }).code).toBe('BUCKET_NOT_FOUND');
}

function expectRefused(reply: Reply, code: ErrorCode): void {
  expectRefusal(reply, code);
  if (reply.status === 401) expect(reply.headers['www-authenticate']).toContain(`code="${code}"`);
}

function startRill(args: string[]): Promise<ServerProcess> {
  return startServer({ process: true, store: 'memory', args, env: TRUST });
}

const run = promisify(execFile);

/** `rill serve ARGS` expected to refuse to start: its exit code and stderr. */
async function refusedStart(args: string[]): Promise<{ code: number; stderr: string }> {
  const outcome = await run(process.execPath, [CLI, 'serve', '--store', 'memory', '--port', '0', ...args], { encoding: 'utf8' }).catch((error: { code: number; stderr: string }) => error);
  return { code: (outcome as { code: number }).code, stderr: (outcome as { stderr: string }).stderr };
}

describe('--auth-jwks-url', () => {
  let rill: ServerProcess;
  beforeAll(async () => {
    publish('k1');
    // No cooldown: a token with an unknown kid fetches the set again at once.
    rill = await startRill(['--auth-jwks-url', `${keyServer.url}/jwks`, '--auth-jwks-cooldown', '0ms']);
  });
  afterAll(() => rill?.stop());

  it('accepts a token signed by a key of the set fetched over HTTPS', async () => {
    // Fetched on first use, not at startup: a server starts while its key server is down.
    expect(keyServer.fetches).toBe(0);
    expectAccepted(await probe(rill.url, await tokenOf('k1')));
    expect(keyServer.fetches).toBe(1);
  });

  it('fetches the set again for a token naming an unknown kid, and accepts it once the set has the key', async () => {
    publish('k1');
    const token = await tokenOf('k2');
    const before = keyServer.fetches;
    expectRefused(await probe(rill.url, token), 'UNAUTHORIZED');
    expect(keyServer.fetches).toBe(before + 1);
    publish('k1', 'k2');
    expectAccepted(await probe(rill.url, token));
    expect(keyServer.fetches).toBe(before + 2);
    // Known now: no fetch for it.
    expectAccepted(await probe(rill.url, await tokenOf('k2')));
    expect(keyServer.fetches).toBe(before + 2);
  });

  it('refuses a token signed by a key not in the set, under a kid it has or one it lacks (401 UNAUTHORIZED)', async () => {
    publish('k1', 'k2');
    const foreign = await makeKey('foreign', 'RS256');
    expectRefused(await probe(rill.url, await tokenOf('k1', { signer: foreign })), 'UNAUTHORIZED');
    expectRefused(await probe(rill.url, await tokenOf('foreign')), 'UNAUTHORIZED');
  });

  it('forgets the tokens it accepted when a fetched set no longer has their key', async () => {
    publish('k1', 'k2');
    const token = await tokenOf('k1');
    expectAccepted(await probe(rill.url, token));
    // k1 withdrawn; a token of k3 makes rill fetch the new set.
    publish('k2', 'k3');
    expectAccepted(await probe(rill.url, await tokenOf('k3')));
    expectRefused(await probe(rill.url, token), 'UNAUTHORIZED');
  });
});

describe('the limits on a key server', () => {
  it('answers 503 UNAVAILABLE, naming the URL, when the set is larger than 256 KiB', async () => {
    publish('k1');
    const rill = await startRill(['--auth-jwks-url', `${keyServer.url}/huge`]);
    try {
      const reply = await probe(rill.url, await tokenOf('k1'));
      expectRefused(reply, 'UNAVAILABLE');
      expect(reply.headers['retry-after']).toBe('1');
      expect((reply.json() as { message: string }).message).toContain(`${keyServer.url}/huge: the answer is more than 262144 bytes`);
    } finally {
      await rill.stop();
    }
  });

  it('refuses to start (exit 2) on a JWKS URL or issuer that is not https, and on two sources of public keys', async () => {
    const plain = await refusedStart(['--auth-jwks-url', 'http://127.0.0.1:1/jwks']);
    expect(plain).toEqual({ code: 2, stderr: 'rill: CONFIG: --auth-jwks-url http://127.0.0.1:1/jwks: must be an https:// URL: keys fetched over plain HTTP could be replaced on the way\n' });
    const issuer = await refusedStart(['--auth-oidc-issuer', 'http://id.example']);
    expect(issuer.code).toBe(2);
    expect(issuer.stderr).toContain('--auth-oidc-issuer http://id.example: must be an https:// URL');
    const both = await refusedStart(['--auth-jwks-url', 'https://id.example/jwks', '--auth-oidc-issuer', 'https://id.example']);
    expect(both).toEqual({ code: 2, stderr: 'rill: CONFIG: --auth-jwks-url and --auth-oidc-issuer cannot go together: give the public keys one way\n' });
    const otherIssuer = await refusedStart(['--auth-oidc-issuer', 'https://id.example', '--auth-issuer', 'https://other.example']);
    expect(otherIssuer.code).toBe(2);
    expect(otherIssuer.stderr).toContain('--auth-issuer https://other.example differs from --auth-oidc-issuer https://id.example');
  });
});

describe('--auth-oidc-issuer', () => {
  let rill: ServerProcess;
  beforeAll(async () => {
    publish('k1');
    rill = await startRill(['--auth-oidc-issuer', keyServer.url]);
  });
  afterAll(() => rill?.stop());

  it('verifies with the keys its discovery document names, and only tokens it issued', async () => {
    expectAccepted(await probe(rill.url, await tokenOf('k1', { issuer: keyServer.url })));
    expectRefused(await probe(rill.url, await tokenOf('k1', { issuer: 'https://other.example' })), 'UNAUTHORIZED');
    expectRefused(await probe(rill.url, await tokenOf('k1')), 'UNAUTHORIZED');
  });

  it('uses no keys of a discovery document that names another issuer (503 UNAVAILABLE, saying so)', async () => {
    const liar = `${keyServer.url}/liar`;
    const other = await startRill(['--auth-oidc-issuer', liar]);
    try {
      const reply = await probe(other.url, await tokenOf('k1', { issuer: liar }));
      expectRefused(reply, 'UNAVAILABLE');
      expect((reply.json() as { message: string }).message).toContain(`the discovery document names the issuer "${keyServer.url}", not "${liar}"`);
    } finally {
      await other.stop();
    }
  });
});

describe('--auth-profile strict', () => {
  let rill: ServerProcess;
  const secretFile = join(certDir, 'secret');
  beforeAll(async () => {
    publish('k1');
    writeFileSync(secretFile, randomBytes(32).toString('base64url'), { mode: 0o600 });
    rill = await startRill(['--auth-jwks-url', `${keyServer.url}/jwks`, '--auth-secret-file', secretFile, '--auth-profile', 'strict']);
  });
  afterAll(() => rill?.stop());

  const nowSeconds = () => Math.floor(Date.now() / 1000);
  /** A token of k1 with exactly this header type and these claims besides the grants. */
  const strictToken = (typ: string | undefined, claims: Record<string, unknown>): Promise<string> =>
    new SignJWT({ ...GRANTS, ...claims }).setProtectedHeader({ alg: 'RS256', kid: 'k1', ...(typ === undefined ? {} : { typ }) }).sign(keys.k1!.privateKey);
  const full = () => ({ sub: 'billing', iat: nowSeconds(), exp: nowSeconds() + 600, jti: 'j-1' });

  it('accepts an access token with typ at+jwt, sub, iat, exp and jti', async () => {
    expectAccepted(await probe(rill.url, await strictToken('at+jwt', full())));
    expectAccepted(await probe(rill.url, await strictToken('application/at+jwt', full())));
  });

  it('accepts the tokens of rill token, which have that type, when they name a subject', async () => {
    const token = async (...args: string[]) => (await run(process.execPath, [CLI, 'token', '--secret-file', secretFile, '--bucket', '*', '--can', 'admin', ...args], { encoding: 'utf8' })).stdout.trim();
    expectAccepted(await probe(rill.url, await token('--sub', 'billing')));
    const anonymous = await probe(rill.url, await token());
    expectRefused(anonymous, 'TOKEN_PROFILE');
    expect((anonymous.json() as { message: string }).message).toBe('the token has no "sub" claim (--auth-profile strict)');
  });

  it('refuses each claim missing and a typ other than at+jwt with 401 TOKEN_PROFILE, saying which', async () => {
    for (const claim of ['sub', 'iat', 'exp', 'jti']) {
      const claims: Record<string, unknown> = full();
      delete claims[claim];
      const reply = await probe(rill.url, await strictToken('at+jwt', claims));
      expectRefused(reply, 'TOKEN_PROFILE');
      expect((reply.json() as { message: string }).message).toBe(`the token has no "${claim}" claim (--auth-profile strict)`);
    }
    for (const typ of ['JWT', undefined]) {
      const reply = await probe(rill.url, await strictToken(typ, full()));
      expectRefused(reply, 'TOKEN_PROFILE');
      expect((reply.json() as { message: string }).message).toContain('typ "at+jwt"');
    }
  });
});

describe('the rules, as functions', () => {
  it('takes https URLs only as key servers', () => {
    expect(remoteKeysUrlProblem('https://id.example/jwks')).toBeNull();
    expect(remoteKeysUrlProblem('http://id.example/jwks')).toMatch(/must be an https:\/\/ URL/);
    expect(remoteKeysUrlProblem('https://user:pw@id.example/jwks')).toMatch(/user name or password/);
    expect(remoteKeysUrlProblem('id.example')).toBe('is not a URL');
  });

  it('finds the JWK Set of a discovery document that names the issuer asked for, over https', () => {
    expect(discoveryUrlOf('https://id.example/')).toBe('https://id.example/.well-known/openid-configuration');
    expect(discoveryUrlOf('https://id.example/tenant')).toBe('https://id.example/tenant/.well-known/openid-configuration');
    expect(jwksUriOf({ issuer: 'https://id.example', jwks_uri: 'https://id.example/keys' }, 'https://id.example')).toEqual({ ok: true, url: 'https://id.example/keys' });
    expect(jwksUriOf({ issuer: 'https://evil.example', jwks_uri: 'https://id.example/keys' }, 'https://id.example')).toMatchObject({ ok: false });
    expect(jwksUriOf({ issuer: 'https://id.example', jwks_uri: 'http://id.example/keys' }, 'https://id.example')).toMatchObject({ ok: false });
    expect(jwksUriOf({ issuer: 'https://id.example' }, 'https://id.example')).toEqual({ ok: false, reason: 'the discovery document has no jwks_uri' });
    expect(jwksUriOf([], 'https://id.example')).toMatchObject({ ok: false });
  });

  it('asks nothing more of a token by default, and RFC 9068 access tokens under strict', () => {
    const claims = { sub: 's', iat: 1, exp: 2, jti: 'j' };
    expect(profileProblem('default', {}, {})).toBeNull();
    expect(profileProblem('strict', { typ: 'at+JWT' }, claims)).toBeNull();
    expect(profileProblem('strict', { typ: 'jwt' }, claims)).toMatch(/typ "at\+jwt"/);
    expect(profileProblem('strict', { typ: 'at+jwt' }, { ...claims, sub: '' })).toBe('the token\'s "sub" claim must be a non-empty string');
    expect(profileProblem('strict', { typ: 'at+jwt' }, { ...claims, exp: '2' })).toBe('the token\'s "exp" claim must be a NumericDate');
  });
});
