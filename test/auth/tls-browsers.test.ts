/**
 * HTTPS with a certificate the test makes with openssl (rill's CLI client and curl over
 * it, with a token from `rill token`), what browsers may do (CORS origins, the loopback
 * Host check against DNS rebinding), and what the startup line says about access.
 */
import { execFile, execFileSync } from 'node:child_process';
import { connect as tlsConnect, type ConnectionOptions, type TLSSocket } from 'node:tls';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRillServer, type RillServer } from '../../src/http/server.js';
import { AUTH_OFF, type ServerSettings } from '../../src/http/settings.js';
import { call } from '../http/client.js';
import { CLI, removeDir, startServer, tempDataDir } from '../helpers/server.js';
import { until } from '../helpers/waits.js';
import { useAuthServer } from './setup.js';

const certDir = tempDataDir('rill-tls-');
const cert = join(certDir, 'cert.pem');
const key = join(certDir, 'key.pem');

beforeAll(() => {
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-keyout', key, '-out', cert, '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
  ], { stdio: 'ignore' });
});
afterAll(() => removeDir(certDir));

const env = useAuthServer({ tlsCertFile: cert, tlsKeyFile: key });

// The server runs in this process: its clients must not block it (no execFileSync).
const run = promisify(execFile);

async function rill(args: string[], extraEnv: Record<string, string> = {}): Promise<string> {
  return (await run(process.execPath, [CLI, ...args], { env: { ...process.env, NODE_EXTRA_CA_CERTS: cert, ...extraEnv }, encoding: 'utf8' })).stdout;
}

/** A TLS handshake with the server: the version and suite agreed, or the handshake's failure. */
function handshake(url: string, options: ConnectionOptions, what: (socket: TLSSocket) => string = (s) => `${s.getProtocol()} ${s.getCipher().name}`): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: hostname, port: Number(port), rejectUnauthorized: false, ...options }, () => {
      resolve(what(socket));
      socket.end();
    });
    socket.once('error', reject);
  });
}

async function curl(...args: string[]): Promise<string> {
  return (await run('curl', ['-sS', '--cacert', cert, ...args], { encoding: 'utf8' })).stdout;
}

