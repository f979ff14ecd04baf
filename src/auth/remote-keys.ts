/**
 * Public keys fetched over HTTPS: a JWK Set at a URL (`--auth-jwks-url`), or the one an
 * OpenID Connect issuer names in its discovery document (`--auth-oidc-issuer`). `jose`'s
 * remote key set does the caching (refetched after `maxAgeMs`, and when a token names an
 * unknown `kid`, at most once per `cooldownMs`); what it fetches goes through a fetch of
 * our own, which bounds the wait and the size of the answer, since a key server that
 * stalls or streams without end must not hold requests or memory.
 */
import { createRemoteJWKSet, customFetch, type JWTVerifyGetKey } from 'jose';
import { discoveryUrlOf, remoteKeysUrlProblem } from './key-urls.js';

/** Longest answer accepted from a key server: a JWK Set of dozens of RSA keys is a few tens of KiB. */
export const MAX_REMOTE_KEYS_BYTES = 256 * 1024;
/** Longest wait for a key server's whole answer. */
export const REMOTE_KEYS_TIMEOUT_MS = 5_000;

/**
 * The key server could not be asked or answered something unusable: a fault of the
 * server side, not of the token, so the request is answered 503 and may be retried.
 */
export class KeySetUnavailable extends Error {}

/**
 * The JWK Set URL of a discovery document, or why it names none usable. The document must
 * name the issuer asked for (section 4.3): another one's keys would make its tokens ours.
 */
export function jwksUriOf(document: unknown, issuer: string): { ok: true; url: string } | { ok: false; reason: string } {
  if (typeof document !== 'object' || document === null) return { ok: false, reason: 'the discovery document is not a JSON object' };
  const { issuer: named, jwks_uri: jwksUri } = document as Record<string, unknown>;
  if (named !== issuer) return { ok: false, reason: `the discovery document names the issuer ${JSON.stringify(named)}, not ${JSON.stringify(issuer)}` };
  if (typeof jwksUri !== 'string') return { ok: false, reason: 'the discovery document has no jwks_uri' };
  const problem = remoteKeysUrlProblem(jwksUri);
  return problem === null ? { ok: true, url: jwksUri } : { ok: false, reason: `its jwks_uri ${jwksUri} ${problem}` };
}

/** Reads a body to its end, refusing it past `maxBytes` (whatever Content-Length said). */
async function boundedText(response: Response, maxBytes: number): Promise<string> {
  const declared = Number(response.headers.get('content-length') ?? 0);
  if (declared > maxBytes) throw new KeySetUnavailable(`the answer is ${declared} bytes, more than ${maxBytes}`);
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = response.body?.getReader();
  for (let read = await reader?.read(); read && !read.done; read = await reader!.read()) {
    size += read.value.byteLength;
    if (size > maxBytes) {
      await reader!.cancel();
      throw new KeySetUnavailable(`the answer is more than ${maxBytes} bytes`);
    }
    chunks.push(read.value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Fetches `url` as JSON text: 200 only (no redirects followed, as jose asks), within
 * `timeoutMs` and `maxBytes`. Every failure is a KeySetUnavailable naming the URL.
 */
export async function fetchKeyServer(url: string, init: RequestInit, limits: { timeoutMs: number; maxBytes: number }): Promise<string> {
  const signal = AbortSignal.any([AbortSignal.timeout(limits.timeoutMs), ...(init.signal ? [init.signal] : [])]);
  try {
    const response = await fetch(url, { ...init, redirect: 'manual', signal });
    if (response.status !== 200) throw new KeySetUnavailable(`it answered HTTP ${response.status}`);
    const text = await boundedText(response, limits.maxBytes);
    JSON.parse(text);
    return text;
  } catch (error) {
    const reason = error instanceof KeySetUnavailable ? error.message : signal.aborted ? `no answer within ${limits.timeoutMs} ms` : error instanceof SyntaxError ? 'the answer is not JSON' : causeOf(error);
    throw new KeySetUnavailable(`${url}: ${reason}`);
  }
}

/** A fetch failure's reason: Node's fetch says "fetch failed" and keeps the reason (refused, certificate) in `cause`. */
function causeOf(error: unknown): string {
  const cause = (error as { cause?: { message?: string } }).cause;
  return cause?.message ?? (error as Error).message;
}

export interface RemoteKeysOptions {
  /** The JWK Set URL, or null with `issuer`. */
  jwksUrl: string | null;
  /** An OpenID Connect issuer whose discovery document names the JWK Set; null with `jwksUrl`. */
  issuer: string | null;
  /** Shortest time between two fetches made for an unknown `kid`. */
  cooldownMs: number;
  /** Age after which the set is fetched again before use. */
  maxAgeMs: number;
  timeoutMs: number;
  maxBytes: number;
  /** Called when a fetch brings a set different from the one before (a rotation). */
  onChange: () => void;
}

/** The remote key set of `jwksUrl`, fetched through fetchKeyServer; reports a changed set to `onChange`. */
function remoteKeySet(jwksUrl: string, options: RemoteKeysOptions): JWTVerifyGetKey {
  let last: string | null = null;
  const limits = { timeoutMs: options.timeoutMs, maxBytes: options.maxBytes };
  const fetchSet = async (url: string, init: RequestInit): Promise<Response> => {
    const text = await fetchKeyServer(url, init, limits);
    if (last !== null && text !== last) options.onChange();
    last = text;
    return new Response(text, { status: 200, headers: { 'content-type': 'application/json' } });
  };
  return createRemoteJWKSet(new URL(jwksUrl), {
    // jose's own timeout is the outer bound; ours (the same) also covers reading the body.
    timeoutDuration: options.timeoutMs,
    cooldownDuration: options.cooldownMs,
    cacheMaxAge: options.maxAgeMs,
    [customFetch]: fetchSet,
  });
}

/**
 * The keys of `--auth-jwks-url` or `--auth-oidc-issuer`. An issuer's discovery document is
 * fetched on first use, not at startup (a server must start while its identity provider is
 * down), and again on the next token after a failure.
 */
export function createRemoteKeys(options: RemoteKeysOptions): JWTVerifyGetKey {
  if (options.jwksUrl !== null) return remoteKeySet(options.jwksUrl, options);
  const issuer = options.issuer!;
  let discovered: Promise<JWTVerifyGetKey> | null = null;
  const discover = async (): Promise<JWTVerifyGetKey> => {
    const text = await fetchKeyServer(discoveryUrlOf(issuer), { headers: { accept: 'application/json' } }, { timeoutMs: options.timeoutMs, maxBytes: options.maxBytes });
    const found = jwksUriOf(JSON.parse(text), issuer);
    if (!found.ok) throw new KeySetUnavailable(`${discoveryUrlOf(issuer)}: ${found.reason}`);
    return remoteKeySet(found.url, options);
  };
  return async (header, token) => {
    const pending = (discovered ??= discover());
    const keys = await pending.catch((error: unknown) => {
      // Only the failed attempt is dropped, not one a later token has started since.
      if (discovered === pending) discovered = null;
      throw error;
    });
    return keys(header, token);
  };
}
