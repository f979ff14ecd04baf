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

/** Returns the normal form, or `undefined` when the value is not a media type. */
export function normalizeContentType(raw: string): string | undefined {
  if (raw.length === 0 || raw.length > MAX_CONTENT_TYPE_LENGTH) return undefined;
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
