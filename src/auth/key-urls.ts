/**
 * What a key server URL (`--auth-jwks-url`, `--auth-oidc-issuer`) must be, apart from the
 * fetching (remote-keys.ts), so that `rill serve` checks its flags without loading jose.
 */

/** Why `value` cannot be a key server URL, or null: keys fetched in the clear could be anyone's. */
export function remoteKeysUrlProblem(value: string): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'is not a URL';
  }
  if (url.protocol !== 'https:') return 'must be an https:// URL: keys fetched over plain HTTP could be replaced on the way';
  if (url.username !== '' || url.password !== '') return 'must not carry a user name or password';
  return null;
}

/** Where an OpenID Connect issuer publishes its configuration (OpenID Connect Discovery 1.0, section 4). */
export function discoveryUrlOf(issuer: string): string {
  return `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
}
