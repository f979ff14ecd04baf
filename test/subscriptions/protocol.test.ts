/**
 * Subscriptions over HTTP (PROTOCOL.md sections 6 and 7), against the real rill binary on
 * SQLite and a real webhook receiver on 127.0.0.1 (hence --webhook-allow-localhost). One
 * server for the file; every test uses its own subscription ids and stream paths.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { del, errorCode, get, post, put, type Reply } from '../helpers/http.js';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { TestClock } from '../helpers/clock.js';
import { eventually, signatureVerifies, startReceiver, type Receiver } from '../helpers/webhooks.js';

let server: RunningServer;
let receiver: Receiver;
let n = 0;
const JSON_TYPE = { 'content-type': 'application/json' };
const unique = (prefix: string) => `${prefix}-${++n}`;
const stream = (path: string) => `${server.url}/v1/stream/${path}`;
const sub = (id: string, rest = '') => `${server.url}/v1/stream/__ds/subscriptions/${id}${rest}`;
const putSub = (id: string, config: unknown) => put(sub(id), JSON.stringify(config), JSON_TYPE);
const createJson = (path: string, body = '[]') => put(stream(path), body, JSON_TYPE);
const appendJson = (path: string, value: unknown) => post(stream(path), JSON.stringify(value), JSON_TYPE);
const nestedCode = (reply: Reply) => (reply.json as { error?: { code?: string } }).error?.code;

interface StreamView {
  path: string;
  link_type: string;
  acked_offset: string;
  tail_offset: string;
  has_pending: boolean;
}
const streamsOf = async (id: string) => ((await get(sub(id))).json as { streams: StreamView[] }).streams;
/** The webhook delivery of a subscription's wake: attempts failed so far and when the next is due. */
const deliveryOf = async (id: string) => ((await get(sub(id))).json as { wake: { delivery: { attempts: number; next_attempt_at: string } | null } | null }).wake?.delivery;
const tailOf = async (path: string) => (await get(stream(path))).headers.get('stream-next-offset')!;

/** The server's clock: retries come due and leases run out when a test moves it. The sweep still runs every 50 ms. */
const clock = new TestClock();

beforeAll(async () => {
  server = await startServer({ args: ['--webhook-allow-localhost', '--subscription-sweep', '50ms', '--max-subscription-streams', '20'], clock });
  receiver = await startReceiver();
});

