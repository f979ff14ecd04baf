/**
 * Concealment: what a token cannot read, it cannot tell from what does not exist. For a
 * hidden stream (or bucket) and a missing one, every route answers the same status,
 * headers (apart from Date) and body; listings name only what the token reads; a fork
 * of a hidden source is refused as a fork of a missing one.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { call, type Reply } from '../http/client.js';
import { bearer, useAuthServer } from './setup.js';
import { extensionUrl } from '../../src/protocol/extensions.js';

const env = useAuthServer();
const TEXT = { 'content-type': 'text/plain' };
const JSON_TYPE = { 'content-type': 'application/json' };
const frame = Buffer.concat([Buffer.from([0, 0, 0, 1]), Buffer.from('z')]);
let admin: string;
/** Sees `cvis` and /v1 only under `pub-`, and all of `cgone`, a bucket that does not exist. */
let token: string;

const as = (who: string, method: string, path: string, options: { headers?: Record<string, string>; body?: string | Buffer } = {}) =>
  call(env.url, method, path, { ...options, headers: { ...bearer(who), ...options.headers } });

/** Every request a client can make of a stream, as a suffix, method and body. */
const STREAM_REQUESTS: Array<{ method: string; suffix: string; headers?: Record<string, string>; body?: string | Buffer }> = [
  { method: 'GET', suffix: '?offset=-1' },
  { method: 'GET', suffix: '?offset=-1&live=long-poll&timeout_ms=10' },
  { method: 'GET', suffix: '?offset=-1&live=sse' },
  { method: 'GET', suffix: '?offset=bad' },
  { method: 'HEAD', suffix: '' },
  { method: 'POST', suffix: '', headers: TEXT, body: 'x' },
  { method: 'POST', suffix: '', headers: { 'stream-closed': 'true' } },
  { method: 'DELETE', suffix: '' },
  { method: 'PATCH', suffix: '' },
  { method: 'GET', suffix: '/snapshot' },
  { method: 'HEAD', suffix: '/snapshot' },
  { method: 'PUT', suffix: '/snapshot/00000000000000000003', headers: JSON_TYPE, body: '{}' },
  { method: 'PUT', suffix: '/retention/00000000000000000003' },
  { method: 'GET', suffix: '/bootstrap' },
  { method: 'GET', suffix: '/attrs' },
  { method: 'PUT', suffix: '/attrs', headers: JSON_TYPE, body: '{"title":"t"}' },
  { method: 'POST', suffix: '/append-batch', headers: { 'content-type': 'application/octet-stream' }, body: frame },
];

function comparable(reply: Reply): unknown {
  // Date and the request id differ between any two answers; that each answer has an id is compared.
  const { date: _date, 'x-request-id': requestId, ...headers } = reply.headers;
  return { status: reply.status, headers, hasRequestId: requestId !== undefined, body: reply.text() };
}

/** `{path}{suffix}`, an extension's suffix (`/attrs`) addressed as the stream's family does it (`?ext=attrs` in /v1/stream). */
const withSuffix = (path: string, suffix: string) => (suffix.startsWith('/') ? extensionUrl(path, suffix.slice(1)) : `${path}${suffix}`);

async function expectAlike(hidden: string, missing: string, request: (typeof STREAM_REQUESTS)[number]): Promise<void> {
  const a = await as(token, request.method, withSuffix(hidden, request.suffix), request);
  const b = await as(token, request.method, withSuffix(missing, request.suffix), request);
  // A refusal: a 4xx, or for append-batch (which answers each frame) a frame's 404.
  expect(a.status >= 400 || a.text().includes('"STREAM_NOT_FOUND"'), `${request.method} ${hidden}${request.suffix}: ${a.status}`).toBe(true);
  expect(comparable(a), `${request.method} ${hidden}${request.suffix} vs ${missing}${request.suffix}`).toEqual(comparable(b));
}

