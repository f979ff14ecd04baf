/**
 * The bucket settings rules: a change is read strictly and merges into the stored settings,
 * a bucket's limits replace the server-wide ones member by member, and only a tokenless
 * GET or HEAD reading a stream of a public bucket is served.
 */
import { describe, expect, it } from 'vitest';
import {
  anonymousMayRead,
  applyBucketSettingsChange,
  bucketSettingsFromStored,
  DEFAULT_BUCKET_SETTINGS,
  effectiveBucketLimits,
  parseBucketSettingsChange,
  type BucketSettings,
} from '../../src/core/bucket-settings.js';

const PUBLIC: BucketSettings = { publicRead: true, limits: { maxStreams: null, maxSubscriptions: null, maxBytes: null } };

describe('parseBucketSettingsChange', () => {
  it('takes exactly publicRead and limits.{maxStreams,maxSubscriptions,maxBytes}', () => {
    expect(parseBucketSettingsChange({})).toEqual({ ok: true, change: {} });
    // A bytes limit goes past the counts' bound, up to 1 PiB.
    expect(parseBucketSettingsChange({ limits: { maxBytes: 2 ** 40 } })).toEqual({ ok: true, change: { limits: { maxBytes: 2 ** 40 } } });
    expect(parseBucketSettingsChange({ limits: { maxStreams: 2 ** 40 } }).ok).toBe(false);
    expect(parseBucketSettingsChange({ publicRead: false, limits: { maxStreams: 0, maxSubscriptions: null } })).toEqual({
      ok: true,
      change: { publicRead: false, limits: { maxStreams: 0, maxSubscriptions: null } },
    });
    for (const body of [null, 3, 'x', [], { publicRead: 1 }, { other: true }, { limits: null }, { limits: { maxStreams: -1 } }, { limits: { maxStreams: 2 ** 53 } }, { limits: { maxBytes: 2 ** 51 } }, { limits: { maxBytes: 1.5 } }, { limits: { max: 1 } }]) {
      const read = parseBucketSettingsChange(body);
      expect(read.ok, JSON.stringify(body)).toBe(false);
      if (!read.ok) expect(read.error.code).toBe('INVALID_BUCKET_SETTINGS');
    }
  });
});

describe('applyBucketSettingsChange and effectiveBucketLimits', () => {
  it('changes only what a change names; null falls back to the server-wide limit, 0 lifts it', () => {
    const once = applyBucketSettingsChange(undefined, { limits: { maxStreams: 4 } });
    expect(once).toEqual({ publicRead: false, limits: { maxStreams: 4, maxSubscriptions: null, maxBytes: null } });
    const twice = applyBucketSettingsChange(once, { publicRead: true, limits: { maxSubscriptions: 0, maxBytes: 5000 } });
    expect(twice).toEqual({ publicRead: true, limits: { maxStreams: 4, maxSubscriptions: 0, maxBytes: 5000 } });
    const server = { maxStreams: 100, maxSubscriptions: 9, maxBytes: 1_000_000 };
    expect(effectiveBucketLimits(server, undefined)).toEqual(server);
    expect(effectiveBucketLimits(server, twice)).toEqual({ maxStreams: 4, maxSubscriptions: 0, maxBytes: 5000 });
    const back = applyBucketSettingsChange(twice, { limits: { maxStreams: null, maxBytes: null } });
    expect(effectiveBucketLimits(server, back)).toEqual({ maxStreams: 100, maxSubscriptions: 0, maxBytes: 1_000_000 });
  });
});

describe('anonymousMayRead', () => {
  it('serves only GET and HEAD needing read, on a stream, of a public bucket', () => {
    expect(anonymousMayRead(PUBLIC, 'GET', 'read', 'stream')).toBe(true);
    expect(anonymousMayRead(PUBLIC, 'HEAD', 'read', 'stream')).toBe(true);
    expect(anonymousMayRead(PUBLIC, 'POST', 'write', 'stream')).toBe(false);
    expect(anonymousMayRead(PUBLIC, 'GET', 'manage', 'stream')).toBe(false);
    expect(anonymousMayRead(PUBLIC, 'OPTIONS', 'read', 'stream')).toBe(false);
    expect(anonymousMayRead(PUBLIC, 'GET', 'read', 'listing')).toBe(false);
    expect(anonymousMayRead(PUBLIC, 'GET', 'read', 'bucket')).toBe(false);
    expect(anonymousMayRead(DEFAULT_BUCKET_SETTINGS, 'GET', 'read', 'stream')).toBe(false);
    expect(anonymousMayRead(undefined, 'GET', 'read', 'stream')).toBe(false);
  });

  it('reads stored settings it cannot make sense of as none, so never as public', () => {
    expect(bucketSettingsFromStored('{"publicRead":true}')).toEqual(PUBLIC);
    expect(bucketSettingsFromStored({ publicRead: true })).toEqual(PUBLIC);
    // Stored before bytes limits existed: no bytes override.
    expect(bucketSettingsFromStored('{"publicRead":false,"limits":{"maxStreams":3,"maxSubscriptions":null}}')?.limits).toEqual({ maxStreams: 3, maxSubscriptions: null, maxBytes: null });
    for (const stored of [null, undefined, '', '{', '"x"', { publicRead: 'true' }, { publicRead: true, extra: 1 }]) {
      expect(bucketSettingsFromStored(stored), JSON.stringify(stored)).toBeUndefined();
    }
  });
});
