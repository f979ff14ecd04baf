/**
 * Per-bucket limits: no bucket holds more than --bucket-max-streams streams or
 * --bucket-max-subscriptions subscriptions, so one tenant cannot take what the server
 * holds for all; `GET /{bucket}` shows the limits.
 */
import { describe, expect, it } from 'vitest';
import { call, expectRefusal } from '../http/client.js';
import { createBucketAs, useAdminHeaders, useAuthServer } from './setup.js';

const MAX_STREAMS = 3;
const MAX_SUBSCRIPTIONS = 2;
const env = useAuthServer({ bucketLimits: { maxStreams: MAX_STREAMS, maxSubscriptions: MAX_SUBSCRIPTIONS, maxBytes: 0 } });
const TEXT = { 'content-type': 'text/plain' };
const admin = useAdminHeaders(env);
const newBucket = (id: string) => createBucketAs(env, admin, id);

const putStream = (path: string, extra: Record<string, string> = {}) => call(env.url, 'PUT', path, { headers: { ...admin, ...TEXT, ...extra } });

describe('bucket limits', () => {
  it('refuses the stream past --bucket-max-streams with BUCKET_STREAM_LIMIT, a fork too, and not a PUT of one that exists', async () => {
    await newBucket('capped');
    for (let i = 0; i < MAX_STREAMS; i++) expect((await putStream(`/capped/s${i}`)).status).toBe(201);
    expectRefusal(await putStream('/capped/over'), 'BUCKET_STREAM_LIMIT');
    expectRefusal(await putStream('/capped/fork', { 'stream-forked-from': '/capped/s0' }), 'BUCKET_STREAM_LIMIT');
    expect((await call(env.url, 'HEAD', '/capped/over', { headers: admin })).status).toBe(404);
    // At the limit, a PUT of a stream that exists answers as ever.
    expect((await putStream('/capped/s0')).status).toBe(200);
    // Another bucket has its own limit; a delete makes room.
    await newBucket('roomy');
    expect((await putStream('/roomy/s0')).status).toBe(201);
    expect((await call(env.url, 'DELETE', '/capped/s1', { headers: admin })).status).toBe(204);
    expect((await putStream('/capped/over')).status).toBe(201);
  });

  it('lets only the limit through when creates of one bucket race', async () => {
    await newBucket('racing');
    const answers = await Promise.all(Array.from({ length: MAX_STREAMS + 4 }, (_, i) => putStream(`/racing/r${i}`)));
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.filter((status) => status === 201)).toHaveLength(MAX_STREAMS);
    expect(statuses.filter((status) => status === 429)).toHaveLength(4);
    expect(((await call(env.url, 'GET', '/racing', { headers: admin })).json() as { streamCount: number }).streamCount).toBe(MAX_STREAMS);
  });

  it('refuses the subscription past --bucket-max-subscriptions with BUCKET_SUBSCRIPTION_LIMIT', async () => {
    await newBucket('subbed');
    expect((await putStream('/subbed/wake')).status).toBe(201);
    const subscription = (id: string) => `/subbed/__ds/subscriptions/${id}`;
    const config = JSON.stringify({ type: 'pull-wake', streams: ['wake'], wake_stream: 'wake' });
    const create = (id: string) => call(env.url, 'PUT', subscription(id), { headers: { ...admin, 'content-type': 'application/json' }, body: config });
    for (let i = 0; i < MAX_SUBSCRIPTIONS; i++) expect((await create(`sub-${i}`)).status).toBe(201);
    // Subscription routes answer in their own error shape (docs/errors.md): the code is there as everywhere.
    const refused = await create('sub-over');
    expect(refused.status).toBe(429);
    expect((refused.json() as { code: string }).code).toBe('BUCKET_SUBSCRIPTION_LIMIT');
    expect((await call(env.url, 'GET', subscription('sub-over'), { headers: admin })).status).toBe(404);
    // Confirming one that exists is no new subscription.
    expect((await create('sub-0')).status).toBe(200);
    expect((await call(env.url, 'DELETE', subscription('sub-1'), { headers: admin })).status).toBe(204);
    expect((await create('sub-over')).status).toBe(201);
  });

  it('shows the limits in GET /{bucket}', async () => {
    await newBucket('shown');
    const info = (await call(env.url, 'GET', '/shown', { headers: admin })).json();
    expect(info).toMatchObject({ id: 'shown', streamCount: 0, limits: { maxStreams: MAX_STREAMS, maxSubscriptions: MAX_SUBSCRIPTIONS } });
  });
});
