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
