/**
 * Names in URLs. Bucket ids match `[a-z0-9_-]{4,64}`. A stream id in a bucket is one
 * segment of 1..122 bytes without `/`, `..`, NUL or other C0 and C1 controls, zero-width
 * or bidi-control characters; `streams`
 * (the bucket's listing) and `__ds` (its control routes) are reserved. A name in the
 * bucket-less `/v1/stream/{name}` family is 1..1024 bytes of such segments joined by
 * single `/` (`yjs/notes/docs/a/b/.snapshots/42_snapshot`); its first segment is not
 * `__ds`, and any other segment may be anything a segment may be, an extension keyword
 * included: that family addresses its extensions with the `ext` query parameter
 * (protocol/extensions.ts), never with a path segment. Subscription ids are 1..128 bytes
 * of `[A-Za-z0-9._~:-]`.
 *
 * Path affinity (Ursula's extensions, 1.7): `/{bucket}/{affinity_key}/{stream}` names a
 * stream whose id in its bucket is `{affinity_key}/{stream}`. Both segments follow the
 * stream id rule; the stream is not one of AFFINITY_RESERVED_IDS, and the whole
 * `{bucket}/{affinity_key}/{stream}` is at most 122 bytes.
 */

const BUCKET_ID = /^[a-z0-9_-]{4,64}$/;
export const MAX_STREAM_ID_BYTES = 122;
/**
 * Longest `/v1/stream` name. Generous on purpose: the Yjs provider of the Durable Streams
 * ecosystem builds `yjs/{service}/docs/{docId}/...` with doc ids of up to 256 characters,
 * and the reference server sets no limit of its own; 1024 bytes stays far below the URL
 * limit (`--max-url-bytes`, 8 KiB) and the key sizes the storage engines index well.
 */
export const MAX_V1_NAME_BYTES = 1024;
/** The segment that starts the control routes (`/v1/stream/__ds/...`, `/{bucket}/__ds/...`). */
export const CONTROL_SEGMENT = '__ds';
export const RESERVED_STREAM_IDS = new Set(['streams', CONTROL_SEGMENT]);

/**
 * Sub-resources of a stream: `{stream}/{extension}` in a bucket, `{name}?ext={extension}`
 * in the `/v1/stream` family.
 */
export const STREAM_EXTENSIONS = ['snapshot', 'retention', 'bootstrap', 'attrs', 'append-batch', 'stats', 'producers'] as const;
export type StreamExtension = (typeof STREAM_EXTENSIONS)[number];
const EXTENSION_SET: ReadonlySet<string> = new Set(STREAM_EXTENSIONS);

/** The group transaction of an affinity key: `/{bucket}/{affinity_key}/$transaction`. */
export const TRANSACTION_SEGMENT = '$transaction';
/** Reserved by Ursula for an affinity-level resource rill does not serve: refused, never a stream. */
export const KEYED_STATE_SEGMENT = 'keyed-state';
/**
 * Local stream ids no affinity stream may have: they name the affinity key's own
 * resources, or (the extension keywords) a sub-resource of the two-segment stream
 * `/{bucket}/{affinity_key}`, which is what such a third segment means.
 */
export const AFFINITY_RESERVED_IDS: ReadonlySet<string> = new Set([TRANSACTION_SEGMENT, KEYED_STATE_SEGMENT, ...STREAM_EXTENSIONS]);

export const MAX_SUBSCRIPTION_ID_BYTES = 128;
const SUBSCRIPTION_ID = new RegExp(`^[A-Za-z0-9._~:-]{1,${MAX_SUBSCRIPTION_ID_BYTES}}$`);

/** Subscription scopes: the `/v1/stream` family, or one bucket. */
export const V1_SCOPE = 'v1';
export function bucketScope(bucket: string): string {
  return `b/${bucket}`;
}

/** The bucket of a `b/{bucket}` scope; null for the `v1` scope. */
export function bucketOfScope(scope: string): string | null {
  return scope === V1_SCOPE ? null : scope.slice('b/'.length);
}

export function isValidBucketId(id: string): boolean {
  return BUCKET_ID.test(id);
}

export function isStreamExtension(segment: string): segment is StreamExtension {
  return EXTENSION_SET.has(segment);
}

/**
 * Characters no name may hold: C0 and C1 controls and DEL; zero-width characters (U+200B-
 * U+200D, U+2060, U+FEFF), which make two names that look the same; and bidi controls
 * (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), which make a name read in an
 * order other than its own in a listing, a log or a terminal.
 */
function isHiddenCharacter(code: number): boolean {
  if (code < 0x20 || (code >= 0x7f && code <= 0x9f)) return true;
  if (code < 0x61c) return false;
  if (code === 0x61c || (code >= 0x200b && code <= 0x200f) || (code >= 0x202a && code <= 0x202e)) return true;
  return code === 0x2060 || (code >= 0x2066 && code <= 0x2069) || code === 0xfeff;
}

/** The first character of `value` that no name may hold (see isHiddenCharacter), or null. */
function hiddenCharacterOf(value: string): number | null {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (isHiddenCharacter(code)) return code;
  }
  return null;
}

/** The refusal of a name holding a hidden character, naming it: `U+200B`. */
function hiddenCharacterProblem(code: number): string {
  const point = `U+${code.toString(16).toUpperCase().padStart(4, '0')}`;
  return `names may not hold control, zero-width or bidi-control characters (this one holds ${point})`;
}

/** One path segment: non-empty, not `.`, no `..` or `/` (hidden characters: segmentProblem). */
function isValidSegment(segment: string): boolean {
  return !(segment.length === 0 || segment === '.' || segment.includes('..') || segment.includes('/'));
}