beforeAll(async () => {
  admin = await env.token([{ bucket: '*', can: ['admin'] }]);
  token = await env.token([
    { bucket: 'cvis', can: ['admin'], prefix: 'pub-' },
    { bucket: 'v1', can: ['admin'], prefix: 'pub-' },
    { bucket: 'cgone', can: ['admin'] },
  ]);
  for (const bucket of ['cvis', 'chid']) expect((await as(admin, 'PUT', `/${bucket}`)).status).toBe(201);
  for (const path of ['/cvis/secret', '/chid/secret', '/v1/stream/secret', '/cvis/pub-a']) {
    expect((await as(admin, 'PUT', path, { headers: TEXT, body: 'abc' })).status).toBe(201);
    expect((await as(admin, 'POST', path, { headers: TEXT, body: 'def' })).status).toBe(204);
    expect((await as(admin, 'PUT', extensionUrl(path, 'snapshot/00000000000000000003'), { headers: JSON_TYPE, body: '{}' })).status).toBe(204);
  }
});

describe('concealment', () => {
  it('a hidden stream answers as a missing one on every route: prefix, bucket and /v1', async () => {
    for (const request of STREAM_REQUESTS) {
      await expectAlike('/cvis/secret', '/cvis/pub-missing', request);
      await expectAlike('/chid/secret', '/cgone/secret', request);
      await expectAlike('/v1/stream/secret', '/v1/stream/pub-missing', request);
    }
    // Creating: in a hidden bucket as in a missing one.
    await expectAlike('/chid/new', '/cgone/new', { method: 'PUT', suffix: '', headers: TEXT });
    expect((await as(admin, 'HEAD', '/chid/new')).status).toBe(404);
  });

  it('a hidden bucket answers as a missing one, listing included', async () => {
    for (const [method, suffix] of [['GET', ''], ['HEAD', ''], ['DELETE', ''], ['GET', '/streams'], ['GET', '/streams?limit=0'], ['HEAD', '/streams']] as const) {
      await expectAlike('/chid', '/cgone', { method, suffix });
    }
    expect((await as(admin, 'GET', '/chid')).status).toBe(200);
  });

  it('a listing names only the streams the token reads', async () => {
    const listing = async (query: string) => ((await as(token, 'GET', `/cvis/streams${query}`)).json() as { streams: string[] }).streams;
    expect(((await as(admin, 'GET', '/cvis/streams')).json() as { streams: string[] }).streams).toEqual(['pub-a', 'secret']);
    expect(await listing('')).toEqual(['pub-a']);
    expect(await listing('?prefix=sec')).toEqual([]);
    expect(await listing('?prefix=pub-a')).toEqual(['pub-a']);
    expect(await listing('?prefix=p')).toEqual(['pub-a']);
  });

  it('a fork of a hidden source is refused as a fork of a missing one; a readable source forks', async () => {
    const fork = (source: string) => ({ headers: { 'stream-forked-from': source } });
    const hidden = await as(token, 'PUT', '/cvis/pub-f1', fork('/chid/secret'));
    const missing = await as(token, 'PUT', '/cvis/pub-f2', fork('/cvis/pub-nothing'));
    expect(hidden.status).toBe(404);
    expect(comparable(hidden)).toEqual(comparable(missing));
    expect((await as(admin, 'HEAD', '/cvis/pub-f1')).status).toBe(404);
    const readable = await as(token, 'PUT', '/cvis/pub-f3', fork('/cvis/pub-a'));
    expect(readable.status, readable.text()).toBe(201);
    // Read permission on the source is enough, in another bucket too; manage on the target is needed.
    const reader = await env.token([{ bucket: 'chid', can: ['read'] }, { bucket: 'cvis', can: ['manage'] }]);
    expect((await as(reader, 'PUT', '/cvis/f4', fork('/chid/secret'))).status).toBe(201);
    expect((await as(reader, 'GET', '/cvis/f4?offset=-1')).text()).toBe('abcdef');
  });
});
