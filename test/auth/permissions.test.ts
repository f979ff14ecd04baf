/**
 * The permission table: every route and method of both URL families against every kind
 * of token (no grant, read, write, manage, admin, a grant on another bucket, a grant on
 * another prefix), asserting the status, the error code, and that a refused request
 * changed nothing. The expected answers follow the permission table of docs/security.md, written
 * here on its own; the test also checks that it covers every row of the server's
 * ROUTE_PERMISSIONS, so a new route cannot go untested.
 */
import { describe, expect, it } from 'vitest';
import { PERMISSIONS, type Permission } from '../../src/core/access.js';
import { Revocations } from '../../src/http/revocations.js';
import { ROUTE_PERMISSIONS } from '../../src/http/access.js';
import { runCli } from '../helpers/cli.js';
import { call, type Reply } from '../http/client.js';
import { bearer, useAuthServer, type GrantSpec } from './setup.js';
import { extensionUrl } from '../../src/protocol/extensions.js';

const env = useAuthServer();
const BUCKET = 'ptab';
const OTHER = 'pother';
const TEXT = { 'content-type': 'text/plain' };
const JSON_TYPE = { 'content-type': 'application/json' };
const SNAP_AT = '00000000000000000003';
const TAIL = '00000000000000000006';

type Who = 'none' | Permission | 'wrong bucket' | 'wrong prefix';
const WHO: Who[] = ['none', ...PERMISSIONS, 'wrong bucket', 'wrong prefix'];
const RANK: Record<Permission, number> = { read: 1, write: 2, manage: 3, admin: 4 };

function grantsOf(who: Who, bucket: string): GrantSpec[] {
  if (who === 'none') return [];
  if (who === 'wrong bucket') return [{ bucket: bucket === OTHER ? BUCKET : OTHER, can: ['admin'] }];
  if (who === 'wrong prefix') return [{ bucket, can: ['admin'], prefix: 'zz-' }];
  return [{ bucket, can: [who] }];
}

/** A status and error code; `frameCode` for an answer of frames in a 200 (append-batch refuses a missing stream whole: 404). */
interface Expected {
  status: number;
  code?: string;
  frameCode?: string;
}

interface Row {
  /** The ROUTE_PERMISSIONS row it exercises (methods outside the table: none). */
  row: string | null;
  method: string;
  need: Permission;
  /** The path under the stream's URL, or for bucket routes under the bucket's. */
  suffix: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  allowed: number;
  /** The answer when the target is concealed (as if it did not exist). */
  hidden: Expected;
  /** PUT of a stream: the target must not exist yet. */
  fresh?: boolean;
}

const NO_STREAM = { status: 404, code: 'STREAM_NOT_FOUND' };
const frame = Buffer.concat([Buffer.from([0, 0, 0, 1]), Buffer.from('z')]);