/** Why one segment cannot be part of a name (`rule` for its shape), or null when it can. */
function segmentProblem(segment: string, rule: string): string | null {
  if (!isValidSegment(segment)) return rule;
  const hidden = hiddenCharacterOf(segment);
  return hidden === null ? null : hiddenCharacterProblem(hidden);
}

function withinLength(name: string, maxBytes = MAX_STREAM_ID_BYTES): boolean {
  // A string of n UTF-16 units is at most 3n UTF-8 bytes: most names skip the count.
  return name.length > 0 && (name.length * 3 <= maxBytes || Buffer.byteLength(name) <= maxBytes);
}

const STREAM_ID_RULE = `stream ids are 1 to ${MAX_STREAM_ID_BYTES} bytes without "/", control characters or ".."`;
const V1_NAME_RULE = `stream names are 1 to ${MAX_V1_NAME_BYTES} bytes of non-empty segments joined by "/", without control characters or ".."`;

/** Why `id` cannot name a stream in a bucket, or null when it can. */
export function streamIdProblem(id: string): string | null {
  const problem = withinLength(id) ? segmentProblem(id, STREAM_ID_RULE) : STREAM_ID_RULE;
  if (problem !== null) return problem;
  return RESERVED_STREAM_IDS.has(id) ? `"${id}" is reserved and cannot name a stream in a bucket` : null;
}

const AFFINITY_IDENTITY_RULE = `{bucket}/{affinity_key}/{stream} is at most ${MAX_STREAM_ID_BYTES} bytes`;

/** Why `key` cannot be an affinity key, or null when it can: the stream id rule, reserved names included. */
export function affinityKeyProblem(key: string): string | null {
  const problem = streamIdProblem(key);
  return problem === null ? null : `affinity key: ${problem}`;
}

/** Why `/{bucket}/{key}/{stream}` cannot name an affinity stream, or null when it can. */
export function affinityStreamProblem(bucket: string, key: string, stream: string): string | null {
  const problem = affinityKeyProblem(key) ?? streamIdProblem(stream);
  if (problem !== null) return problem;
  if (AFFINITY_RESERVED_IDS.has(stream)) return `"${stream}" is reserved and cannot name a stream under an affinity key`;
  return Buffer.byteLength(bucket) + Buffer.byteLength(key) + Buffer.byteLength(stream) + 2 > MAX_STREAM_ID_BYTES ? AFFINITY_IDENTITY_RULE : null;
}

/** The id in its bucket of the affinity stream `/{bucket}/{key}/{stream}`: listings show it, grants' prefixes match it. */
export function affinityStreamId(key: string, stream: string): string {
  return `${key}/${stream}`;
}

/**
 * Why `path` cannot name a stream of `bucket` relative to it (in a subscription: `{stream}`
 * or `{affinity_key}/{stream}`), or null when it can.
 */
export function bucketPathProblem(bucket: string, path: string): string | null {
  const slash = path.indexOf('/');
  if (slash < 0) return streamIdProblem(path);
  const stream = path.slice(slash + 1);
  if (stream.includes('/')) return `a stream of a bucket is {stream} or {affinity_key}/{stream}`;
  return affinityStreamProblem(bucket, path.slice(0, slash), stream);
}

/** Why `name` cannot name a stream of the `/v1/stream` family, or null when it can. */
export function v1NameProblem(name: string): string | null {
  return v1SegmentsProblem(name.split('/'), name);
}

/**
 * Why the segments of a URL (decoded, so one may hold `/` sent as `%2F`) cannot name a
 * stream of the `/v1/stream` family, or null when they can; `name` is them joined by `/`.
 */
export function v1SegmentsProblem(segments: readonly string[], name: string): string | null {
  if (!withinLength(name, MAX_V1_NAME_BYTES)) return V1_NAME_RULE;
  for (const segment of segments) {
    if (segment.includes('/')) return 'a stream name holds "/" as a path separator, never encoded as %2F';
    const problem = segmentProblem(segment, V1_NAME_RULE);
    if (problem !== null) return problem;
  }
  return segments[0] === CONTROL_SEGMENT ? `a stream name cannot start with "${CONTROL_SEGMENT}", which is reserved for control routes` : null;
}

export function isValidStreamId(id: string): boolean {
  return streamIdProblem(id) === null;
}

export function isValidV1Name(name: string): boolean {
  return v1NameProblem(name) === null;
}

/** Why `path` cannot name a stream in a subscription scope (`v1` or `b/{bucket}`), or null when it can. */
export function scopedPathProblem(scope: string, path: string): string | null {
  return scope === V1_SCOPE ? v1NameProblem(path) : bucketPathProblem(bucketOfScope(scope)!, path);
}

export function isValidSubscriptionId(id: string): boolean {
  return SUBSCRIPTION_ID.test(id);
}

/** Storage keys keep the two URL families apart: `{scope}/{name}`. */
export function bucketStreamKey(bucket: string, stream: string): string {
  return `${bucketScope(bucket)}/${stream}`;
}

export function v1StreamKey(name: string): string {
  return `${V1_SCOPE}/${name}`;
}

/**
 * A storage key's scope and path: `v1/a/b` -> `v1`, `a/b`; `b/{bucket}/{id}` -> `b/{bucket}`,
 * `{id}` (an affinity stream's id is `{affinity_key}/{stream}`).
 */
export function splitStreamKey(key: string): { scope: string; path: string } {
  if (key.startsWith(`${V1_SCOPE}/`)) return { scope: V1_SCOPE, path: key.slice(V1_SCOPE.length + 1) };
  const slash = key.indexOf('/', 'b/'.length);
  return { scope: key.slice(0, slash), path: key.slice(slash + 1) };
}
