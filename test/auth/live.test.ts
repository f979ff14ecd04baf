/**
 * Tokens over time and use: a live tail ends when its token expires (SSE with a final
 * control event, long-poll with 401), a client whose token function refreshes keeps
 * tailing, quotas per subject refuse with 429 and apply nothing, and the official
 * Durable Streams client works with the token in a header.
 */
import { DurableStream, stream as officialStream } from '@durable-streams/client';
import { request } from 'node:http';
import { beforeAll, describe, expect, it } from 'vitest';
import { RillClient } from '../../src/client/index.js';
import { call } from '../http/client.js';
import { bearer, useAuthServer } from './setup.js';

const env = useAuthServer({ auth: { quotas: { appendsPerSecond: 5, createsPerSecond: 0, bytesPerSecond: 1000, liveConnections: 2 } } });
const TEXT = { 'content-type': 'text/plain' };
const BUCKET = 'live';
let admin: string;

/** A token for the bucket that expires `inMs` from the server's now (its exp is whole seconds: the clock is set to fit). */
async function expiringIn(inMs: number, subject: string): Promise<string> {
  const expSeconds = Math.floor(Date.now() / 1000) + 1000;
  env.clock.setTo(expSeconds * 1000 - inMs);
  return env.token([{ bucket: BUCKET, can: ['write'] }], { subject, ttlMs: expSeconds * 1000 - env.clock.now(), nowMs: env.clock.now() });
}

/** When a token expires (its exp claim), in ms. */
function expiryOf(token: string): number {
  return (JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as { exp: number }).exp * 1000;
}

/** Far past any token expiry here: an answer still open then was not ended by its token. */
const OPEN_LIMIT_MS = 20_000;

/** The whole body of a GET, however long it stays open (until OPEN_LIMIT_MS). */
function getAll(path: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(env.url);
  return new Promise((resolve, reject) => {
    request({ host: hostname, port, path, headers, signal: AbortSignal.timeout(OPEN_LIMIT_MS) }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
      res.on('error', reject);
    })
      .on('error', reject)
      .end();
  });
}

beforeAll(async () => {
  env.clock.reset();
  admin = await env.token([{ bucket: '*', can: ['admin'] }], { subject: 'admin' });
  expect((await call(env.url, 'PUT', `/${BUCKET}`, { headers: bearer(admin) })).status).toBe(201);
});