const STREAM_ROWS: Row[] = [
  { row: 'stream GET', method: 'GET', need: 'read', suffix: '?offset=-1', allowed: 200, hidden: NO_STREAM },
  { row: 'stream HEAD', method: 'HEAD', need: 'read', suffix: '', allowed: 200, hidden: { status: 404 } },
  { row: 'stream POST', method: 'POST', need: 'write', suffix: '', headers: TEXT, body: 'x', allowed: 204, hidden: NO_STREAM },
  { row: 'stream POST', method: 'POST', need: 'write', suffix: '', headers: { 'stream-closed': 'true' }, allowed: 204, hidden: NO_STREAM },
  { row: 'stream PUT', method: 'PUT', need: 'manage', suffix: '', headers: TEXT, allowed: 201, hidden: { status: 404, code: 'BUCKET_NOT_FOUND' }, fresh: true },
  { row: 'stream DELETE', method: 'DELETE', need: 'manage', suffix: '', allowed: 204, hidden: NO_STREAM },
  { row: null, method: 'PATCH', need: 'read', suffix: '', allowed: 405, hidden: { status: 405, code: 'METHOD_NOT_ALLOWED' } },
  { row: 'snapshot GET', method: 'GET', need: 'read', suffix: '/snapshot', allowed: 307, hidden: NO_STREAM },
  { row: 'snapshot HEAD', method: 'HEAD', need: 'read', suffix: '/snapshot', allowed: 307, hidden: { status: 404 } },
  { row: 'snapshot PUT', method: 'PUT', need: 'manage', suffix: `/snapshot/${TAIL}`, headers: JSON_TYPE, body: '{"n":2}', allowed: 204, hidden: NO_STREAM },
  { row: 'retention PUT', method: 'PUT', need: 'manage', suffix: `/retention/${SNAP_AT}`, allowed: 204, hidden: NO_STREAM },
  { row: 'bootstrap GET', method: 'GET', need: 'read', suffix: '/bootstrap', allowed: 200, hidden: NO_STREAM },
  { row: 'bootstrap HEAD', method: 'HEAD', need: 'read', suffix: '/bootstrap', allowed: 200, hidden: { status: 404 } },
  { row: 'attrs GET', method: 'GET', need: 'read', suffix: '/attrs', allowed: 200, hidden: NO_STREAM },
  { row: 'attrs HEAD', method: 'HEAD', need: 'read', suffix: '/attrs', allowed: 200, hidden: { status: 404 } },
  { row: 'attrs PUT', method: 'PUT', need: 'manage', suffix: '/attrs', headers: JSON_TYPE, body: '{"title":"t"}', allowed: 204, hidden: NO_STREAM },
  { row: 'producers GET', method: 'GET', need: 'read', suffix: '/producers', allowed: 200, hidden: NO_STREAM },
  { row: 'producers HEAD', method: 'HEAD', need: 'read', suffix: '/producers', allowed: 200, hidden: { status: 404 } },
  { row: 'append-batch POST', method: 'POST', need: 'write', suffix: '/append-batch', headers: { 'content-type': 'text/plain' }, body: frame, allowed: 200, hidden: { status: 404, code: 'STREAM_NOT_FOUND' } },
];

const NO_BUCKET = { status: 404, code: 'BUCKET_NOT_FOUND' };
/** Bucket routes; `target` says which bucket: the shared one, a fresh name, or a fresh empty bucket. */
const BUCKET_ROWS: Array<Row & { target: 'shared' | 'fresh' | 'empty' }> = [
  { row: 'bucket GET', method: 'GET', need: 'read', suffix: '', allowed: 200, hidden: NO_BUCKET, target: 'shared' },
  { row: 'bucket HEAD', method: 'HEAD', need: 'read', suffix: '', allowed: 200, hidden: { status: 404 }, target: 'shared' },
  { row: 'bucket PUT', method: 'PUT', need: 'admin', suffix: '', allowed: 201, hidden: NO_BUCKET, target: 'fresh' },
  { row: 'bucket DELETE', method: 'DELETE', need: 'admin', suffix: '', allowed: 204, hidden: NO_BUCKET, target: 'empty' },
  { row: 'bucket-streams GET', method: 'GET', need: 'read', suffix: '/streams', allowed: 200, hidden: NO_BUCKET, target: 'shared' },
  { row: 'bucket-streams HEAD', method: 'HEAD', need: 'read', suffix: '/streams', allowed: 200, hidden: { status: 404 }, target: 'shared' },
];

/**
 * Rows tested elsewhere: the server-wide bucket listing (admin routes), bucket settings
 * (admin on `*`, whoever holds the bucket: test/auth/bucket-settings.test.ts), subscriptions
 * (test/auth/subscriptions.test.ts), revocations (below).
 */
const NOT_ROUTED = new Set(['buckets GET', 'bucket PATCH', ...Object.keys(ROUTE_PERMISSIONS).filter((row) => row.startsWith('subscription') || row.startsWith('revocations'))]);

