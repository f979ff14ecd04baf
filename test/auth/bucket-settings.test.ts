/**
 * Bucket settings (PATCH /{bucket}, admin on `*` only): a public bucket's streams are read
 * without a token while everything else still needs one, and a bucket's own limits replace
 * the server-wide ones. A real server over HTTP with auth on, on SQLite, restarted once.
 */
import { join } from 'node:path';
import { pino } from 'pino';
import { beforeAll, describe, expect, it } from 'vitest';
import { createRillServer } from '../../src/http/server.js';
import { AUTH_OFF } from '../../src/http/settings.js';
import { call, expectRefusal } from '../http/client.js';
import { until } from '../helpers/waits.js';
import { bearer, useAdminHeaders, useAuthServer } from './setup.js';

const SERVER_MAX_STREAMS = 5;
const env = useAuthServer({ bucketLimits: { maxStreams: SERVER_MAX_STREAMS, maxSubscriptions: 0, maxBytes: 0 } });
const TEXT = { 'content-type': 'text/plain' };
const JSON_BODY = { 'content-type': 'application/json' };
const admin = useAdminHeaders(env);
let bucketAdmin: Record<string, string>;

beforeAll(async () => {
  bucketAdmin = bearer(await env.token([{ bucket: 'open', can: ['admin'] }, { bucket: 'tight', can: ['admin'] }], { subject: 'tenant' }));
});

const patch = (bucket: string, body: unknown, headers = admin) =>
  call(env.url, 'PATCH', `/${bucket}`, { headers: { ...headers, ...JSON_BODY }, body: typeof body === 'string' ? body : JSON.stringify(body) });

async function bucketWith(id: string, streams: Record<string, string>): Promise<void> {
  expect((await call(env.url, 'PUT', `/${id}`, { headers: admin })).status).toBe(201);
  for (const [name, data] of Object.entries(streams)) {
    expect((await call(env.url, 'PUT', `/${id}/${name}`, { headers: { ...admin, ...TEXT }, body: data })).status).toBe(201);
  }
}

describe('public read', () => {
  beforeAll(async () => {
    await bucketWith('open', { news: 'hello' });
    await bucketWith('closed', { news: 'secret' });
    const made = await patch('open', { publicRead: true });
    expect(made.status).toBe(200);
    expect(made.json()).toMatchObject({ id: 'open', publicRead: true });
  });

  it('answers an anonymous read of a public bucket\'s stream with its bytes, HEAD too', async () => {
    const read = await call(env.url, 'GET', '/open/news?offset=-1');
    expect(read.status, read.text()).toBe(200);
    expect(read.text()).toBe('hello');
    expect((await call(env.url, 'HEAD', '/open/news')).status).toBe(200);
    // Live reads too: a long-poll at the tail answers once an append arrives.
    const polled = call(env.url, 'GET', '/open/news?offset=now&live=long-poll');
    await until(async () => ((await call(env.url, 'GET', '/open/news/stats', { headers: admin })).json() as { liveReaders: number }).liveReaders === 1, 'the anonymous long-poll to be held');
    expect((await call(env.url, 'POST', '/open/news', { headers: { ...admin, ...TEXT }, body: '!' })).status).toBe(204);
    const woke = await polled;
    expect(woke.status, woke.text()).toBe(200);
    expect(woke.text()).toBe('!');
    // A stream the public bucket does not hold is missing, as it is to any reader.
    expectRefusal(await call(env.url, 'GET', '/open/nothing'), 'STREAM_NOT_FOUND');
  });

  it('refuses anonymous writes, creates, deletes, listings and subscriptions with 401', async () => {
    for (const [method, path] of [
      ['POST', '/open/news'],
      ['PUT', '/open/other'],
      ['DELETE', '/open/news'],
      ['GET', '/open/streams'],
      ['GET', '/open'],
      ['GET', '/open/__ds/subscriptions'],
      ['PATCH', '/open'],
      ['DELETE', '/open'],
    ] as const) {
      const reply = await call(env.url, method, path, { headers: TEXT, body: method === 'GET' || method === 'DELETE' ? undefined : 'x' });
      expect(reply.status, `${method} ${path}: ${reply.text()}`).toBe(401);
    }
    expect((await call(env.url, 'GET', '/open/news?offset=-1')).text()).toBe('hello!');
  });

  it('still answers 401 to anonymous reads of a bucket that is not public, or does not exist', async () => {
    for (const path of ['/closed/news', '/closed/nothing', '/nowhere/news', '/v1/stream/news']) {
      const reply = await call(env.url, 'GET', path);
      expect(reply.status, path).toBe(401);
      expectRefusal(reply, 'UNAUTHORIZED');
    }
  });

  it('refuses a bad token on a public bucket instead of reading anonymously', async () => {
    const forged = bearer(`${await env.token([{ bucket: 'open', can: ['read'] }])}x`);
    expect((await call(env.url, 'GET', '/open/news', { headers: forged })).status).toBe(401);
    expect((await call(env.url, 'GET', '/open/news', { headers: { authorization: 'Basic abc' } })).status).toBe(401);
    expect((await call(env.url, 'GET', '/open/news?token=nonsense')).status).toBe(401);
  });

  it('keeps concealment for tokens: a reader of another bucket sees the public one as any token sees it', async () => {
    const other = bearer(await env.token([{ bucket: 'closed', can: ['read'] }]));
    // Tokens are judged by their grants alone: public read is for requests without one.
    expectRefusal(await call(env.url, 'GET', '/open/news', { headers: other }), 'STREAM_NOT_FOUND');
    expectRefusal(await call(env.url, 'GET', '/open/nothing', { headers: other }), 'STREAM_NOT_FOUND');
  });

  it('stops answering anonymously once an admin makes the bucket private again', async () => {
    expect((await patch('open', { publicRead: false })).json()).toMatchObject({ publicRead: false });
    expect((await call(env.url, 'GET', '/open/news')).status).toBe(401);
    expect((await patch('open', { publicRead: true })).status).toBe(200);
    expect((await call(env.url, 'GET', '/open/news?offset=-1')).text()).toBe('hello!');
  });
});

