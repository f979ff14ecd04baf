/**
 * Subscriptions with access control on: every subscription row of ROUTE_PERMISSIONS
 * against tokens with each permission on the bucket, none, another bucket's, and a prefix
 * grant (a subscription spans a bucket's streams, so a prefix does not reach it). The JWK
 * Set is public, and a pull-wake worker's ack and release carry the wake token alone.
 */
import { describe, expect, it } from 'vitest';
import { PERMISSIONS, type Permission } from '../../src/core/access.js';
import { ROUTE_PERMISSIONS } from '../../src/http/access.js';
import { DEFAULT_SUBSCRIPTION_SETTINGS } from '../../src/http/settings.js';
import { call, type Reply } from '../http/client.js';
import { eventually, startReceiver } from '../helpers/webhooks.js';
import { bearer, useAuthServer, type GrantSpec } from './setup.js';

// Webhooks to the test's receiver on 127.0.0.1.
const env = useAuthServer({ subscriptions: { ...DEFAULT_SUBSCRIPTION_SETTINGS, allowLocalhost: true } });
const JSON_TYPE = { 'content-type': 'application/json' };
const RANK: Record<Permission, number> = { read: 1, write: 2, manage: 3, admin: 4 };
type Who = 'none' | Permission | 'wrong bucket' | 'prefix';
const WHO: Who[] = ['none', ...PERMISSIONS, 'wrong bucket', 'prefix'];

interface Row {
  row: string;
  method: string;
  /** Under `{root}/__ds/subscriptions`; `{id}` is the test's subscription. */
  suffix: string;
  body?: unknown;
  allowed: number;
}

const ROWS: Row[] = [
  { row: 'subscription PUT', method: 'PUT', suffix: '/{fresh}', body: { type: 'pull-wake', streams: ['s'], wake_stream: 'wake' }, allowed: 201 },
  { row: 'subscription GET', method: 'GET', suffix: '/{id}', allowed: 200 },
  { row: 'subscription HEAD', method: 'HEAD', suffix: '/{id}', allowed: 200 },
  { row: 'subscription DELETE', method: 'DELETE', suffix: '/{fresh}', allowed: 204 },
  { row: 'subscription-list GET', method: 'GET', suffix: '', allowed: 200 },
  { row: 'subscription-list HEAD', method: 'HEAD', suffix: '', allowed: 200 },
  { row: 'subscription-streams POST', method: 'POST', suffix: '/{id}/streams', body: { streams: ['t'] }, allowed: 204 },
  { row: 'subscription-stream DELETE', method: 'DELETE', suffix: '/{id}/streams/t', allowed: 204 },
  { row: 'subscription-claim POST', method: 'POST', suffix: '/{id}/claim', body: { worker: 'w' }, allowed: 409 },
];

function grantsOf(who: Who, bucket: string): GrantSpec[] {
  if (who === 'none') return [];
  if (who === 'wrong bucket') return [{ bucket: bucket === 'v1' ? 'subsother' : 'v1', can: ['admin'] }];
  if (who === 'prefix') return [{ bucket, can: ['admin'], prefix: 's' }];
  return [{ bucket, can: [who] }];
}

/** What a token gets: the allowed answer, 403 below the row's permission, or the answer of a scope that does not exist. */
function expected(row: Row, who: Who): number | 'hidden' {
  const need = ROUTE_PERMISSIONS[row.row]!;
  if (who === 'none' || who === 'wrong bucket') return 'hidden';
  if (who === 'prefix') return 403;
  return RANK[who] >= RANK[need] ? row.allowed : 403;
}