describe('TLS', () => {
  it('serves HTTPS to the rill CLI (its client) and to curl, with a token from rill token', async () => {
    expect(env.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const admin = (await rill(['token', '--secret-file', env.secretFile, '--bucket', 'tlsb', '--can', 'admin'])).trim();
    const writer = (await rill(['token', '--secret-file', env.secretFile, '--bucket', 'tlsb', '--can', 'read,write', '--prefix', 'logs-', '--ttl', '10m'])).trim();
    await rill(['--url', env.url, 'buckets', 'create', 'tlsb'], { RILL_TOKEN: admin });
    await rill(['--url', env.url, '--token', admin, 'create', 'tlsb/logs-1', '--content-type', 'text/plain']);
    await curl('-X', 'POST', '-H', `Authorization: Bearer ${writer}`, '-H', 'Content-Type: text/plain', '--data-binary', 'over tls', `${env.url}/tlsb/logs-1`);
    expect(await curl(`${env.url}/tlsb/logs-1?offset=-1&token=${writer}`)).toBe('over tls');
    expect(await curl('-o', '/dev/null', '-w', '%{http_code}', '-H', `Authorization: Bearer ${writer}`, `${env.url}/tlsb/other?offset=-1`)).toBe('404');
    expect(await rill(['--url', env.url, '--token', writer, 'read', 'tlsb/logs-1'])).toBe('over tls');
    // A 401 in the CLI names --token and RILL_TOKEN.
    const refused = await rill(['--url', env.url, 'head', 'tlsb/logs-1']).catch((error: { code: number; stderr: string }) => error);
    expect(refused).toMatchObject({ code: 1, stderr: 'rill: UNAUTHORIZED: unauthorized; this server has auth on: give a token with --token or RILL_TOKEN (HTTP 401)\n' });
    // Without the test's CA the certificate is not trusted.
    await expect(run('curl', ['-sS', '-f', `${env.url}/healthz`])).rejects.toThrow();
  });

  it('offers forward-secret AEAD suites only, sends Strict-Transport-Security, and refuses TLS 1.2 with --tls-min-version 1.3', async () => {
    expect(await handshake(env.url, { maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES128-GCM-SHA256' })).toBe('TLSv1.2 ECDHE-ECDSA-AES128-GCM-SHA256');
    expect(await handshake(env.url, { maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-CHACHA20-POLY1305' })).toBe('TLSv1.2 ECDHE-ECDSA-CHACHA20-POLY1305');
    expect(await handshake(env.url, {})).toMatch(/^TLSv1\.3 TLS_/);
    // CBC (not AEAD) on TLS 1.2 is refused at the handshake, though forward-secret.
    await expect(handshake(env.url, { maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA384' })).rejects.toThrow();
    expect(await curl('-sS', '-D', '-', '-o', '/dev/null', `${env.url}/healthz`)).toMatch(/^strict-transport-security: max-age=31536000\r$/im);
    expect(await curl('-sS', '-D', '-', '-o', '/dev/null', `${env.url}/no-such-bucket`)).toMatch(/^strict-transport-security: max-age=31536000\r$/im);
    const only13 = await plainServer({ tlsCertFile: cert, tlsKeyFile: key, tlsMinVersion: 'TLSv1.3' });
    expect(await handshake(only13, {})).toMatch(/^TLSv1\.3 /);
    await expect(handshake(only13, { maxVersion: 'TLSv1.2' })).rejects.toThrow();
  });

  it('serves a renewed certificate to new connections once its files change, without a restart', async () => {
    const dir = tempDataDir('rill-cert-');
    const [renewedCert, renewedKey] = [join(dir, 'cert.pem'), join(dir, 'key.pem')];
    const makeCert = (cn: string) =>
      run('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-keyout', renewedKey, '-out', renewedCert, '-subj', `/CN=${cn}`]);
    try {
      await makeCert('first.test');
      const url = await plainServer({ tlsCertFile: renewedCert, tlsKeyFile: renewedKey });
      const served = (options: ConnectionOptions = {}) => handshake(url, options, (socket) => String(socket.getPeerCertificate().subject.CN));
      expect(await served()).toBe('first.test');
      await makeCert('second.test');
      await expect.poll(() => served(), { interval: 100, timeout: 10_000 }).toBe('second.test');
    } finally {
      removeDir(dir);
    }
  });

  it("builds a created stream's Location from the served scheme, or from --public-url behind a proxy", async () => {
    const tlsUrl = await plainServer({ tlsCertFile: cert, tlsKeyFile: key });
    const created = await curl('-sS', '-D', '-', '-o', '/dev/null', '-X', 'PUT', '-H', 'content-type: text/plain', `${tlsUrl}/v1/stream/located`);
    expect(created).toMatch(/^HTTP\/1\.1 201/);
    expect(created).toContain(`\nlocation: ${tlsUrl}/v1/stream/located\r\n`);
    const proxied = await plainServer({ publicUrl: 'https://streams.example/' });
    const reply = await call(proxied, 'PUT', '/v1/stream/located', { headers: { 'content-type': 'text/plain' } });
    expect([reply.status, reply.headers['location']]).toEqual([201, 'https://streams.example/v1/stream/located']);
  });
});

/** Plain in-process servers for the browser checks, auth off unless told. */
const servers: Array<{ rill: RillServer; dir: string }> = [];
async function plainServer(settings: Partial<ServerSettings> = {}): Promise<string> {
  const dir = tempDataDir('rill-browsers-');
  const rill = createRillServer({ settings: { port: 0, dataDir: dir, ...settings }, logger: pino({ level: 'silent' }) });
  await rill.listen();
  servers.push({ rill, dir });
  return rill.url();
}
afterAll(async () => {
  for (const { rill, dir } of servers) {
    await rill.close();
    removeDir(dir);
  }
});

const PREFLIGHT = { 'access-control-request-method': 'PUT', 'access-control-request-headers': 'content-type' };

describe('browsers', () => {
  it('with auth off, gives CORS headers to loopback pages only, on preflight and response', async () => {
    const url = await plainServer();
    for (const origin of ['https://evil.example', 'http://localhost.evil.example']) {
      const preflight = await call(url, 'OPTIONS', '/v1/stream/c', { headers: { origin, ...PREFLIGHT } });
      const response = await call(url, 'PUT', '/v1/stream/c', { headers: { origin } });
      for (const reply of [preflight, response]) expect(Object.keys(reply.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
    }
    const local = await call(url, 'OPTIONS', '/v1/stream/c', { headers: { origin: 'http://localhost:5173', ...PREFLIGHT } });
    expect(local.headers['access-control-allow-origin']).toBe('http://localhost:5173');
    expect(Number(local.headers['access-control-max-age'])).toBeLessThanOrEqual(600);
    const read = await call(url, 'GET', '/v1/stream/c?offset=-1', { headers: { origin: 'http://127.0.0.1:8080' } });
    expect(read.headers['access-control-allow-origin']).toBe('http://127.0.0.1:8080');
  });

  it('with --cors-origin, gives CORS headers to the origins named only', async () => {
    const url = await plainServer({ corsOrigins: ['https://app.example'] });
    const allowed = await call(url, 'OPTIONS', '/v1/stream/c', { headers: { origin: 'https://app.example', ...PREFLIGHT } });
    expect(allowed.headers['access-control-allow-origin']).toBe('https://app.example');
    // A page of an allowed origin (an admin's console) may change a bucket's settings too.
    const patch = await call(url, 'OPTIONS', '/news', { headers: { origin: 'https://app.example', 'access-control-request-method': 'PATCH' } });
    expect(patch.headers['access-control-allow-methods']?.split(', ')).toEqual(['GET', 'HEAD', 'PUT', 'POST', 'PATCH', 'DELETE', 'OPTIONS']);
    const local = await call(url, 'OPTIONS', '/v1/stream/c', { headers: { origin: 'http://localhost:5173', ...PREFLIGHT } });
    expect(local.headers['access-control-allow-origin']).toBeUndefined();
  });

  /** Every kind of route, with a body a writer would send; the stream and bucket exist. */
  const CROSS_SITE_TARGETS = [
    '/v1/stream/cs',
    '/v1/stream/cs/append-batch',
    '/v1/stream/cs/attrs',
    '/v1/stream/cs/snapshot/0',
    '/v1/stream/cs/retention/0',
    '/v1/stream/__ds/subscriptions/s1',
    '/v1/stream/__ds/subscriptions/s1/claim',
    '/csbk',
    '/csbk/cs',
    '/csbk/key/$transaction',
    '/console/',
    '/nowhere/at/all',
  ];
  const UNSAFE_METHODS = ['POST', 'PUT', 'DELETE', 'PATCH'];

  /** Sends every unsafe method to every route from `origin` and expects each refused, the stream and bucket unchanged. */
  async function expectCrossSiteRefused(url: string, origin: string, headers: Record<string, string> = {}): Promise<void> {
    for (const path of CROSS_SITE_TARGETS) {
      for (const method of UNSAFE_METHODS) {
        const reply = await call(url, method, path, { headers: { origin, 'content-type': 'text/plain', ...headers }, body: 'pwned' });
        expect(reply.status, `${method} ${path}`).toBe(403);
        expect(reply.headers['content-type'], `${method} ${path}`).toBe('application/json');
        expect((reply.json() as { code: string }).code, `${method} ${path}`).toBe('ORIGIN_NOT_ALLOWED');
      }
    }
    expect((await call(url, 'GET', '/v1/stream/cs?offset=-1', { headers })).text()).toBe('kept');
    expect((await call(url, 'GET', '/csbk/cs?offset=-1', { headers })).text()).toBe('kept');
  }

  async function seedCrossSiteTargets(url: string, headers: Record<string, string> = {}): Promise<void> {
    const text = { ...headers, 'content-type': 'text/plain' };
    expect((await call(url, 'PUT', '/v1/stream/cs', { headers: text, body: 'kept' })).status).toBe(201);
    expect((await call(url, 'PUT', '/csbk', { headers })).status).toBe(201);
    expect((await call(url, 'PUT', '/csbk/cs', { headers: text, body: 'kept' })).status).toBe(201);
  }

  it('with auth off, refuses every unsafe method on every route from a page of an origin not allowed, and writes nothing', async () => {
    const url = await plainServer({ consoleDir: null });
    await seedCrossSiteTargets(url);
    await expectCrossSiteRefused(url, 'https://evil.example');
    await expectCrossSiteRefused(url, 'null');
    // Without Origin (curl, servers), and from a loopback page, writes go on.
    expect((await call(url, 'POST', '/v1/stream/cs', { headers: { 'content-type': 'text/plain' }, body: '+' })).status).toBe(204);
    const local = await call(url, 'POST', '/v1/stream/cs', { headers: { origin: 'http://localhost:5173', 'content-type': 'text/plain' }, body: '+' });
    expect(local.status).toBe(204);
    // A safe method is only a read: the page cannot see its answer (no CORS headers).
    const read = await call(url, 'GET', '/v1/stream/cs?offset=-1', { headers: { origin: 'https://evil.example' } });
    expect(read.status).toBe(200);
    expect(read.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('with --cors-origin, serves the origins named and the server\'s own (its console), and refuses others, auth on or off', async () => {
    const token = await env.token([{ bucket: '*', can: ['admin'] }]);
    const bearer = { authorization: `Bearer ${token}` };
    const named = { corsOrigins: ['https://app.example'] };
    const open = await plainServer(named);
    const secured = await plainServer({ ...named, auth: { ...AUTH_OFF, secretFile: env.secretFile, keysCheckMs: 0 } });
    for (const [url, headers] of [[open, {}], [secured, bearer]] as const) {
      await seedCrossSiteTargets(url, headers);
      await expectCrossSiteRefused(url, 'http://localhost:5173', headers);
      const { host } = new URL(url);
      for (const origin of ['https://app.example', `http://${host}`]) {
        const write = await call(url, 'POST', '/v1/stream/cs', { headers: { ...headers, origin, 'content-type': 'text/plain' }, body: '+' });
        expect(write.status, origin).toBe(204);
      }
    }
    // Another scheme on the same host and port is another origin.
    const https = await call(open, 'POST', '/v1/stream/cs', { headers: { origin: `https://${new URL(open).host}`, 'content-type': 'text/plain' }, body: '+' });
    expect(https.status).toBe(403);
  });

  it('on loopback, refuses a Host that is not a loopback name unless --allowed-host adds it', async () => {
    const url = await plainServer({ allowedHosts: ['rill.internal'] });
    const { port } = new URL(url);
    const rebinding = await call(url, 'PUT', '/v1/stream/h', { headers: { host: `evil.example:${port}` } });
    expect(rebinding.status).toBe(403);
    expect((rebinding.json() as { code: string }).code).toBe('HOST_NOT_ALLOWED');
    expect((await call(url, 'HEAD', '/v1/stream/h', {})).status).toBe(404);
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`, `rill.internal:${port}`, 'rill.internal']) {
      expect((await call(url, 'GET', '/healthz', { headers: { host } })).status, host).toBe(200);
    }
  });
});

describe('the startup line', () => {
  it('says whether auth is on, and warns when an open server listens beyond loopback', async () => {
    const open = await startServer({ process: true, args: ['--host', '0.0.0.0'], env: { RILL_LOG_LEVEL: 'info' } });
    const secured = await startServer({ process: true, args: ['--auth-secret-file', env.secretFile], env: { RILL_LOG_LEVEL: 'info' } });
    try {
      // The line is logged once listening, which /healthz (what startServer waits for) may answer before the pipe has carried it.
      for (const server of [open, secured]) await until(() => server.output().includes('rill listening on'), 'the startup line');
      expect(open.output()).toMatch(/rill listening on http:\/\/0\.0\.0\.0:\d+ \(auth off: anyone who can reach this port/);
      expect(open.output()).toMatch(/"level":40.*without auth/);
      expect(secured.output()).toMatch(/rill listening on http:\/\/127\.0\.0\.1:\d+ \(auth on \(HS256 secret\)/);
      expect(secured.output()).not.toMatch(/"level":40/);
      expect((await call(secured.url, 'GET', '/v1/stream/x?offset=-1')).status).toBe(401);
    } finally {
      for (const server of [open, secured]) {
        await server.stop();
        removeDir(server.dataDir);
      }
    }
  });
});