let counter = 0;
const fresh = (prefix: string) => `${prefix}${process.pid}-${++counter}`;
const tokens = new Map<string, Promise<string>>();
const tokenFor = (grants: GrantSpec[]) => {
  const key = JSON.stringify(grants);
  if (!tokens.has(key)) tokens.set(key, env.token(grants));
  return tokens.get(key)!;
};
const admin = () => tokenFor([{ bucket: '*', can: ['admin'] }]);

async function send(method: string, path: string, token: string, options: { headers?: Record<string, string>; body?: string | Buffer } = {}): Promise<Reply> {
  return call(env.url, method, path, { headers: { ...bearer(token), ...options.headers }, ...(options.body === undefined ? {} : { body: options.body }) });
}

async function asAdmin(method: string, path: string, options: { headers?: Record<string, string>; body?: string | Buffer } = {}, status?: number): Promise<Reply> {
  const reply = await send(method, path, await admin(), options);
  if (status !== undefined) expect(reply.status, `${method} ${path}: ${reply.text()}`).toBe(status);
  return reply;
}

/** `{path}{suffix}`, an extension's suffix (`/attrs`) addressed as the stream's family does it (`?ext=attrs` in /v1/stream). */
const withSuffix = (path: string, suffix: string) => (suffix.startsWith('/') ? extensionUrl(path, suffix.slice(1)) : `${path}${suffix}`);

/** A stream with two appends (abc, def), a snapshot at 3 and a title. */
async function prepareStream(path: string): Promise<void> {
  await asAdmin('PUT', path, { headers: TEXT, body: 'abc' }, 201);
  await asAdmin('POST', path, { headers: TEXT, body: 'def' }, 204);
  await asAdmin('PUT', extensionUrl(path, `snapshot/${SNAP_AT}`), { headers: JSON_TYPE, body: '{"n":1}' }, 204);
}

/** What an admin sees of a stream: everything a refused request could have changed. */
async function streamState(path: string): Promise<unknown> {
  const head = await asAdmin('HEAD', path);
  const read = await asAdmin('GET', `${path}?offset=-1`);
  const attrs = await asAdmin('GET', extensionUrl(path, 'attrs'));
  const snapshot = await asAdmin('GET', extensionUrl(path, 'snapshot'));
  const pick = (r: Reply, names: string[]) => Object.fromEntries(names.map((n) => [n, r.headers[n]]));
  return {
    head: [head.status, pick(head, ['stream-next-offset', 'stream-closed', 'stream-incarnation', 'stream-earliest-offset'])],
    read: [read.status, read.text()],
    attrs: [attrs.status, attrs.text()],
    snapshot: [snapshot.status, snapshot.headers['location']],
  };
}

async function bucketState(bucket: string): Promise<unknown> {
  const info = await asAdmin('GET', `/${bucket}`);
  const listing = await asAdmin('GET', `/${bucket}/streams`);
  return [info.status, info.status === 200 ? (info.json() as { streamCount: number }).streamCount : null, listing.text()];
}

function expectedFor(row: Row, who: Who, bucketRoute: boolean): Expected {
  if (who === 'none' || who === 'wrong bucket') return row.hidden;
  if (who === 'wrong prefix') {
    if (!bucketRoute) return row.hidden;
    // A prefix grant sees into the bucket: its listing (filtered), nothing of the whole bucket.
    return row.row?.startsWith('bucket-streams') ? { status: row.allowed } : { status: 403, code: 'FORBIDDEN' };
  }
  if (row.row === null) return { status: row.allowed };
  return RANK[who] >= RANK[row.need] ? { status: row.allowed } : { status: 403, code: 'FORBIDDEN' };
}

function checkAnswer(reply: Reply, expected: Expected, what: string): void {
  expect(reply.status, `${what}: ${reply.text()}`).toBe(expected.status);
  if (expected.frameCode !== undefined) expect((reply.json() as Array<{ code: string }>).map((f) => f.code), what).toEqual([expected.frameCode]);
  if (expected.code !== undefined && reply.body.length > 0) expect((reply.json() as { code: string }).code, what).toBe(expected.code);
  if (expected.status === 404 && reply.body.length > 0) expect(reply.headers['content-type'], what).toBe('application/json');
}

