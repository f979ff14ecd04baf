/**
 * The quota rules without a server: what a write costs (messagesOf), and the appends
 * bucket taking messages at instants the test passes in.
 */
import { describe, expect, it } from 'vitest';
import { bucketBytesRefusal, bucketLimitRefusal, bucketLimitsView } from '../../src/core/bucket.js';
import { messagesOf, NO_QUOTAS, Quotas } from '../../src/auth/quota.js';

const text = (body: string) => ({ json: false, data: Buffer.from(body) });
/** Framed JSON: one message a line, as frameJson stores it. */
const json = (...messages: string[]) => ({ json: true, data: Buffer.from(messages.map((m) => `${m}\n`).join('')) });

describe('messagesOf', () => {
  it('counts a JSON payload by its messages, any other payload as one, and a write of none (a close) as one', () => {
    expect(messagesOf([text('a whole body')])).toBe(1);
    expect(messagesOf([json('1', '{"a":2}', '[3]')])).toBe(3);
    expect(messagesOf([text('a'), text('b'), json('1', '2')])).toBe(4);
    expect(messagesOf([{ json: true, data: Buffer.alloc(0) }])).toBe(1);
    expect(messagesOf([{ json: false, data: Buffer.alloc(0) }])).toBe(1);
  });
});

describe('Quotas.takeMessages', () => {
  const T0 = 1_000_000;
  const quotas = () => new Quotas({ ...NO_QUOTAS, appendsPerSecond: 10 });

  it('takes what fits, refuses what does not with a wait, and takes nothing when it refuses', () => {
    const q = quotas();
    expect(q.takeMessages('s', 7, T0)).toBeNull();
    const refused = q.takeMessages('s', 4, T0);
    expect(refused?.code).toBe('RATE_LIMITED');
    // One message short: a tenth of a second, rounded up to the whole second Retry-After says.
    expect(refused?.fields?.retryAfterSeconds).toBe(1);
    expect(q.takeMessages('s', 3, T0)).toBeNull();
    expect(q.takeMessages('s', 1, T0)?.code).toBe('RATE_LIMITED');
    expect(q.takeMessages('s', 1, T0 + 100)).toBeNull();
    expect(q.takeMessages('other', 10, T0)).toBeNull();
  });

  it('refuses for good a request over the whole quota, even from a full bucket', () => {
    const q = quotas();
    const refused = q.takeMessages('s', 11, T0);
    expect(refused?.code).toBe('REQUEST_OVER_QUOTA');
    expect(refused?.fields?.retryAfterSeconds).toBeUndefined();
    expect(q.takeMessages('s', 10, T0)).toBeNull();
  });

  it('charges nothing without a quota on appends', () => {
    expect(new Quotas(NO_QUOTAS).takeMessages('s', 1_000_000, T0)).toBeNull();
  });
});

describe('bucketLimitRefusal', () => {
  it('refuses at the limit, not below it, and never when the limit is 0', () => {
    const limits = { maxStreams: 2, maxSubscriptions: 1, maxBytes: 0 };
    expect(bucketLimitRefusal('streams', 1, limits)).toBeNull();
    expect(bucketLimitRefusal('streams', 2, limits)?.code).toBe('BUCKET_STREAM_LIMIT');
    expect(bucketLimitRefusal('subscriptions', 0, limits)).toBeNull();
    expect(bucketLimitRefusal('subscriptions', 1, limits)?.code).toBe('BUCKET_SUBSCRIPTION_LIMIT');
    expect(bucketLimitRefusal('streams', 1_000_000, { maxStreams: 0, maxSubscriptions: 0, maxBytes: 0 })).toBeNull();
    expect(bucketLimitsView({ maxStreams: 2, maxSubscriptions: 0, maxBytes: 0 })).toEqual({ maxStreams: 2, maxSubscriptions: null, maxBytes: null });
  });
});

describe('bucketBytesRefusal', () => {
  it('refuses a write that would take the bucket past its bytes, whole; never one that fits exactly, adds nothing, or meets no limit', () => {
    const limits = { maxStreams: 0, maxSubscriptions: 0, maxBytes: 100 };
    expect(bucketBytesRefusal(60, 40, limits)).toBeNull();
    const refused = bucketBytesRefusal(60, 41, limits);
    expect(refused?.code).toBe('BUCKET_BYTES_LIMIT');
    expect(refused?.message).toContain('holds 60 and this write adds 41');
    expect(bucketBytesRefusal(500, 0, limits)).toBeNull();
    expect(bucketBytesRefusal(0, 101, limits)?.code).toBe('BUCKET_BYTES_LIMIT');
    expect(bucketBytesRefusal(2 ** 40, 2 ** 40, { ...limits, maxBytes: 0 })).toBeNull();
    expect(bucketLimitsView(limits)).toEqual({ maxStreams: null, maxSubscriptions: null, maxBytes: 100 });
  });
});