describe('who may change settings, and what a body may say', () => {
  it('lets only admin on * change settings: a bucket admin gets 403, a reader of the bucket too', async () => {
    expectRefusal(await patch('open', { limits: { maxStreams: 1000 } }, bucketAdmin), 'FORBIDDEN');
    const reader = bearer(await env.token([{ bucket: 'open', can: ['read'] }]));
    expectRefusal(await patch('open', { publicRead: false }, reader), 'FORBIDDEN');
    expect((await call(env.url, 'GET', '/open', { headers: admin })).json()).toMatchObject({ publicRead: true, overrides: { maxStreams: null } });
  });

  it('answers 400 to a body that is not exactly the settings', async () => {
    const bodies: Array<[unknown, string]> = [
      [{ public_read: true }, 'INVALID_BUCKET_SETTINGS'],
      [{ publicRead: 'yes' }, 'INVALID_BUCKET_SETTINGS'],
      [{ limits: { maxStreams: -1 } }, 'INVALID_BUCKET_SETTINGS'],
      [{ limits: { maxStreams: 1.5 } }, 'INVALID_BUCKET_SETTINGS'],
      [{ limits: { maxStreams: '3' } }, 'INVALID_BUCKET_SETTINGS'],
      [{ limits: { maxStream: 3 } }, 'INVALID_BUCKET_SETTINGS'],
      [{ limits: [] }, 'INVALID_BUCKET_SETTINGS'],
      [[], 'INVALID_BUCKET_SETTINGS'],
      ['{"publicRead": tru', 'INVALID_JSON'],
    ];
    for (const [body, code] of bodies) {
      const reply = await patch('open', body);
      expect(reply.status, JSON.stringify(body)).toBe(400);
      expectRefusal(reply, code as 'INVALID_BUCKET_SETTINGS');
    }
    expectRefusal(await patch('nowhere', { publicRead: true }), 'BUCKET_NOT_FOUND');
  });
});

describe('per-bucket limits', () => {
  it('refuses the (n+1)th stream with BUCKET_STREAM_LIMIT where the server-wide limit would allow it, and GET shows the limits in force', async () => {
    await bucketWith('tight', {});
    expect((await call(env.url, 'GET', '/tight', { headers: admin })).json()).toMatchObject({ limits: { maxStreams: SERVER_MAX_STREAMS, maxSubscriptions: null } });
    const changed = await patch('tight', { limits: { maxStreams: 2, maxSubscriptions: 7 } });
    expect(changed.json()).toMatchObject({ limits: { maxStreams: 2, maxSubscriptions: 7 }, overrides: { maxStreams: 2, maxSubscriptions: 7 } });
    const put = (name: string) => call(env.url, 'PUT', `/tight/${name}`, { headers: { ...bucketAdmin, ...TEXT } });
    expect((await put('a')).status).toBe(201);
    expect((await put('b')).status).toBe(201);
    expectRefusal(await put('c'), 'BUCKET_STREAM_LIMIT');
    const view = (await call(env.url, 'GET', '/tight', { headers: bucketAdmin })).json();
    expect(view).toMatchObject({ streamCount: 2, limits: { maxStreams: 2, maxSubscriptions: 7 } });
    // null gives the bucket the server-wide limit back; 0 would lift it.
    expect((await patch('tight', { limits: { maxStreams: null } })).json()).toMatchObject({ limits: { maxStreams: SERVER_MAX_STREAMS } });
    expect((await put('c')).status).toBe(201);
    expect((await patch('tight', { limits: { maxStreams: 0 } })).json()).toMatchObject({ limits: { maxStreams: null }, overrides: { maxStreams: 0 } });
    for (const name of ['d', 'e', 'f']) expect((await put(name)).status).toBe(201);
    await patch('tight', { limits: { maxStreams: 2 } });
  });

  it('keeps settings across a restart', async () => {
    await env.rill.close();
    const auth = { ...AUTH_OFF, secretFile: env.secretFile, keysCheckMs: 0 };
    env.rill = createRillServer({
      settings: { drainTimeoutMs: 500, bucketLimits: { maxStreams: SERVER_MAX_STREAMS, maxSubscriptions: 0, maxBytes: 0 }, auth, port: 0, dataDir: join(env.dir, 'data'), store: 'sqlite' },
      logger: pino({ level: 'silent' }),
      now: env.clock.now,
    });
    await env.rill.listen();
    env.url = env.rill.url();
    expect((await call(env.url, 'GET', '/open/news?offset=-1')).text()).toBe('hello!');
    expect((await call(env.url, 'GET', '/tight', { headers: admin })).json()).toMatchObject({ limits: { maxStreams: 2 }, overrides: { maxStreams: 2, maxSubscriptions: 7 } });
    expectRefusal(await call(env.url, 'PUT', '/tight/g', { headers: { ...admin, ...TEXT } }), 'BUCKET_STREAM_LIMIT');
    expect((await call(env.url, 'GET', '/closed/news')).status).toBe(401);
  });
});