describe('the permission table', () => {
  it('covers every route of ROUTE_PERMISSIONS', () => {
    const tested = new Set([...STREAM_ROWS, ...BUCKET_ROWS].map((r) => r.row).filter((r): r is string => r !== null));
    const untested = Object.keys(ROUTE_PERMISSIONS).filter((row) => !tested.has(row) && !NOT_ROUTED.has(row));
    expect(untested).toEqual([]);
    for (const r of [...STREAM_ROWS, ...BUCKET_ROWS]) if (r.row !== null) expect(ROUTE_PERMISSIONS[r.row], r.row).toBe(r.need);
  });

  for (const family of ['bucket', 'v1'] as const) {
    it(`stream routes, ${family === 'bucket' ? '/{bucket}/{stream}' : '/v1/stream/{name}'}: status, code, and nothing applied when refused`, async () => {
      await asAdmin('PUT', `/${BUCKET}`);
      await asAdmin('PUT', `/${OTHER}`);
      const grantBucket = family === 'bucket' ? BUCKET : 'v1';
      const base = family === 'bucket' ? `/${BUCKET}/` : '/v1/stream/';
      for (const row of STREAM_ROWS) {
        await Promise.all(
          WHO.map(async (who) => {
            const path = `${base}${fresh('ok-')}`;
            if (!row.fresh) await prepareStream(path);
            const before = await streamState(path);
            const what = `${row.method} ${base}{s}${row.suffix} as ${who}`;
            const reply = await send(row.method, withSuffix(path, row.suffix), await tokenFor(grantsOf(who, grantBucket)), row);
            const expected = expectedFor(row, who, false);
            checkAnswer(reply, expected, what);
            if (expected.status >= 400 || expected.frameCode) expect(await streamState(path), `${what} changed the stream`).toEqual(before);
          }),
        );
      }
    });
  }

  it('bucket routes: status, code, and nothing applied when refused', async () => {
    await asAdmin('PUT', `/${BUCKET}`);
    await asAdmin('PUT', `/${BUCKET}/ok-listed`, { headers: TEXT });
    for (const row of BUCKET_ROWS) {
      await Promise.all(
        WHO.map(async (who) => {
          const bucket = row.target === 'shared' ? BUCKET : fresh(row.target === 'fresh' ? 'pnew' : 'pdel');
          if (row.target === 'empty') await asAdmin('PUT', `/${bucket}`, {}, 201);
          const before = await bucketState(bucket);
          const what = `${row.method} /{bucket}${row.suffix} (${row.target}) as ${who}`;
          const reply = await send(row.method, `/${bucket}${row.suffix}`, await tokenFor(grantsOf(who, bucket)), row);
          const expected = expectedFor(row, who, true);
          checkAnswer(reply, expected, what);
          if (expected.status >= 400) expect(await bucketState(bucket), `${what} changed the bucket`).toEqual(before);
        }),
      );
    }
  });
});

