/**
 * Quotas bound a tenant: the appends quota counts messages written (an append-batch's
 * frames, a JSON array's values, a transaction's operations), not requests, and a write
 * that does not fit is refused whole with nothing written; stream creates, forks and
 * subscription creates are charged against their own quota. The server's clock is stopped
 * so a bucket only refills when a test moves it.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { call, expectRefusal } from '../http/client.js';
import { bearer, useAuthServer } from './setup.js';

const MESSAGES_PER_SECOND = 8;
const CREATES_PER_SECOND = 3;
const env = useAuthServer({ auth: { quotas: { appendsPerSecond: MESSAGES_PER_SECOND, createsPerSecond: CREATES_PER_SECOND, bytesPerSecond: 0, liveConnections: 0 } } });
const TEXT = { 'content-type': 'text/plain' };
const JSON_TYPE = { 'content-type': 'application/json' };
const BUCKET = 'quotas';
let admin: string;
let subjects = 0;

beforeAll(async () => {
  admin = await env.token([{ bucket: '*', can: ['admin'] }], { subject: 'admin' });
  expect((await call(env.url, 'PUT', `/${BUCKET}`, { headers: bearer(admin) })).status).toBe(201);
});

afterEach(() => env.clock.reset());

/** A writer of its own subject, so each test starts with full buckets. */
async function writer(): Promise<Record<string, string>> {
  return bearer(await env.token([{ bucket: BUCKET, can: ['write', 'read'] }], { subject: `writer-${++subjects}` }));
}

/** An admin of the bucket, of its own subject: creates are charged to it alone. */
async function owner(): Promise<Record<string, string>> {
  return bearer(await env.token([{ bucket: BUCKET, can: ['admin'] }], { subject: `owner-${++subjects}` }));
}

/** An append-batch body: each frame a u32 big-endian length and its bytes. */
function frames(count: number, text = 'm'): Buffer {
  return Buffer.concat(Array.from({ length: count }, () => {
    const bytes = Buffer.from(text);
    const length = Buffer.alloc(4);
    length.writeUInt32BE(bytes.length);
    return Buffer.concat([length, bytes]);
  }));
}

async function createStream(name: string, type: Record<string, string>): Promise<string> {
  const path = `/${BUCKET}/${name}`;
  expect((await call(env.url, 'PUT', path, { headers: { ...(await owner()), ...type } })).status).toBe(201);
  return path;
}

const tailOf = async (path: string): Promise<string> => (await call(env.url, 'HEAD', path, { headers: bearer(admin) })).headers['stream-next-offset']!;

describe('the appends quota counts messages', () => {
  it('refuses an append-batch of more messages than the whole quota, writing nothing, with a code that says to split it', async () => {
    const path = await createStream('batch-over', TEXT);
    const headers = { ...(await writer()), ...TEXT };
    env.clock.stopAt(Date.now());
    const before = await tailOf(path);
    const refused = await call(env.url, 'POST', `${path}/append-batch`, { headers, body: frames(MESSAGES_PER_SECOND + 1) });
    expectRefusal(refused, 'REQUEST_OVER_QUOTA');
    expect(refused.headers['retry-after']).toBeUndefined();
    expect(await tailOf(path)).toBe(before);
    // Refused whole, it took nothing: the whole quota is still there.
    expect((await call(env.url, 'POST', `${path}/append-batch`, { headers, body: frames(MESSAGES_PER_SECOND) })).status).toBe(200);
  });

  it('lets a batch that fits through, then refuses the next with 429 and Retry-After, writing nothing, until the bucket refills', async () => {
    const path = await createStream('batch-fits', TEXT);
    const headers = { ...(await writer()), ...TEXT };
    env.clock.stopAt(Date.now());
    const batch = await call(env.url, 'POST', `${path}/append-batch`, { headers, body: frames(MESSAGES_PER_SECOND - 2) });
    expect(batch.status).toBe(200);
    expect((batch.json() as Array<{ status: number }>).map((ack) => ack.status)).toEqual(Array(MESSAGES_PER_SECOND - 2).fill(204));
    const tail = await tailOf(path);
    // Two messages are left: a batch of three does not fit, and is refused whole.
    const refused = await call(env.url, 'POST', `${path}/append-batch`, { headers, body: frames(3) });
    expectRefusal(refused, 'RATE_LIMITED');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(await tailOf(path)).toBe(tail);
    expect((await call(env.url, 'POST', `${path}/append-batch`, { headers, body: frames(2) })).status).toBe(200);
    // Empty now: even a single append is refused, before its body is read.
    expectRefusal(await call(env.url, 'POST', path, { headers, body: 'x' }), 'RATE_LIMITED');
    // A second refills the whole quota.
    env.clock.stopAt(env.clock.now() + 1000);
    expect((await call(env.url, 'POST', `${path}/append-batch`, { headers, body: frames(MESSAGES_PER_SECOND) })).status).toBe(200);
    env.clock.reset();
    expect(Number(await tailOf(path))).toBe(2 * MESSAGES_PER_SECOND);
  });

  it('charges a JSON append of an array of N values as N messages', async () => {
    const path = await createStream('json-array', JSON_TYPE);
    const headers = { ...(await writer()), ...JSON_TYPE };
    env.clock.stopAt(Date.now());
    const array = (n: number) => JSON.stringify(Array.from({ length: n }, (_, i) => ({ i })));
    expectRefusal(await call(env.url, 'POST', path, { headers, body: array(MESSAGES_PER_SECOND + 1) }), 'REQUEST_OVER_QUOTA');
    expect((await call(env.url, 'POST', path, { headers, body: array(MESSAGES_PER_SECOND - 1) })).status).toBe(204);
    const refused = await call(env.url, 'POST', path, { headers, body: array(2) });
    expectRefusal(refused, 'RATE_LIMITED');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect((await call(env.url, 'POST', path, { headers, body: array(1) })).status).toBe(204);
    env.clock.reset();
    const read = await call(env.url, 'GET', `${path}?offset=-1`, { headers: bearer(admin) });
    expect((read.json() as unknown[]).length).toBe(MESSAGES_PER_SECOND);
  });

  it('charges a JSON frame of an append-batch by its values', async () => {
    const path = await createStream('json-batch', JSON_TYPE);
    const headers = { ...(await writer()), ...JSON_TYPE };
    env.clock.stopAt(Date.now());
    // Two frames, each an array of five: ten messages over a quota of eight.
    const body = frames(2, JSON.stringify([1, 2, 3, 4, 5]));
    expectRefusal(await call(env.url, 'POST', `${path}/append-batch`, { headers, body }), 'REQUEST_OVER_QUOTA');
    expect((await call(env.url, 'GET', `${path}?offset=-1`, { headers: bearer(admin) })).json()).toEqual([]);
  });

  it('charges a transaction by the messages of its operations', async () => {
    const key = 'tenant';
    const streams = ['left', 'right'];
    for (const name of streams) await createStream(`${key}/${name}`, TEXT);
    const headers = { ...(await writer()), ...JSON_TYPE };
    env.clock.stopAt(Date.now());
    const operations = (n: number) => ({
      operations: Array.from({ length: n }, (_, i) => ({ stream: streams[i % 2], content_type: 'text/plain', payload_base64: Buffer.from('t').toString('base64') })),
    });
    const transaction = (n: number) => call(env.url, 'POST', `/${BUCKET}/${key}/$transaction`, { headers, body: JSON.stringify(operations(n)) });
    expectRefusal(await transaction(MESSAGES_PER_SECOND + 1), 'REQUEST_OVER_QUOTA');
    expect((await transaction(MESSAGES_PER_SECOND)).status).toBe(200);
    expectRefusal(await transaction(1), 'RATE_LIMITED');
    env.clock.reset();
    const written = await Promise.all(streams.map((name) => tailOf(`/${BUCKET}/${key}/${name}`)));
    expect(written.map(Number)).toEqual([MESSAGES_PER_SECOND / 2, MESSAGES_PER_SECOND / 2]);
  });
});

