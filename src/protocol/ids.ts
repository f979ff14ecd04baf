/**
 * Names in URLs. Bucket ids match `[a-z0-9_-]{4,64}`. Stream ids are 1..122 bytes
 * without `/`, NUL, other control characters or `..`; `streams` is reserved because
 * `/{bucket}/streams` lists a bucket. Names in the bucket-less `/v1/stream/{name}`
 * family follow the stream-id rule too (without the reservation), so that extension
 * routes such as `{stream}/snapshot` can never be mistaken for a stream name.
 */

const BUCKET_ID = /^[a-z0-9_-]{4,64}$/;
export const MAX_STREAM_ID_BYTES = 122;
export const RESERVED_STREAM_IDS = new Set(['streams']);

export function isValidBucketId(id: string): boolean {
  return BUCKET_ID.test(id);
}

function hasControlCharacter(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code < 0x20 || code === 0x7f) return true;
  }
  return false;
}

function isValidSegment(id: string): boolean {
  if (id.length === 0 || Buffer.byteLength(id) > MAX_STREAM_ID_BYTES) return false;
  if (id === '.' || id.includes('..') || id.includes('/')) return false;
  return !hasControlCharacter(id);
}

export function isValidStreamId(id: string): boolean {
  return isValidSegment(id) && !RESERVED_STREAM_IDS.has(id);
}

export function isValidV1Name(name: string): boolean {
  return isValidSegment(name);
}

/** Storage keys keep the two URL families apart. */
export function bucketStreamKey(bucket: string, stream: string): string {
  return `b/${bucket}/${stream}`;
}

export function v1StreamKey(name: string): string {
  return `v1/${name}`;
}