let n = 0;
const send = (method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<Reply> =>
  call(env.url, method, path, { headers: { ...JSON_TYPE, ...headers }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });

describe('subscriptions under access control', () => {
  it('covers every subscription row of ROUTE_PERMISSIONS', () => {
    const rows = Object.keys(ROUTE_PERMISSIONS).filter((r) => r.startsWith('subscription'));
    expect(rows.sort()).toEqual([...ROWS.map((r) => r.row), 'subscription-rotate-key POST'].sort());
  });

  for (const family of ['v1', 'bucket'] as const) {
    it(`${family === 'v1' ? '/v1/stream/__ds' : '/{bucket}/__ds'}: each permission gets its answer; the rest are refused or see nothing`, async () => {
      const admin = bearer(await env.token([{ bucket: '*', can: ['admin'] }]));
      const bucket = family === 'v1' ? 'v1' : 'subsperm';
      const root = family === 'v1' ? '/v1/stream' : '/subsperm';
      if (family === 'bucket') expect((await send('PUT', '/subsperm', admin)).status).toBe(201);
      // The subscriptions' wake stream must exist.
      expect((await send('PUT', `${root}/wake`, admin, [])).status).toBe(201);
      for (const row of ROWS) {
        for (const who of WHO) {
          const id = `p-${++n}`;
          expect((await send('PUT', `${root}/__ds/subscriptions/${id}`, admin, { type: 'pull-wake', streams: ['s'], wake_stream: 'wake' })).status).toBe(201);
          const path = `${root}/__ds/subscriptions${row.suffix.replace('{id}', id).replace('{fresh}', row.method === 'PUT' ? `${id}-new` : id)}`;
          const token = bearer(await env.token(grantsOf(who, bucket)));
          const reply = await send(row.method, path, token, row.body);
          const want = expected(row, who);
          const what = `${row.method} ${path} as ${who}: ${reply.text()}`;
          if (want === 'hidden') {
            // As if the scope did not exist: nothing there to read, change or claim.
            expect([200, 204, 404], what).toContain(reply.status);
            if (row.method === 'GET' && row.suffix === '') expect((reply.json() as { subscriptions: unknown[] }).subscriptions, what).toEqual([]);
            expect((await send('GET', `${root}/__ds/subscriptions/${id}`, admin)).status, what).toBe(200);
          } else {
            expect(reply.status, what).toBe(want);
          }
          if (want === 403 && row.method !== 'HEAD') expect((reply.json() as { code: string }).code, what).toBe('FORBIDDEN');
        }
      }
    });
  }

  it('rotates the signing key only for admin on the whole server', async () => {
    expect(ROUTE_PERMISSIONS['subscription-rotate-key POST']).toBe('admin');
    const bucketAdmin = bearer(await env.token([{ bucket: 'v1', can: ['admin'] }]));
    const refused = await send('POST', '/v1/stream/__ds/jwks/rotate', bucketAdmin);
    expect([refused.status, (refused.json() as { code: string }).code]).toEqual([403, 'FORBIDDEN']);
    expect((await send('POST', '/v1/stream/__ds/jwks/rotate', {})).status).toBe(401);
    const rotated = await send('POST', '/v1/stream/__ds/jwks/rotate', bearer(await env.token([{ bucket: '*', can: ['admin'] }])));
    expect(rotated.status).toBe(200);
  });

  it('serves the JWK Set without a token, and takes a pull-wake ack and release on the wake token alone', async () => {
    expect((await send('GET', '/v1/stream/__ds/jwks.json', {})).status).toBe(200);
    const admin = bearer(await env.token([{ bucket: 'v1', can: ['admin'] }]));
    await send('PUT', '/v1/stream/wake-auth', admin);
    await send('PUT', '/v1/stream/__ds/subscriptions/tokened', admin, { type: 'pull-wake', streams: ['data-auth'], wake_stream: 'wake-auth' });
    await call(env.url, 'PUT', '/v1/stream/data-auth', { headers: { ...admin, 'content-type': 'text/plain' }, body: 'hello' });
    const claim = await send('POST', '/v1/stream/__ds/subscriptions/tokened/claim', bearer(await env.token([{ bucket: 'v1', can: ['write'] }])), { worker: 'w' });
    expect(claim.status).toBe(200);
    const wake = claim.json() as { wake_id: string; generation: number; token: string; streams: Array<{ path: string; tail_offset: string }> };
    expect((await send('POST', '/v1/stream/__ds/subscriptions/tokened/claim', {}, { worker: 'w' })).status).toBe(401);
    const ack = await send('POST', '/v1/stream/__ds/subscriptions/tokened/ack', bearer(wake.token), {
      wake_id: wake.wake_id,
      generation: wake.generation,
      acks: [{ stream: 'data-auth', offset: wake.streams[0]!.tail_offset }],
    });
    expect([ack.status, ack.text()]).toEqual([200, '{"ok":true,"next_wake":false}']);
    const withAccessToken = await send('POST', '/v1/stream/__ds/subscriptions/tokened/release', admin, { wake_id: wake.wake_id, generation: wake.generation });
    expect([withAccessToken.status, (withAccessToken.json() as { code: string }).code]).toEqual([401, 'TOKEN_INVALID']);
    expect((await send('POST', '/v1/stream/__ds/subscriptions/tokened/release', bearer(wake.token), { wake_id: wake.wake_id, generation: wake.generation })).status).toBe(204);
  });

  it("shows a read token a webhook's origin only and no delivery error; manage sees the URL and last_error", async () => {
    const receiver = await startReceiver();
    try {
      receiver.answer({ status: 503 });
      const manage = bearer(await env.token([{ bucket: 'v1', can: ['manage'] }]));
      const read = bearer(await env.token([{ bucket: 'v1', can: ['read'] }]));
      const url = `${receiver.url}?key=hook-secret`;
      expect((await send('PUT', '/v1/stream/__ds/subscriptions/hooked', manage, { type: 'webhook', streams: ['hooked-data'], webhook: { url } })).status).toBe(201);
      await call(env.url, 'PUT', '/v1/stream/hooked-data', { headers: { ...manage, 'content-type': 'text/plain' }, body: 'hello' });
      await receiver.next(1);
      type Answer = { webhook: { url: string; url_hidden?: boolean }; wake: { delivery: { attempts: number; last_error?: string } | null } | null };
      const asManager = async () => (await send('GET', '/v1/stream/__ds/subscriptions/hooked', manage)).json() as Answer;
      await eventually(async () => (await asManager()).wake?.delivery?.last_error !== undefined, 5_000, 'the failed delivery recorded');
      expect((await asManager()).webhook.url).toBe(url);
      expect((await asManager()).wake!.delivery!.last_error).toMatch(/503/);
      const seen = (await send('GET', '/v1/stream/__ds/subscriptions/hooked', read)).json() as Answer;
      const listed = ((await send('GET', '/v1/stream/__ds/subscriptions', read)).json() as { subscriptions: Array<Answer & { id: string }> }).subscriptions.find((x) => x.id === 'hooked')!;
      for (const answer of [seen, listed]) {
        expect(answer.webhook).toMatchObject({ url: new URL(receiver.url).origin, url_hidden: true });
        expect(JSON.stringify(answer)).not.toContain('hook-secret');
        expect(answer.wake!.delivery).not.toHaveProperty('last_error');
        expect(answer.wake!.delivery!.attempts).toBeGreaterThanOrEqual(1);
      }
    } finally {
      await receiver.close();
    }
  });
});
