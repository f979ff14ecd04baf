/**
 * Group transactions with access control on: the token needs write permission on every
 * stream the transaction names. A stream it may see but not write refuses the whole
 * transaction with 403; one it may not see is answered as missing (concealment); either
 * way nothing of the transaction applies.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { call, type Reply } from '../http/client.js';
import { bearer, useAuthServer } from './setup.js';

const env = useAuthServer();
const BUCKET = 'txauth';
const KEY = 'run-7';
const JSON_TYPE = { 'content-type': 'application/json' };
let admin: Record<string, string>;

const path = (stream: string) => `/${BUCKET}/${KEY}/${stream}`;
const op = (stream: string, value: unknown) => ({ stream, content_type: 'application/json', payload_base64: Buffer.from(JSON.stringify(value)).toString('base64') });
const transact = (headers: Record<string, string>, streams: string[]) =>
  call(env.url, 'POST', `/${BUCKET}/${KEY}/$transaction`, { headers: { ...JSON_TYPE, ...headers }, body: JSON.stringify({ operations: streams.map((s, i) => op(s, { i })) }) });

async function records(stream: string): Promise<string | undefined> {
  return (await call(env.url, 'HEAD', path(stream), { headers: admin })).headers['stream-record-next'];
}

function expectRefusal(reply: Reply, status: number, code: string, operation?: number): void {
  expect(reply.status, reply.text()).toBe(status);
  expect(reply.json()).toMatchObject(operation === undefined ? { code } : { code, operation });
}

beforeAll(async () => {
  admin = bearer(await env.token([{ bucket: '*', can: ['admin'] }]));
  expect((await call(env.url, 'PUT', `/${BUCKET}`, { headers: admin })).status).toBe(201);
  for (const stream of ['journal', 'queue']) expect((await call(env.url, 'PUT', path(stream), { headers: { ...admin, ...JSON_TYPE } })).status).toBe(201);
});

describe('transactions under access control', () => {
  it('commit with write permission on every stream named', async () => {
    const writer = bearer(await env.token([{ bucket: BUCKET, can: ['write'], prefix: `${KEY}/` }]));
    expect((await transact(writer, ['journal', 'queue'])).status).toBe(200);
    expect([await records('journal'), await records('queue')]).toEqual(['1', '1']);
  });

  it('are refused whole, 403 naming the operation, when one stream is only readable', async () => {
    const token = bearer(await env.token([{ bucket: BUCKET, can: ['write'], prefix: `${KEY}/journal` }, { bucket: BUCKET, can: ['read'], prefix: `${KEY}/queue` }]));
    const before = [await records('journal'), await records('queue')];
    expectRefusal(await transact(token, ['journal', 'queue']), 403, 'FORBIDDEN', 1);
    expect([await records('journal'), await records('queue')]).toEqual(before);
  });

  it('answer a stream the token cannot see as missing, applying nothing', async () => {
    const token = bearer(await env.token([{ bucket: BUCKET, can: ['write'], prefix: `${KEY}/journal` }]));
    const before = [await records('journal'), await records('queue')];
    expectRefusal(await transact(token, ['journal', 'queue']), 404, 'STREAM_NOT_FOUND', 1);
    expect([await records('journal'), await records('queue')]).toEqual(before);
  });

  it('need a token, and a read-only one is refused', async () => {
    const anonymous = await transact({}, ['journal']);
    expectRefusal(anonymous, 401, 'UNAUTHORIZED');
    // Refused before the handler runs, the answer still advertises both extensions (1.8).
    expect(anonymous.headers['stream-extensions']).toBe('path-affinity-v1, group-append-transaction-v1');
    expect((await call(env.url, 'GET', `${path('journal')}?offset=-1`)).headers['stream-extensions']).toBe('path-affinity-v1');
    const reader = bearer(await env.token([{ bucket: BUCKET, can: ['read'] }]));
    expectRefusal(await transact(reader, ['journal']), 403, 'FORBIDDEN', 0);
  });
});