describe('live reads and token expiry', () => {
  it('ends an SSE tail with a control event saying the token expired', async () => {
    const path = `/${BUCKET}/sse-expiry`;
    expect((await call(env.url, 'PUT', path, { headers: { ...bearer(admin), ...TEXT }, body: 'one' })).status).toBe(201);
    const token = await expiringIn(400, 'sse');
    const answer = await getAll(`${path}?offset=-1&live=sse`, bearer(token));
    env.clock.reset();
    expect(answer.status).toBe(200);
    const events = answer.body.trim().split('\n\n');
    expect(events[0]).toBe('event: data\ndata:one');
    expect(events.at(-1)).toBe('event: control\ndata:{"streamNextOffset":"00000000000000000003","tokenExpired":true}');
  });

  it('answers a long-poll 401 when its token expires during the wait', async () => {
    const path = `/${BUCKET}/lp-expiry`;
    expect((await call(env.url, 'PUT', path, { headers: { ...bearer(admin), ...TEXT } })).status).toBe(201);
    const token = await expiringIn(300, 'lp');
    const reply = await call(env.url, 'GET', `${path}?offset=now&live=long-poll&timeout_ms=20000`, { headers: bearer(token) });
    env.clock.reset();
    expect(reply.status).toBe(401);
    expect(reply.headers['www-authenticate']).toMatch(/^Bearer/);
    expect((reply.json() as { code: string }).code).toBe('TOKEN_EXPIRED');
  });

  it('a client whose token function returns fresh tokens keeps tailing across expiries', async () => {
    const path = `${BUCKET}/refresh`;
    expect((await call(env.url, 'PUT', `/${path}`, { headers: { ...bearer(admin), ...TEXT } })).status).toBe(201);
    let minted = 0;
    let refreshed = () => {};
    /** A token asked for once the first one has expired: the tail outlived it. */
    const afterFirstExpiry = new Promise<void>((resolve) => (refreshed = resolve));
    let firstExpiresAtMs = Infinity;
    // Each token lives until the end of the next second of the server's clock: at most 2 s.
    const token = async () => {
      minted++;
      const minting = env.clock.now();
      if (minting >= firstExpiresAtMs) refreshed();
      const fresh = await env.token([{ bucket: BUCKET, can: ['read'] }], { subject: 'refresh', ttlMs: 1000 });
      firstExpiresAtMs = Math.min(firstExpiresAtMs, expiryOf(fresh));
      return fresh;
    };
    const client = new RillClient({ url: env.url, token });
    const controller = new AbortController();
    const seen: string[] = [];
    const reading = (async () => {
      for await (const batch of client.stream(path).read({ live: 'sse', signal: controller.signal })) {
        if (batch.data.length > 0) seen.push(new TextDecoder().decode(batch.data));
        if (seen.join('').length >= 8) return;
      }
    })();
    // Four appends before the first token expires and four after, each four by a writer of its own (the quota is 5/s a subject).
    const writers = await Promise.all(['before', 'after'].map((when) => env.token([{ bucket: BUCKET, can: ['write'] }], { subject: `refresh-${when}` })));
    const append = async (i: number) => expect((await call(env.url, 'POST', `/${path}`, { headers: { ...bearer(writers[i >> 2]!), ...TEXT }, body: String(i) })).status).toBe(204);
    for (let i = 0; i < 4; i++) await append(i);
    // The first token expires under the tail (its SSE ends saying so); the client asks for another.
    await afterFirstExpiry;
    for (let i = 4; i < 8; i++) await append(i);
    await reading;
    controller.abort();
    expect(seen.join('')).toBe('01234567');
    expect(minted).toBeGreaterThanOrEqual(2);
  });

  it('a long-poll with an expired token is sent again with the fresh one from the function', async () => {
    const path = `${BUCKET}/lp-refresh`;
    expect((await call(env.url, 'PUT', `/${path}`, { headers: { ...bearer(admin), ...TEXT }, body: 'hi' })).status).toBe(201);
    const stale = await env.token([{ bucket: BUCKET, can: ['read'] }], { subject: 'lp2', ttlMs: 1000, nowMs: env.clock.now() - 10_000 });
    const tokens = [stale, await env.token([{ bucket: BUCKET, can: ['read'] }], { subject: 'lp2' })];
    const client = new RillClient({ url: env.url, token: () => tokens.shift() ?? '' });
    const batches = [];
    for await (const batch of client.stream(path).read({ live: false })) batches.push(batch);
    expect(new TextDecoder().decode(batches[0]!.data)).toBe('hi');
    expect(tokens).toEqual([]);
  });
});