afterAll(async () => {
  await receiver?.close();
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

describe('creating subscriptions', () => {
  it('creates with 201, re-confirms the same configuration with 200 whatever its order, refuses another with 409, and never shows a secret', async () => {
    const id = unique('conf');
    const config = { type: 'pull-wake', streams: ['b/x', 'a/y', 'b/x'], wake_stream: 'wake/conf', lease_ttl_ms: 5000, description: 'd' };
    await createJson('wake/conf', '[]');
    const created = await putSub(id, config);
    expect(created.status).toBe(201);
    expect(created.headers.get('location')).toBe(`/v1/stream/__ds/subscriptions/${id}`);
    const reordered = await putSub(id, { description: 'd', lease_ttl_ms: 5000, wake_stream: '/wake/conf/', streams: ['a/y', 'b/x'], type: 'pull-wake' });
    expect(reordered.status).toBe(200);
    const other = await putSub(id, { ...config, lease_ttl_ms: 6000 });
    expect(other.status).toBe(409);
    expect(errorCode(other)).toBe('SUBSCRIPTION_ALREADY_EXISTS');
    expect(nestedCode(other)).toBe('SUBSCRIPTION_ALREADY_EXISTS');
    const body = (await get(sub(id))).json as Record<string, unknown>;
    expect(body).toMatchObject({ id, subscription_id: id, type: 'pull-wake', wake_stream: 'wake/conf', lease_ttl_ms: 5000, status: 'active', generation: 0 });
    expect((body.streams as StreamView[]).map((s) => [s.path, s.link_type])).toEqual([['a/y', 'explicit'], ['b/x', 'explicit']]);
    expect(JSON.stringify(body)).not.toMatch(/secret|token/);
    expect((await del(sub(id))).status).toBe(204);
    expect(errorCode(await get(sub(id)))).toBe('SUBSCRIPTION_NOT_FOUND');
    expect((await del(sub(id))).status).toBe(204);
  });

  it('refuses bad configurations with 400 and the reason', async () => {
    const bad: Array<[unknown, string]> = [
      [{ type: 'carrier-pigeon', pattern: 'a/*' }, 'BAD_REQUEST'],
      [{ type: 'pull-wake', wake_stream: 'w' }, 'BAD_REQUEST'],
      [{ type: 'pull-wake', pattern: 'a/*' }, 'BAD_REQUEST'],
      [{ type: 'pull-wake', pattern: 'a/*', wake_stream: 'w', lease_ttl_ms: 999 }, 'BAD_REQUEST'],
      [{ type: 'pull-wake', pattern: 'a/*', wake_stream: 'w', lease_ttl_ms: 600_001 }, 'BAD_REQUEST'],
      [{ type: 'pull-wake', pattern: 'a/b*', wake_stream: 'w' }, 'BAD_REQUEST'],
      [{ type: 'pull-wake', pattern: 'a//b', wake_stream: 'w' }, 'BAD_REQUEST'],
      [{ type: 'pull-wake', pattern: `${'x/'.repeat(20)}*`, wake_stream: 'w' }, 'BAD_REQUEST'],
      [{ type: 'pull-wake', streams: ['a/../b'], wake_stream: 'w' }, 'BAD_REQUEST'],
      [{ type: 'webhook', pattern: 'a/*' }, 'BAD_REQUEST'],
      [{ type: 'webhook', pattern: 'a/*', webhook: { url: 'http://10.0.0.1/hook' } }, 'WEBHOOK_URL_REJECTED'],
      [{ type: 'webhook', pattern: 'a/*', webhook: { url: 'https://192.168.1.20/hook' } }, 'WEBHOOK_URL_REJECTED'],
      [{ type: 'webhook', pattern: 'a/*', webhook: { url: 'https://169.254.169.254/latest' } }, 'WEBHOOK_URL_REJECTED'],
      [{ type: 'webhook', pattern: 'a/*', webhook: { url: 'https://[fe80::1]/hook' } }, 'WEBHOOK_URL_REJECTED'],
      [{ type: 'webhook', pattern: 'a/*', webhook: { url: 'http://example.com/hook' } }, 'WEBHOOK_URL_REJECTED'],
      [{ type: 'webhook', pattern: 'a/*', webhook: { url: 'ftp://example.com/hook' } }, 'WEBHOOK_URL_REJECTED'],
    ];
    for (const [config, code] of bad) {
      const reply = await putSub(unique('bad'), config);
      expect(reply.status, JSON.stringify(config)).toBe(400);
      expect(errorCode(reply), JSON.stringify(config)).toBe(code);
    }
    expect(nestedCode(await putSub(unique('bad'), { type: 'nope' }))).toBe('INVALID_REQUEST');
    expect(errorCode(await put(sub(unique('bad')), '{not json', JSON_TYPE))).toBe('INVALID_JSON');
    expect(errorCode(await put(sub('bad id!'), '{}', JSON_TYPE))).toBe('INVALID_ID');
    expect((await put(sub(unique('big')), 'x'.repeat(1024 * 1024 + 1), JSON_TYPE)).status).toBe(413);
  });

  it('links existing matches at their tail and streams created later from their first byte; * is one segment, ** zero or more', async () => {
    const root = unique('glob');
    for (const path of [`${root}/a`, `${root}/a/b`, `${root}/c/d/e`, root]) await createJson(path, '[{"old":true}]');
    const one = unique('one');
    const many = unique('many');
    await createJson(`${root}-wake`, '[]');
    await putSub(one, { type: 'pull-wake', pattern: `${root}/*`, wake_stream: `${root}-wake` });
    await putSub(many, { type: 'pull-wake', pattern: `${root}/**`, wake_stream: `${root}-wake` });
    expect((await streamsOf(one)).map((s) => s.path)).toEqual([`${root}/a`]);
    expect((await streamsOf(many)).map((s) => s.path)).toEqual([root, `${root}/a`, `${root}/a/b`, `${root}/c/d/e`]);
    for (const s of await streamsOf(many)) expect([s.acked_offset === s.tail_offset, s.has_pending]).toEqual([true, false]);
    await createJson(`${root}/new`, '[{"first":true}]');
    const joined = (await streamsOf(one)).find((s) => s.path === `${root}/new`)!;
    expect(joined).toMatchObject({ link_type: 'glob', acked_offset: '0'.repeat(20), has_pending: true });
    expect(joined.tail_offset).toBe(await tailOf(`${root}/new`));
  });
});

describe('webhook delivery', () => {
  it('delivers a signed wake the JWK Set verifies, takes acks on the callback, fences stale generations, and wakes again for new data', async () => {
    const id = unique('hook');
    const root = unique('hooked');
    const created = await putSub(id, { type: 'webhook', pattern: `${root}/*`, webhook: { url: receiver.url }, lease_ttl_ms: 5000 });
    const signing = (created.json as { webhook: { signing: { alg: string; kid: string; jwks_url: string } } }).webhook.signing;
    expect(signing).toMatchObject({ alg: 'ed25519', jwks_url: `${server.url}/v1/stream/__ds/jwks.json` });
    const jwksReply = await get(signing.jwks_url);
    expect(jwksReply.headers.get('content-type')).toContain('application/jwk-set+json');
    const jwks = jwksReply.json as { keys: Array<{ kid: string; kty: string; crv: string; alg: string }> };
    expect(jwks.keys.find((k) => k.kid === signing.kid)).toMatchObject({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA' });

    const before = receiver.deliveries.length;
    await createJson(`${root}/s`, '[{"n":1}]');
    const first = await receiver.next(before + 1);
    expect(signatureVerifies(first.rawBody, first.signature, jwksReply.json as never)).toBe(true);
    expect(signatureVerifies(first.rawBody.replace('"generation":1', '"generation":2'), first.signature, jwksReply.json as never)).toBe(false);
    expect(first.body).toMatchObject({ subscription_id: id, generation: 1, callback_url: `${server.url}/v1/stream/__ds/subscriptions/${id}/callback` });
    const tail = await tailOf(`${root}/s`);
    expect(first.body.streams).toEqual([{ path: `${root}/s`, link_type: 'glob', acked_offset: '0'.repeat(20), tail_offset: tail, has_pending: true }]);

    const callback = (body: unknown, token = first.body.callback_token) =>
      post(first.body.callback_url, JSON.stringify(body), { ...JSON_TYPE, authorization: `Bearer ${token}` });
    const wrongGeneration = await callback({ wake_id: first.body.wake_id, generation: 7, acks: [{ stream: `${root}/s`, offset: tail }] });
    expect([wrongGeneration.status, errorCode(wrongGeneration)]).toEqual([409, 'FENCED']);
    expect((await streamsOf(id))[0]!.acked_offset).toBe('0'.repeat(20));
    const acked = await callback({ wake_id: first.body.wake_id, generation: 1, acks: [{ stream: `${root}/s`, offset: tail }], done: true });
    expect([acked.status, acked.json]).toEqual([200, { ok: true, next_wake: false }]);
    expect((await streamsOf(id))[0]!.acked_offset).toBe(tail);
    const again = await callback({ wake_id: first.body.wake_id, generation: 1, acks: [{ stream: `${root}/s`, offset: tail }] });
    expect([again.status, errorCode(again), nestedCode(again)]).toEqual([409, 'FENCED', 'FENCED']);

    await appendJson(`${root}/s`, { n: 2 });
    const second = await receiver.next(before + 2);
    expect(second.body.generation).toBe(2);
    expect(second.body.wake_id).not.toBe(first.body.wake_id);
    // Webhook-Id, the receiver's de-duplication key, names the wake: a new wake, a new id.
    expect([first.deliveryId, second.deliveryId]).toEqual([first.body.wake_id, second.body.wake_id]);
    expect(second.body.streams[0]).toMatchObject({ acked_offset: tail, has_pending: true });
    const stale = await callback({ wake_id: first.body.wake_id, generation: 1, done: true });
    expect(errorCode(stale)).toBe('FENCED');
    const forged = await callback({ wake_id: second.body.wake_id, generation: 2, done: true }, `${second.body.callback_token}x`);
    expect([forged.status, errorCode(forged)]).toEqual([401, 'TOKEN_INVALID']);
    const missing = await post(first.body.callback_url, '{}', JSON_TYPE);
    expect([missing.status, errorCode(missing)]).toEqual([401, 'TOKEN_INVALID']);
  });

  it('acks the snapshot when the endpoint answers {"done": true}, and a failing endpoint is retried without holding up appends', async () => {
    const id = unique('done');
    const root = unique('doneroot');
    receiver.answer({ status: 503 }, { status: 200, body: { done: true } });
    const before = receiver.deliveries.length;
    await putSub(id, { type: 'webhook', pattern: `${root}/*`, webhook: { url: receiver.url } });
    await createJson(`${root}/s`, '[{"n":1}]');
    const failed = await receiver.next(before + 1);
    // The retry waits for the server's clock, which stands still: an append answered now did not wait for it.
    expect((await appendJson(`${root}/s`, { n: 2 })).status).toBe(204);
    expect(receiver.deliveries.length).toBe(before + 1);
    await eventually(async () => ((await get(sub(id))).json as { status: string }).status === 'failed', 2_000, 'status failed');
    // The failure is recorded after the endpoint answered; the retry is due at least 0.8 s (1 s - 20 %) later.
    const failedAtMs = failed.atMs + (clock.now() - Date.now());
    const dueMs = Date.parse((await deliveryOf(id))!.next_attempt_at);
    expect(dueMs - failedAtMs).toBeGreaterThanOrEqual(750);
    expect(receiver.deliveries.length).toBe(before + 1);
    clock.advance(dueMs - clock.now());
    const retried = await receiver.next(before + 2, 3_000);
    expect(retried.body.wake_id).toBe(failed.body.wake_id);
    // A retry of the same wake carries the same Webhook-Id: the receiver can tell it saw it.
    expect(failed.deliveryId).toBe(failed.body.wake_id);
    expect(retried.deliveryId).toBe(failed.deliveryId);
    const snapshotTail = retried.body.streams[0]!.tail_offset;
    // At least the snapshot: the append made after it may be auto-acked by the next wake already.
    await eventually(async () => (await streamsOf(id))[0]!.acked_offset >= snapshotTail, 2_000, 'the auto-ack');
    receiver.answer({ status: 200, body: {} });
    expect(((await get(sub(id))).json as { status: string }).status).toBe('active');
    const metrics = (await get(`${server.url}/metrics`)).text;
    const counter = (line: string) => Number(new RegExp(`^${line} (\\d+)$`, 'm').exec(metrics)?.[1]);
    expect(counter('rill_webhook_deliveries_total\\{result="failed"\\}')).toBeGreaterThanOrEqual(1);
    expect(counter('rill_webhook_deliveries_total\\{result="done"\\}')).toBeGreaterThanOrEqual(1);
    expect(counter('rill_subscription_wakes_total')).toBeGreaterThanOrEqual(2);
  });
});

describe('signing keys', () => {
  it('rotate: new deliveries are signed with the new key, and the old key stays published so earlier ones still verify', async () => {
    const id = unique('rotate');
    const root = unique('rotated');
    const created = (await putSub(id, { type: 'webhook', pattern: `${root}/*`, webhook: { url: receiver.url } })).json as { webhook: { signing: { kid: string; jwks_url: string } } };
    const oldKid = created.webhook.signing.kid;
    const before = receiver.deliveries.length;
    await createJson(`${root}/s`, '[1]');
    const signedBefore = await receiver.next(before + 1);
    const rotated = await post(`${server.url}/v1/stream/__ds/jwks/rotate`, '');
    expect(rotated.status).toBe(200);
    const newKid = (rotated.json as { kid: string }).kid;
    expect(newKid).not.toBe(oldKid);
    const jwks = (await get(created.webhook.signing.jwks_url)).json as { keys: Array<{ kid: string }> };
    expect(jwks.keys.map((k) => k.kid).sort()).toEqual([oldKid, newKid].sort());
    expect(signatureVerifies(signedBefore.rawBody, signedBefore.signature, jwks as never)).toBe(true);
    expect(((await get(sub(id))).json as { webhook: { signing: { kid: string } } }).webhook.signing.kid).toBe(newKid);
    const callback = await post(signedBefore.body.callback_url, JSON.stringify({ wake_id: signedBefore.body.wake_id, generation: signedBefore.body.generation, done: true }), {
      ...JSON_TYPE,
      authorization: `Bearer ${signedBefore.body.callback_token}`,
    });
    expect(callback.status).toBe(200);
    await appendJson(`${root}/s`, 2);
    const signedAfter = await receiver.next(before + 2);
    expect(signedAfter.signature).toContain(`kid=${newKid},`);
    expect(signatureVerifies(signedAfter.rawBody, signedAfter.signature, jwks as never)).toBe(true);
    expect((await get(`${server.url}/v1/stream/__ds/jwks/rotate`)).status).toBe(405);
  });
});

describe('a webhook endpoint that never answers', () => {
  it("holds up neither appends nor another subscription's deliveries", async () => {
    const slow = await startReceiver();
    slow.answer('hang');
    const root = unique('slowroot');
    const hanging = unique('hang');
    await putSub(hanging, { type: 'webhook', pattern: `${root}/*`, webhook: { url: slow.url } });
    const fast = unique('fast');
    await putSub(fast, { type: 'webhook', pattern: `${root}/*`, webhook: { url: receiver.url } });
    receiver.answer({ status: 200, body: { done: true } });
    const before = receiver.deliveries.length;
    try {
      await createJson(`${root}/s`, '[1]');
      await slow.next(1);
      expect((await appendJson(`${root}/s`, 2)).status).toBe(204);
      // The append was answered while the delivery to the silent endpoint is still under way
      // (it ends only at the 10 s webhook timeout, with a failed attempt).
      expect(await deliveryOf(hanging)).toMatchObject({ attempts: 0 });
      expect((await receiver.next(before + 1, 2_000)).body.subscription_id).toBe(fast);
    } finally {
      receiver.answer({ status: 200, body: {} });
      await slow.close();
    }
  });
});

describe('pull-wake', () => {
  it('appends a wake event, claims with a lease, acks inclusive offsets never backwards nor past the tail, releases, and fences', async () => {
    const id = unique('pull');
    const root = unique('pulled');
    const wake = `${root}-wake`;
    await createJson(wake);
    await putSub(id, { type: 'pull-wake', pattern: `${root}/*`, wake_stream: wake, lease_ttl_ms: 5000 });
    expect(errorCode(await post(sub(id, '/claim'), JSON.stringify({ worker: 'w1' }), JSON_TYPE))).toBe('NO_PENDING_WORK');
    await createJson(`${root}/s`, '[{"n":1},{"n":2}]');
    let events: Array<Record<string, unknown>> = [];
    await eventually(async () => (events = (await get(stream(wake))).json as typeof events).length > 0, 3_000, 'the wake event');
    expect(events[0]).toMatchObject({ type: 'wake', subscription_id: id, stream: `${root}/s`, generation: 1 });

    const claim = await post(sub(id, '/claim'), JSON.stringify({ worker: 'w1' }), JSON_TYPE);
    expect(claim.status).toBe(200);
    const claimed = claim.json as { wake_id: string; generation: number; token: string; streams: StreamView[]; lease_ttl_ms: number };
    expect(claimed).toMatchObject({ wake_id: events[0]!.wake_id, generation: 1, lease_ttl_ms: 5000 });
    const busy = await post(sub(id, '/claim'), JSON.stringify({ worker: 'w2' }), JSON_TYPE);
    expect([busy.status, errorCode(busy)]).toEqual([409, 'ALREADY_CLAIMED']);
    expect((busy.json as { error: { current_holder: string } }).error.current_holder).toBe('w1');

    const tail = claimed.streams[0]!.tail_offset;
    const ack = (acks: unknown[], done = false, token = claimed.token, generation = claimed.generation) =>
      post(sub(id, '/ack'), JSON.stringify({ wake_id: claimed.wake_id, generation, acks, done }), { ...JSON_TYPE, authorization: `Bearer ${token}` });
    const middle = String(Number(tail) - 1).padStart(20, '0');
    expect((await ack([{ stream: `${root}/s`, offset: middle }])).status).toBe(200);
    const backwards = await ack([{ stream: `${root}/s`, offset: '0'.repeat(20) }]);
    expect([backwards.status, errorCode(backwards), nestedCode(backwards)]).toEqual([409, 'INVALID_ACK_OFFSET', 'INVALID_OFFSET']);
    const beyond = await ack([{ stream: `${root}/s`, offset: String(Number(tail) + 1).padStart(20, '0') }]);
    expect(errorCode(beyond)).toBe('INVALID_ACK_OFFSET');
    expect(errorCode(await ack([{ stream: 'elsewhere', offset: tail }]))).toBe('INVALID_ACK_OFFSET');
    expect(errorCode(await ack([{ stream: `${root}/s`, offset: '-1' }]))).toBe('INVALID_ACK_OFFSET');
    expect([(await ack([null])).status, errorCode(await ack([null]))]).toEqual([400, 'BAD_REQUEST']);
    expect((await streamsOf(id))[0]!.acked_offset).toBe(middle);
    expect((await ack([{ stream: `${root}/s`, offset: middle }])).status).toBe(200);
    expect((await ack([{ stream: `${root}/s`, offset: tail }], true)).json).toEqual({ ok: true, next_wake: false });

    await appendJson(`${root}/s`, { n: 3 });
    const claim2 = (await post(sub(id, '/claim'), JSON.stringify({ worker: 'w2' }), JSON_TYPE)).json as typeof claimed;
    expect(claim2.generation).toBe(2);
    const oldToken = await ack([], false, claimed.token, 2);
    expect(errorCode(oldToken)).toBe('FENCED');
    const release = await post(sub(id, '/release'), JSON.stringify({ wake_id: claim2.wake_id, generation: 2 }), { ...JSON_TYPE, authorization: `Bearer ${claim2.token}` });
    expect(release.status).toBe(204);
    expect((await streamsOf(id))[0]!.acked_offset).toBe(tail);
    const claim3 = await post(sub(id, '/claim'), JSON.stringify({ worker: 'w3' }), JSON_TYPE);
    expect((claim3.json as typeof claimed).generation).toBe(3);
  });

  it('a lease that expires clears the holder and wakes again while work is pending', async () => {
    const id = unique('lease');
    const root = unique('leased');
    await createJson(`${root}-wake`);
    await putSub(id, { type: 'pull-wake', streams: [`${root}/s`], wake_stream: `${root}-wake`, lease_ttl_ms: 1000 });
    await createJson(`${root}/s`, '[1]');
    const first = (await post(sub(id, '/claim'), JSON.stringify({ worker: 'slow' }), JSON_TYPE)).json as { wake_id: string; generation: number; token: string };
    clock.advance(1_100); // past the lease's end
    const late = await post(sub(id, '/ack'), JSON.stringify({ wake_id: first.wake_id, generation: first.generation, acks: [], done: true }), {
      ...JSON_TYPE,
      authorization: `Bearer ${first.token}`,
    });
    expect(errorCode(late)).toBe('FENCED');
    let events: Array<{ generation: number }> = [];
    await eventually(async () => (events = (await get(stream(`${root}-wake`))).json as typeof events).some((e) => e.generation > first.generation), 3_000, 'a new wake');
    const next = (await post(sub(id, '/claim'), JSON.stringify({ worker: 'fresh' }), JSON_TYPE)).json as { generation: number };
    expect(next.generation).toBeGreaterThan(first.generation);
  });
});

describe('membership and deletion', () => {
  it('adds and removes explicit streams; a deleted stream leaves; a deleted subscription moves nothing', async () => {
    const id = unique('members');
    const root = unique('member');
    await createJson(`${root}-wake`);
    await putSub(id, { type: 'pull-wake', streams: [`${root}/a`], pattern: `${root}/g/*`, wake_stream: `${root}-wake` });
    await createJson(`${root}/g/x`, '[1]');
    expect((await post(sub(id, '/streams'), JSON.stringify({ streams: [`${root}/b`, `${root}/g/x`] }), JSON_TYPE)).status).toBe(204);
    expect((await streamsOf(id)).map((s) => [s.path, s.link_type])).toEqual([
      [`${root}/a`, 'explicit'],
      [`${root}/b`, 'explicit'],
      [`${root}/g/x`, 'explicit'],
    ]);
    expect((await del(sub(id, `/streams/${encodeURIComponent(`${root}/b`)}`))).status).toBe(204);
    expect((await del(sub(id, `/streams/${encodeURIComponent(`${root}/g/x`)}`))).status).toBe(204);
    expect((await streamsOf(id)).map((s) => [s.path, s.link_type])).toEqual([
      [`${root}/a`, 'explicit'],
      [`${root}/g/x`, 'glob'],
    ]);
    const claimed = (await post(sub(id, '/claim'), JSON.stringify({ worker: 'w' }), JSON_TYPE)).json as { wake_id: string; generation: number; token: string };
    expect((await del(stream(`${root}/g/x`))).status).toBe(204);
    expect((await streamsOf(id)).map((s) => s.path)).toEqual([`${root}/a`]);
    expect((await del(sub(id))).status).toBe(204);
    const after = await post(sub(id, '/ack'), JSON.stringify({ wake_id: claimed.wake_id, generation: claimed.generation, done: true }), {
      ...JSON_TYPE,
      authorization: `Bearer ${claimed.token}`,
    });
    expect([after.status, errorCode(after)]).toEqual([404, 'SUBSCRIPTION_NOT_FOUND']);
    expect(errorCode(await post(sub(id, '/streams'), JSON.stringify({ streams: ['x'] }), JSON_TYPE))).toBe('SUBSCRIPTION_NOT_FOUND');
  });

  it("a bucket's subscriptions live in it: patterns relative to it, and gone with it", async () => {
    const bucket = `subs-bucket-${n}`;
    expect((await put(`${server.url}/${bucket}`)).status).toBe(201);
    await put(`${server.url}/${bucket}/wake`, '[]', JSON_TYPE);
    await put(`${server.url}/${bucket}/orders-1`, '[1]', JSON_TYPE);
    await createJson(`orders-1`, '[1]');
    const url = `${server.url}/${bucket}/__ds/subscriptions/in-bucket`;
    expect((await put(url, JSON.stringify({ type: 'pull-wake', pattern: '*', wake_stream: 'wake' }), JSON_TYPE)).status).toBe(201);
    expect(((await get(url)).json as { streams: StreamView[] }).streams.map((s) => s.path)).toEqual(['orders-1']);
    expect(errorCode(await put(`${server.url}/no-such-bucket/__ds/subscriptions/x`, JSON.stringify({ type: 'pull-wake', pattern: '*', wake_stream: 'w' }), JSON_TYPE))).toBe('BUCKET_NOT_FOUND');
    for (const stream of ['wake', 'orders-1']) expect((await del(`${server.url}/${bucket}/${stream}`)).status).toBe(204);
    expect((await del(`${server.url}/${bucket}`)).status).toBe(204);
    expect((await put(`${server.url}/${bucket}`)).status).toBe(201);
    expect(errorCode(await get(url))).toBe('SUBSCRIPTION_NOT_FOUND');
  });

  it('limits streams per subscription (409) and answers bad membership requests with 400', async () => {
    const id = unique('full');
    await createJson('f-wake', '[]');
    await putSub(id, { type: 'pull-wake', streams: ['f/0'], wake_stream: 'f-wake' });
    const many = Array.from({ length: 20 }, (_, i) => `f/${i + 1}`);
    const full = await post(sub(id, '/streams'), JSON.stringify({ streams: many }), JSON_TYPE);
    expect([full.status, errorCode(full)]).toEqual([409, 'SUBSCRIPTION_FULL']);
    expect((await streamsOf(id)).length).toBe(1);
    expect(errorCode(await post(sub(id, '/streams'), JSON.stringify({ streams: [] }), JSON_TYPE))).toBe('BAD_REQUEST');
    expect(errorCode(await post(sub(id, '/claim'), JSON.stringify({ worker: 'w'.repeat(257) }), JSON_TYPE))).toBe('BAD_REQUEST');
    expect((await get(sub(id, '/claim'))).status).toBe(405);
  });

  it('answers a JSON body that is not an object (null, an array, a number) with 400 and the JSON error, on every route that takes one', async () => {
    const id = unique('hostile');
    await createJson('h-wake', '[]');
    await putSub(id, { type: 'pull-wake', streams: ['h/0'], wake_stream: 'h-wake' });
    for (const body of ['null', '[]', '7', '"x"']) {
      for (const [method, url] of [['PUT', sub(unique('hostile'))], ['POST', sub(id, '/streams')], ['POST', sub(id, '/claim')]] as const) {
        const reply = method === 'PUT' ? await put(url, body, JSON_TYPE) : await post(url, body, JSON_TYPE);
        expect([reply.status, errorCode(reply)], `${method} ${url} ${body}`).toEqual([400, 'BAD_REQUEST']);
      }
    }
    expect((await streamsOf(id)).map((s) => s.path)).toEqual(['h/0']);
  });
});
