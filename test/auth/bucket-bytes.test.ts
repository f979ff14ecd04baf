/**
 * --bucket-max-bytes: no bucket's streams retain more bytes than its limit, so one tenant
 * cannot fill the disk every tenant shares. A write past it is refused whole with 507
 * BUCKET_BYTES_LIMIT and stores nothing; `GET /{bucket}` shows the limit and what it counts.
 * (What each engine counts is the storage contract's "bucketHeldBytes".)
 */
import { describe, expect, it } from 'vitest';
import { frames } from '../helpers/http.js';
import { extensionUrl } from '../../src/protocol/extensions.js';
import { call, expectRefusal } from '../http/client.js';
import { createBucketAs, useAdminHeaders, useAuthServer } from './setup.js';

const MAX_BYTES = 64;
const env = useAuthServer({ bucketLimits: { maxStreams: 0, maxSubscriptions: 0, maxBytes: MAX_BYTES } });
const TEXT = { 'content-type': 'text/plain' };
const admin = useAdminHeaders(env);
const newBucket = (id: string) => createBucketAs(env, admin, id);

const putStream = (path: string, body = '', extra: Record<string, string> = {}) => call(env.url, 'PUT', path, { headers: { ...admin, ...TEXT, ...extra }, body });
const append = (path: string, body: string) => call(env.url, 'POST', path, { headers: { ...admin, ...TEXT }, body });
const read = async (path: string) => (await call(env.url, 'GET', `${path}?offset=-1`, { headers: admin })).text();
const view = async (bucket: string) => (await call(env.url, 'GET', `/${bucket}`, { headers: admin })).json() as { retainedBytes: number; limits: { maxBytes: number | null } };
const bytes = (n: number, fill = 'x') => fill.repeat(n);

