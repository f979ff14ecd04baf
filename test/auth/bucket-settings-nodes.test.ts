/**
 * Bucket settings on two nodes sharing one PostgreSQL database: a change made through one
 * is honoured by the other (within BUCKET_SETTINGS_CACHE_MS), and a restart keeps it.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { signToken } from '../../src/auth/sign.js';
import { openRillServer, type RillServer } from '../../src/http/server.js';
import { AUTH_OFF } from '../../src/http/settings.js';
import { sharedDatabase } from '../helpers/postgres.js';
import { removeDir, tempDataDir } from '../helpers/server.js';
import { until } from '../helpers/waits.js';
import { call, expectRefusal } from '../http/client.js';
import { bearer } from './setup.js';

let dir = '';
let postgresUrl = '';
let secretFile = '';
let secret: Uint8Array;
const nodes: RillServer[] = [];
let admin: Record<string, string>;

async function startNode(): Promise<string> {
  const auth = { ...AUTH_OFF, secretFile, keysCheckMs: 0 };
  const rill = await openRillServer({
    settings: { drainTimeoutMs: 500, auth, port: 0, store: 'postgres', postgresUrl, bucketLimits: { maxStreams: 10, maxSubscriptions: 0, maxBytes: 0 } },
    logger: pino({ level: 'silent' }),
  });
  await rill.listen();
  nodes.push(rill);
  return rill.url();
}

beforeAll(async () => {
  dir = tempDataDir('rill-bset-');
  secretFile = join(dir, 'secret');
  const text = randomBytes(32).toString('base64url');
  writeFileSync(secretFile, text, { mode: 0o600 });
  secret = Buffer.from(text, 'utf8');
  postgresUrl = await sharedDatabase();
  admin = bearer(await signToken(secret, { grants: [{ bucket: '*', can: ['admin'] }], ttlMs: 3_600_000, nowMs: Date.now() }));
});

afterAll(async () => {
  await Promise.all(nodes.map((node) => node.close()));
  if (dir) removeDir(dir);
});

it('a change through one node is honoured by another, and survives a restart of both', async () => {
  const [a, b] = [await startNode(), await startNode()];
  expect((await call(a, 'PUT', '/shared', { headers: admin })).status).toBe(201);
  expect((await call(a, 'PUT', '/shared/s0', { headers: { ...admin, 'content-type': 'text/plain' }, body: 'hi' })).status).toBe(201);
  // Node b reads the bucket before the change: what it kept must expire.
  expect((await call(b, 'GET', '/shared/s0')).status).toBe(401);
  const changed = await call(a, 'PATCH', '/shared', { headers: { ...admin, 'content-type': 'application/json' }, body: JSON.stringify({ publicRead: true, limits: { maxStreams: 1 } }) });
  expect(changed.status, changed.text()).toBe(200);
  // Node b answers from its cache until the entry expires (BUCKET_SETTINGS_CACHE_MS), then from the store.
  await until(async () => (await call(b, 'GET', '/shared/s0?offset=-1')).status === 200, 'node b to see the bucket public');
  expect((await call(b, 'GET', '/shared/s0?offset=-1')).text()).toBe('hi');
  expect((await call(b, 'GET', '/shared', { headers: admin })).json()).toMatchObject({ publicRead: true, limits: { maxStreams: 1 } });
  expectRefusal(await call(b, 'PUT', '/shared/s1', { headers: { ...admin, 'content-type': 'text/plain' } }), 'BUCKET_STREAM_LIMIT');

  await Promise.all(nodes.splice(0).map((node) => node.close()));
  const c = await startNode();
  expect((await call(c, 'GET', '/shared/s0?offset=-1')).text()).toBe('hi');
  expectRefusal(await call(c, 'PUT', '/shared/s1', { headers: { ...admin, 'content-type': 'text/plain' } }), 'BUCKET_STREAM_LIMIT');
});