describe('creates are charged', () => {
  it('charges stream creates, forks and repeated creates against --quota-creates, refusing the next with nothing created', async () => {
    const headers = { ...(await owner()), ...TEXT };
    env.clock.stopAt(Date.now());
    const put = (name: string, extra: Record<string, string> = {}) => call(env.url, 'PUT', `/${BUCKET}/${name}`, { headers: { ...headers, ...extra } });
    expect((await put('create-a')).status).toBe(201);
    expect((await put('create-b', { 'stream-forked-from': `/${BUCKET}/create-a` })).status).toBe(201);
    // A PUT of a stream that exists is a create request all the same.
    expect((await put('create-a')).status).toBe(200);
    const refused = await put('create-c');
    expectRefusal(refused, 'RATE_LIMITED');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expectRefusal(await put('create-d', { 'stream-forked-from': `/${BUCKET}/create-a` }), 'RATE_LIMITED');
    expect((await call(env.url, 'HEAD', `/${BUCKET}/create-c`, { headers: bearer(admin) })).status).toBe(404);
    expect((await call(env.url, 'HEAD', `/${BUCKET}/create-d`, { headers: bearer(admin) })).status).toBe(404);
    // Another subject has its own quota, and a third of a second gives this one a create back.
    expect((await call(env.url, 'PUT', `/${BUCKET}/create-e`, { headers: { ...(await owner()), ...TEXT } })).status).toBe(201);
    env.clock.stopAt(env.clock.now() + Math.ceil(1000 / CREATES_PER_SECOND));
    expect((await put('create-c')).status).toBe(201);
  });

  it('charges subscription creates against --quota-creates', async () => {
    await createStream('sub-wake', TEXT);
    const headers = { ...(await owner()), ...JSON_TYPE };
    env.clock.stopAt(Date.now());
    const subscription = (id: string) => `/${BUCKET}/__ds/subscriptions/${id}`;
    const create = (id: string) => call(env.url, 'PUT', subscription(id), { headers, body: JSON.stringify({ type: 'pull-wake', streams: ['sub-*'], wake_stream: 'sub-wake' }) });
    for (let i = 0; i < CREATES_PER_SECOND; i++) expect((await create(`charged-${i}`)).status).toBe(201);
    expectRefusal(await create('charged-over'), 'RATE_LIMITED');
    expect((await call(env.url, 'GET', subscription('charged-over'), { headers: bearer(admin) })).status).toBe(404);
  });

  it("charges a create's initial messages against the appends quota, creating nothing when they do not fit", async () => {
    const headers = { ...(await owner()), ...JSON_TYPE };
    env.clock.stopAt(Date.now());
    const body = JSON.stringify(Array.from({ length: MESSAGES_PER_SECOND + 1 }, (_, i) => i));
    expectRefusal(await call(env.url, 'PUT', `/${BUCKET}/create-full`, { headers, body }), 'REQUEST_OVER_QUOTA');
    expect((await call(env.url, 'HEAD', `/${BUCKET}/create-full`, { headers: bearer(admin) })).status).toBe(404);
  });
});
