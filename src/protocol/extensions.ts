/**
 * Reading `Stream-Extensions`, the list of extension tokens active for the stream an
 * answer is about (Ursula's "Durable Streams Extensions"). The client reads it before it
 * relies on any extension's parameters or headers; the server's table of the tokens it
 * grants is core/extensions.ts.
 */

/** The token of JSON record coordinates: ordinals of the messages of an `application/json` stream. */
export const JSON_RECORDS_TOKEN = 'json-record-coordinates-v1';

/** The tokens of a `Stream-Extensions` value (comma-separated, blanks around them dropped). */
export function extensionTokens(header: string | null | undefined): string[] {
  if (header === null || header === undefined) return [];
  return header
    .split(',')
    .map((token) => token.trim())
    .filter((token) => token !== '');
}

/**
 * The query parameter that addresses a stream extension in the `/v1/stream` family:
 * `{name}?ext=snapshot`, `{name}?ext=snapshot/{offset}`. A name there may end in any
 * segment (`yjs/app/docs/x/snapshot` is a stream), so no path segment can mean an
 * extension; a bucket's one-segment stream ids leave room for `{stream}/snapshot`.
 */
export const EXTENSION_PARAM = 'ext';

/** Whether a stream URL or path is of the `/v1/stream` family (a base URL may add a prefix). */
export function isV1StreamUrl(url: string): boolean {
  const pathname = /^https?:\/\//i.test(url) ? new URL(url).pathname : url;
  return pathname.includes('/v1/stream/');
}

/**
 * The URL of an extension of the stream at `streamUrl` (absolute, or a path):
 * `extension` is what follows the stream in a bucket (`snapshot/{offset}`, `attrs`), and
 * `query` (without `?`) the extension's own parameters (`record=4`).
 */
export function extensionUrl(streamUrl: string, extension: string, query = ''): string {
  if (isV1StreamUrl(streamUrl)) return `${streamUrl}?${EXTENSION_PARAM}=${extension}${query === '' ? '' : `&${query}`}`;
  return `${streamUrl}/${extension}${query === '' ? '' : `?${query}`}`;
}
