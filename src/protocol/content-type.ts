/**
 * Content-type normalisation. Two types are the same when their normal forms are equal:
 * type, subtype and parameter names are folded to lower case and white space around
 * separators is dropped, but parameters and their values are kept, so
 * `application/json; charset=utf-8` is not `application/json`.
 */

export const DEFAULT_CONTENT_TYPE = 'application/octet-stream';

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const QUOTED = /^"(?:[^"\\\r\n]|\\.)*"$/;
const MAX_CONTENT_TYPE_LENGTH = 256;

function normalizeParameter(part: string): string | undefined {
  const eq = part.indexOf('=');
  if (eq <= 0) return undefined;
  const name = part.slice(0, eq).trim().toLowerCase();
  const value = part.slice(eq + 1).trim();
  if (!TOKEN.test(name)) return undefined;
  if (!TOKEN.test(value) && !QUOTED.test(value)) return undefined;
  return `${name}=${value}`;
}

/**
 * Normal forms of recently seen values. Writers send the same few Content-Type values
 * on every append, and parsing one cost about 2% of an append's time on the event loop.
 * Bounded, since clients choose the values: past the limit it starts over.
 */
const normalCache = new Map<string, string | undefined>();
const NORMAL_CACHE_ENTRIES = 256;

/** Returns the normal form, or `undefined` when the value is not a media type. */
export function normalizeContentType(raw: string): string | undefined {
  if (raw.length === 0 || raw.length > MAX_CONTENT_TYPE_LENGTH) return undefined;
  const cached = normalCache.get(raw);
  if (cached !== undefined || normalCache.has(raw)) return cached;
  const normal = parseContentType(raw);
  if (normalCache.size >= NORMAL_CACHE_ENTRIES) normalCache.clear();
  normalCache.set(raw, normal);
  return normal;
}

function parseContentType(raw: string): string | undefined {
  const [essence, ...params] = raw.split(';');
  const slash = essence!.indexOf('/');
  if (slash <= 0) return undefined;
  const type = essence!.slice(0, slash).trim().toLowerCase();
  const subtype = essence!.slice(slash + 1).trim().toLowerCase();
  if (!TOKEN.test(type) || !TOKEN.test(subtype)) return undefined;
  const normalParams: string[] = [];
  for (const param of params) {
    if (param.trim() === '') continue;
    const normal = normalizeParameter(param);
    if (normal === undefined) return undefined;
    normalParams.push(normal);
  }
  return [`${type}/${subtype}`, ...normalParams].join('; ');
}

/** The `type/subtype` part of a normalised content type. */
export function mediaType(normalized: string): string {
  const semi = normalized.indexOf(';');
  return semi < 0 ? normalized : normalized.slice(0, semi);
}

/** JSON mode: messages are JSON values, a POSTed array is flattened one level. */
export function isJsonContentType(normalized: string): boolean {
  return mediaType(normalized) === 'application/json';
}

/**
 * Types whose bytes SSE sends as text. Everything else is sent base64-encoded, since an
 * SSE `data:` line cannot carry arbitrary bytes.
 */
export function isTextualContentType(normalized: string): boolean {
  const media = mediaType(normalized);
  return (
    media.startsWith('text/') ||
    media === 'application/json' ||
    media.endsWith('+json') ||
    media === 'application/ndjson' ||
    media === 'application/x-ndjson'
  );
}