describe('--bucket-max-bytes', () => {
  it('refuses the write that would pass the limit with 507 BUCKET_BYTES_LIMIT, storing nothing; one that fills it exactly passes', async () => {
    await newBucket('full');
    expect((await putStream('/full/a', bytes(30))).status).toBe(201);
    expect((await append('/full/a', bytes(34, 'y'))).status).toBe(204);
    expect(await view('full')).toMatchObject({ retainedBytes: MAX_BYTES, limits: { maxBytes: MAX_BYTES } });
    const refused = await append('/full/a', 'z');
    expect(refused.status).toBe(507);
    expectRefusal(refused, 'BUCKET_BYTES_LIMIT');
    // Nor does a new stream's body get in, though the stream count has room.
    expectRefusal(await putStream('/full/b', 'z'), 'BUCKET_BYTES_LIMIT');
    expect((await call(env.url, 'HEAD', '/full/b', { headers: admin })).status).toBe(404);
    expect(await read('/full/a')).toBe(bytes(30) + bytes(34, 'y'));
    // A stream created empty stores no bytes: it is let in.
    expect((await putStream('/full/empty')).status).toBe(201);
    // Another bucket has its own room.
    await newBucket('other');
    expect((await putStream('/other/a', bytes(MAX_BYTES))).status).toBe(201);
  });

  it('counts a fork from its fork point, and gives back room when a stream is deleted', async () => {
    await newBucket('forked');
    expect((await putStream('/forked/source', bytes(20))).status).toBe(201);
    expect((await putStream('/forked/fork', '', { 'stream-forked-from': '/forked/source' })).status).toBe(201);
    // The fork reads the source's 20 bytes but holds none of them.
    expect((await view('forked')).retainedBytes).toBe(20);
    expect((await append('/forked/fork', bytes(20))).status).toBe(204);
    expect((await putStream('/forked/spare', bytes(24))).status).toBe(201);
    expect((await view('forked')).retainedBytes).toBe(MAX_BYTES);
    expectRefusal(await append('/forked/fork', 'z'), 'BUCKET_BYTES_LIMIT');
    expect((await call(env.url, 'DELETE', '/forked/spare', { headers: admin })).status).toBe(204);
    expect((await append('/forked/fork', bytes(24, 'z'))).status).toBe(204);
    expect((await view('forked')).retainedBytes).toBe(MAX_BYTES);
  });

  it('lets through only what fits when writes of one bucket race', async () => {
    await newBucket('racing');
    expect((await putStream('/racing/s')).status).toBe(201);
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => append('/racing/s', String(i).repeat(10))));
    const statuses = answers.map((answer) => answer.status);
    // Six writes of ten bytes fit in 64; the seventh would not.
    expect(statuses.filter((status) => status === 204)).toHaveLength(6);
    expect(statuses.filter((status) => status === 507)).toHaveLength(4);
    expect((await read('/racing/s')).length).toBe(60);
    expect((await view('racing')).retainedBytes).toBe(60);
  });

  it('refuses an append-batch or a transaction that would pass it whole', async () => {
    await newBucket('grouped');
    expect((await putStream('/grouped/s', bytes(40))).status).toBe(201);
    const batchUrl = extensionUrl(`${env.url}/grouped/s`, 'append-batch');
    const over = await fetch(batchUrl, { method: 'POST', headers: { ...admin, ...TEXT }, body: new Uint8Array(frames(bytes(10), bytes(10), bytes(10))) });
    expect(over.status).toBe(507);
    expect(((await over.json()) as { code: string }).code).toBe('BUCKET_BYTES_LIMIT');
    expect(await read('/grouped/s')).toBe(bytes(40));
    const fits = await fetch(batchUrl, { method: 'POST', headers: { ...admin, ...TEXT }, body: new Uint8Array(frames(bytes(10), bytes(10))) });
    expect(fits.status).toBe(200);
    expect((await view('grouped')).retainedBytes).toBe(60);
    // A transaction over streams of one affinity key (`/grouped/run/...`), counted whole.
    expect((await putStream('/grouped/run/t')).status).toBe(201);
    const payload = (text: string) => ({ stream: 't', content_type: 'text/plain', payload_base64: Buffer.from(text).toString('base64') });
    const transaction = (texts: string[]) =>
      call(env.url, 'POST', '/grouped/run/$transaction', { headers: { ...admin, 'content-type': 'application/json' }, body: JSON.stringify({ operations: texts.map(payload) }) });
    const refused = await transaction(['ab', 'cde']);
    expect(refused.status).toBe(507);
    expect(refused.text()).toContain('BUCKET_BYTES_LIMIT');
    expect((await transaction(['ab', 'cd'])).status).toBe(200);
    expect(await read('/grouped/run/t')).toBe('abcd');
    expect((await view('grouped')).retainedBytes).toBe(MAX_BYTES);
  });

  it("takes a bucket's own maxBytes (PATCH, admin) over the server-wide limit; 0 lifts it", async () => {
    await newBucket('mine');
    const patch = (maxBytes: number | null) =>
      call(env.url, 'PATCH', '/mine', { headers: { ...admin, 'content-type': 'application/json' }, body: JSON.stringify({ limits: { maxBytes } }) });
    expect((await patch(10)).json()).toMatchObject({ limits: { maxBytes: 10 }, overrides: { maxBytes: 10 } });
    expectRefusal(await putStream('/mine/s', bytes(11)), 'BUCKET_BYTES_LIMIT');
    expect((await putStream('/mine/s', bytes(10))).status).toBe(201);
    expect((await patch(0)).json()).toMatchObject({ limits: { maxBytes: null }, overrides: { maxBytes: 0 } });
    expect((await append('/mine/s', bytes(MAX_BYTES * 2))).status).toBe(204);
    // Back to the server-wide limit: the bucket already holds more than it, so writes wait for room.
    expect((await patch(null)).json()).toMatchObject({ limits: { maxBytes: MAX_BYTES }, retainedBytes: 10 + MAX_BYTES * 2 });
    expectRefusal(await append('/mine/s', 'z'), 'BUCKET_BYTES_LIMIT');
  });
});
