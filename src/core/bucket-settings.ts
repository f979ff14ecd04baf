/**
 * Per-bucket settings an admin on `*` sets (`PATCH /{bucket}`): whether the bucket's
 * streams are readable without a token, and limits that replace the server-wide
 * --bucket-max-streams / --bucket-max-subscriptions / --bucket-max-bytes for this bucket.
 * Pure rules only: parsing a change, applying it, and what a bucket's settings mean.
 */
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import type { AccessTarget, Permission } from './access.js';
import type { BucketLimits, BucketState } from './bucket.js';
import { parseRetentionPolicy, type RetentionPolicy } from './retention-policy.js';

/** A limit override: null keeps the server-wide limit; 0 lifts the limit for this bucket. */
export interface BucketSettings {
  publicRead: boolean;
  limits: { maxStreams: number | null; maxSubscriptions: number | null; maxBytes: number | null };
  /** The retention policy of the bucket's streams that have none of their own; absent: none. */
  retention?: RetentionPolicy;
}

type LimitName = keyof BucketSettings['limits'];

export const DEFAULT_BUCKET_SETTINGS: BucketSettings = { publicRead: false, limits: { maxStreams: null, maxSubscriptions: null, maxBytes: null } };

/** The members a change names; the others keep their value. */
export interface BucketSettingsChange {
  publicRead?: boolean;
  limits?: { [name in LimitName]?: number | null };
  /** Null removes the default policy. */
  retention?: RetentionPolicy | null;
}

/** Ample for any deployment, and far from float precision: counts, and bytes (1 PiB). */
export const MAX_LIMIT_OVERRIDE: Record<LimitName, number> = { maxStreams: 1_000_000_000, maxSubscriptions: 1_000_000_000, maxBytes: 2 ** 50 };

function isLimitName(name: string): name is LimitName {
  return Object.hasOwn(MAX_LIMIT_OVERRIDE, name);
}

function invalid(message: string): { ok: false; error: ProtocolError } {
  return { ok: false, error: protocolError('INVALID_BUCKET_SETTINGS', message) };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A limit as a body may give it: null, or an integer from 0 (unlimited) to its MAX_LIMIT_OVERRIDE. */
function isLimitValue(name: LimitName, value: unknown): value is number | null {
  return value === null || (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= MAX_LIMIT_OVERRIDE[name]);
}

/**
 * Reads a change from a parsed JSON body, strictly: an unknown member is refused rather
 * than ignored, since a typo (`public_read`) would otherwise look accepted.
 */
export function parseBucketSettingsChange(body: unknown): { ok: true; change: BucketSettingsChange } | { ok: false; error: ProtocolError } {
  if (!isPlainObject(body)) return invalid('the body must be a JSON object');
  const change: BucketSettingsChange = {};
  for (const [key, value] of Object.entries(body)) {
    if (key === 'publicRead') {
      if (typeof value !== 'boolean') return invalid('publicRead must be true or false');
      change.publicRead = value;
    } else if (key === 'limits') {
      if (!isPlainObject(value)) return invalid('limits must be an object');
      const limits: NonNullable<BucketSettingsChange['limits']> = {};
      for (const [name, limit] of Object.entries(value)) {
        if (!isLimitName(name)) return invalid(`limits has no member ${JSON.stringify(name).slice(0, 80)}: they are maxStreams, maxSubscriptions and maxBytes`);
        if (!isLimitValue(name, limit)) return invalid(`limits.${name} must be null or an integer from 0 to ${MAX_LIMIT_OVERRIDE[name]}`);
        limits[name] = limit;
      }
      change.limits = limits;
    } else if (key === 'retention') {
      const policy = parseRetentionPolicy(value);
      if (!policy.ok) return invalid(`retention: ${policy.message}`);
      change.retention = policy.policy;
    } else {
      return invalid(`unknown member ${JSON.stringify(key).slice(0, 80)}: the settings are publicRead, limits and retention`);
    }
  }
  return { ok: true, change };
}

/** The settings once a change is applied. */
export function applyBucketSettingsChange(current: BucketSettings | undefined, change: BucketSettingsChange): BucketSettings {
  const base = current ?? DEFAULT_BUCKET_SETTINGS;
  const limit = (name: LimitName) => (change.limits?.[name] !== undefined ? change.limits[name] : base.limits[name]);
  const settings: BucketSettings = {
    publicRead: change.publicRead ?? base.publicRead,
    limits: { maxStreams: limit('maxStreams'), maxSubscriptions: limit('maxSubscriptions'), maxBytes: limit('maxBytes') },
  };
  // Absent rather than undefined, so that settings compare equal across engines.
  const retention = change.retention !== undefined ? change.retention : base.retention;
  if (retention) settings.retention = retention;
  return settings;
}

/** The limits in force in a bucket: its overrides, else the server-wide ones. */
export function effectiveBucketLimits(server: BucketLimits, settings: BucketSettings | undefined): BucketLimits {
  return {
    maxStreams: settings?.limits.maxStreams ?? server.maxStreams,
    maxSubscriptions: settings?.limits.maxSubscriptions ?? server.maxSubscriptions,
    maxBytes: settings?.limits.maxBytes ?? server.maxBytes,
  };
}

/**
 * Whether a request without a token is served: only a read (GET or HEAD needing the read
 * permission) of a stream, or of what only reading it needs (its snapshot, bootstrap,
 * attributes), in a bucket an admin made public. Listings, subscriptions and every write
 * still need a token.
 */
export function anonymousMayRead(settings: BucketSettings | undefined, method: string, need: Permission, target: AccessTarget['kind']): boolean {
  return settings?.publicRead === true && need === 'read' && target === 'stream' && (method === 'GET' || method === 'HEAD');
}

/**
 * Settings as stored (SQLite's JSON text, PostgreSQL's JSONB value): anything this rill
 * did not write reads as no settings, whose meaning is the safe one (not public).
 */
export function bucketSettingsFromStored(stored: unknown): BucketSettings | undefined {
  if (stored === null || stored === undefined) return undefined;
  let parsed: unknown = stored;
  if (typeof stored === 'string') {
    try {
      parsed = JSON.parse(stored);
    } catch {
      return undefined;
    }
  }
  const read = parseBucketSettingsChange(parsed);
  return read.ok ? applyBucketSettingsChange(undefined, read.change) : undefined;
}

/** A bucket with its stored settings, when it has any (absent rather than undefined, so views compare equal). */
export function withSettings<T extends BucketState>(bucket: T, stored: unknown): T {
  const settings = bucketSettingsFromStored(stored);
  return settings === undefined ? bucket : { ...bucket, settings };
}
