/**
 * Content types: normalisation, and the one rule deciding whether a request's type is a
 * stream's (contentTypesMatch). The normal form folds type, subtype and parameter names
 * to lower case and drops white space around separators; it keeps parameters and their
 * values, so a stream answers with the type it was created with.
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

/**
 * Types a browser runs or renders as a document with script when it opens them: HTML,
 * XML in all its dialects (SVG, XHTML, XSLT, feeds: XML may pull in script by namespace
 * or stylesheet), JavaScript (a page on the same origin could load a stream as its
 * script), PDF (its viewer runs script), Flash, and multipart types (some browsers show
 * each part as a document of its own type, which is why a bootstrap answer is one too). A stored body of one of these types is served
 * as a download, never opened on the server's origin, where the console keeps its token.
 */
const ACTIVE_MEDIA_TYPES = new Set([
  'text/html',
  'application/xhtml+xml',
  'text/xml',
  'application/xml',
  'text/xsl',
  'image/svg+xml',
  'application/javascript',
  'application/x-javascript',
  'application/ecmascript',
  'application/x-ecmascript',
  'text/javascript',
  'text/ecmascript',
  'text/x-javascript',
  'text/x-ecmascript',
  'text/jscript',
  'text/livescript',
  'application/pdf',
  'application/x-shockwave-flash',
]);

/** Whether a stored body of this type (normal form) is active content (ACTIVE_MEDIA_TYPES, any `+xml`, `multipart/`, `text/javascript1.x`). */
export function isActiveContentType(normalized: string): boolean {
  const media = mediaType(normalized);
  return ACTIVE_MEDIA_TYPES.has(media) || media.endsWith('+xml') || media.startsWith('multipart/') || media.startsWith('text/javascript1.');
}

/** The charset every client sends for text and JSON; naming it adds nothing (docs/decisions.md, "Content-type matching"). */
const DEFAULT_CHARSET = 'utf-8';

function unquote(value: string): string {
  return value.startsWith('"') ? value.slice(1, -1).replace(/\\(.)/g, '$1') : value;
}

/**
 * What matching compares: the media type, then the parameters sorted by name with
 * their values unquoted; a charset's value folded to lower case, and `charset=utf-8`
 * left out, since it is what a type without a charset means. Takes a normal form.
 */
function matchKey(normalized: string): string {
  const [media, ...params] = normalized.split('; ');
  const kept: string[] = [];
  for (const param of params) {
    const eq = param.indexOf('=');
    const name = param.slice(0, eq);
    let value = unquote(param.slice(eq + 1));
    if (name === 'charset') value = value.toLowerCase();
    if (name === 'charset' && value === DEFAULT_CHARSET) continue;
    kept.push(`${name}=${value}`);
  }
  return [media, ...kept.sort()].join('; ');
}

/**
 * Whether a request's content type (normal form) is a stream's (normal form): the same
 * media type and the same parameters, where a charset of UTF-8 (any case, quoted or not)
 * is the same as no charset. Any other difference (another charset, another parameter,
 * another value) does not match. Appends, creates, forks and batches all ask this.
 */
export function contentTypesMatch(request: string, stream: string): boolean {
  if (request === stream) return true;
  if (mediaType(request) !== mediaType(stream)) return false;
  return matchKey(request) === matchKey(stream);
}