describe('quotas per subject', () => {
  it('refuses a writer over its append rate with 429 and Retry-After, applies nothing, and leaves another subject alone', async () => {
    const path = `/${BUCKET}/quota`;
    expect((await call(env.url, 'PUT', path, { headers: { ...bearer(admin), ...TEXT } })).status).toBe(201);
    const fast = await env.token([{ bucket: BUCKET, can: ['write'] }], { subject: 'fast' });
    const calm = await env.token([{ bucket: BUCKET, can: ['write'] }], { subject: 'calm' });
    env.clock.stopAt(Date.now());
    const append = (token: string, body: string) => call(env.url, 'POST', path, { headers: { ...bearer(token), ...TEXT }, body });
    for (let i = 0; i < 5; i++) expect((await append(fast, 'f')).status).toBe(204);
    const refused = await append(fast, 'X');
    expect(refused.status).toBe(429);
    expect((refused.json() as { code: string }).code).toBe('RATE_LIMITED');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect((await append(calm, 'c')).status).toBe(204);
    // A fifth of a second later, one more append fits.
    env.clock.stopAt(env.clock.now() + 200);
    expect((await append(fast, 'g')).status).toBe(204);
    env.clock.reset();
    expect((await call(env.url, 'GET', `${path}?offset=-1`, { headers: bearer(admin) })).text()).toBe('fffffcg');
  });

  it('refuses bytes over the rate (and a body without Content-Length) and live readers over the limit', async () => {
    const path = `/${BUCKET}/quota-bytes`;
    expect((await call(env.url, 'PUT', path, { headers: { ...bearer(admin), ...TEXT } })).status).toBe(201);
    const writer = await env.token([{ bucket: BUCKET, can: ['write'] }], { subject: 'bytes' });
    env.clock.stopAt(Date.now());
    const append = (body: string) => call(env.url, 'POST', path, { headers: { ...bearer(writer), ...TEXT }, body });
    expect((await append('a'.repeat(600))).status).toBe(204);
    expect((await append('b'.repeat(600))).status).toBe(429);
    const chunked = await call(env.url, 'POST', path, { headers: { ...bearer(writer), ...TEXT, 'transfer-encoding': 'chunked' } });
    expect(chunked.status).toBe(411);
    env.clock.reset();
    expect((await call(env.url, 'HEAD', path, { headers: bearer(admin) })).headers['stream-next-offset']).toBe('00000000000000000600');

    const reader = await env.token([{ bucket: BUCKET, can: ['read'] }], { subject: 'watcher' });
    const controller = new AbortController();
    const open = () => fetch(`${env.url}${path}?offset=now&live=sse`, { headers: bearer(reader), signal: controller.signal });
    const held = [await open(), await open()];
    expect(held.map((r) => r.status)).toEqual([200, 200]);
    const third = await open();
    expect(third.status).toBe(429);
    const other = await fetch(`${env.url}${path}?offset=now&live=sse`, { headers: bearer(admin), signal: controller.signal });
    expect(other.status).toBe(200);
    controller.abort();
  });

  it('counts a live reader whatever the encoding of its query, as the read handler decodes it', async () => {
    const path = `/${BUCKET}/quota-encoded`;
    expect((await call(env.url, 'PUT', path, { headers: { ...bearer(admin), ...TEXT } })).status).toBe(201);
    const reader = await env.token([{ bucket: BUCKET, can: ['read'] }], { subject: 'encoded-watcher' });
    const controller = new AbortController();
    const open = (query: string, headers = bearer(reader)) => fetch(`${env.url}${path}?${query}`, { headers, signal: controller.signal });
    // `%6Cive` is `live`, and a token in the query whose name is encoded is the same reader's.
    const held = [await open('offset=now&%6Cive=sse'), await open(`offset=now&live=sse&%74oken=${reader}`, {})];
    expect(held.map((r) => r.status)).toEqual([200, 200]);
    expect(held[0]!.headers.get('content-type')).toBe('text/event-stream');
    const third = await open('offset=now&l%69ve=long-poll');
    expect(third.status).toBe(429);
    controller.abort();
  });
});

describe('the official client', () => {
  it('creates, appends and reads with the token in a header', async () => {
    const url = `${env.url}/${BUCKET}/official`;
    const headers = bearer(admin);
    const handle = await DurableStream.create({ url, contentType: 'application/json', headers });
    await handle.append(JSON.stringify({ n: 1 }));
    const session = await officialStream<{ n: number }>({ url, live: false, headers });
    expect(await session.json()).toEqual([{ n: 1 }]);
    await expect(DurableStream.create({ url: `${env.url}/${BUCKET}/official-2`, contentType: 'application/json' })).rejects.toThrow();
  });
});