describe('revocation', () => {
  const REVOKED = 'prev';
  const grants: GrantSpec[] = [{ bucket: REVOKED, can: ['read'] }];
  const read = (token: string) => call(env.url, 'GET', `/${REVOKED}`, { headers: bearer(token) });
  const revoke = (token: string, body: unknown) => call(env.url, 'POST', '/v1/auth/revocations', { headers: { ...bearer(token), ...JSON_TYPE }, body: JSON.stringify(body) });
  const expectRevoked = (reply: Reply) => {
    expect(reply.status, reply.text()).toBe(401);
    expect((reply.json() as { code: string }).code).toBe('TOKEN_REVOKED');
    expect(reply.headers['www-authenticate']).toMatch(/error="invalid_token"/);
  };

  it('refuses a token by jti, or every token of a subject, until the time given; only admin on * revokes, with limits on what is asked', async () => {
    const nowMs = Math.floor(Date.now() / 1000) * 1000;
    env.clock.stopAt(nowMs);
    const admin = await env.token([{ bucket: '*', can: ['admin'] }], { subject: 'root' });
    await asAdmin('PUT', `/${REVOKED}`);
    const first = await env.token(grants, { subject: 'alice', jti: 'jti-1' });
    const second = await env.token(grants, { subject: 'alice', jti: 'jti-2' });
    const bob = await env.token(grants, { subject: 'bob', jti: 'jti-3' });
    expect((await read(first)).status).toBe(200);
    // Admin on one bucket is not enough: revocation spans every bucket's tokens.
    expect((await revoke(await env.token([{ bucket: REVOKED, can: ['admin'] }]), { jti: 'jti-1' })).status).toBe(403);
    expect((await revoke(first, { jti: 'jti-1' })).status).toBe(403);
    const byJti = await revoke(admin, { jti: 'jti-1' });
    expect(byJti.status, byJti.text()).toBe(201);
    // Without until: the server's max TTL from now, longer than any token it accepts can live.
    expect(byJti.json()).toEqual({ jti: 'jti-1', until: new Date(nowMs + 86_400_000).toISOString() });
    expectRevoked(await read(first));
    expect((await read(second)).status).toBe(200);
    const until = new Date(nowMs + 60_000).toISOString();
    expect((await revoke(admin, { sub: 'alice', until })).json()).toEqual({ sub: 'alice', until });
    expectRevoked(await read(second));
    expect((await read(bob)).status).toBe(200);
    const listed = await call(env.url, 'GET', '/v1/auth/revocations', { headers: bearer(admin) });
    expect(listed.json()).toEqual({ revocations: [byJti.json(), { sub: 'alice', until }] });
    for (const bad of [{}, { jti: 'a', sub: 'b' }, { jti: '' }, { jti: 'x'.repeat(257) }, { sub: 'a', until: new Date(nowMs - 1).toISOString() }, { sub: 'a', until: '2999-01-01T00:00:00Z' }, { sub: 'a', until: 'soon' }, null]) {
      expect((await revoke(admin, bad)).status, JSON.stringify(bad)).toBe(400);
    }
    env.clock.stopAt(nowMs + 60_000);
    expect((await read(second)).status).toBe(200);
    expectRevoked(await read(first));
    env.clock.reset();
  });

  it("is kept in the store: another node's list, re-read once its interval has passed, refuses the token too", async () => {
    const nowMs = env.clock.now();
    const otherNode = new Revocations(env.rill.store, 5_000);
    await otherNode.refresh(nowMs);
    const token = { jti: 'jti-node', subject: 'carol' };
    expect(otherNode.refusal(token, nowMs)).toBeNull();
    const admin = await env.token([{ bucket: '*', can: ['admin'] }]);
    expect((await revoke(admin, { jti: 'jti-node' })).status).toBe(201);
    // Not yet re-read: the other node still accepts it, for at most its interval.
    expect(otherNode.stale(nowMs + 4_999)).toBe(false);
    expect(otherNode.stale(nowMs + 5_000)).toBe(true);
    await otherNode.refresh(nowMs + 5_000);
    expect(otherNode.refusal(token, nowMs + 5_000)?.code).toBe('TOKEN_REVOKED');
  });

  it('rill revoke and rill revocations ask the server', async () => {
    const admin = await env.token([{ bucket: '*', can: ['admin'] }]);
    const revoked = await runCli(env.url, ['--token', admin, 'revoke', '--sub', 'dave', '--until', '2h']);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.stdout).toMatch(/^revoked subject dave until \d{4}-/);
    const listed = await runCli(env.url, ['--token', admin, '--json', 'revocations']);
    expect(listed.stdout).toContain('"sub":"dave"');
    const both = await runCli(env.url, ['--token', admin, 'revoke', '--sub', 'dave', '--jti', 'x']);
    expect(both.code).not.toBe(0);
    expectRevoked(await read(await env.token(grants, { subject: 'dave' })));
  });
});
