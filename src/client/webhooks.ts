/**
 * The receiving end of webhook subscriptions: verify a delivery's `Webhook-Signature`
 * (Ed25519 over `"<t>.<raw body>"`, the key chosen by `kid` from the server's JWK Set),
 * parse the wake notification, let the application process it, and answer or call back.
 *
 * Web-standard APIs only (`crypto.subtle`, `atob`, `TextEncoder`), so it runs in Node.js
 * 20+, Deno, Bun, workers and browsers alike.
 */
import { Transport, type FetchLike } from './http.js';
import { RillError, WakeFencedError } from './errors.js';
import { ackBody, postWithWakeToken, streamInfoOf, type Ack, type SubscriptionStreamInfo, type WebhookJwk, type WebhookJwks } from './subscriptions.js';

export type WebhookVerification =
  | { valid: true; kid: string; timestampSeconds: number }
  | { valid: false; reason: 'malformed' | 'stale' | 'unknown-kid' | 'bad-signature' | 'wrong-subscription' };

export interface VerifyOptions {
  /** How far the signature's time may be from now (default 300 s), against replays. */
  toleranceSeconds?: number;
  /** The time to judge against (default Date.now()). */
  nowMs?: number;
  /**
   * The subscription this endpoint serves: a delivery whose body names another is refused
   * ('wrong-subscription'). Every subscription of a server is signed with the same keys,
   * so without it a delivery meant for another subscription's endpoint verifies here too.
   */
  subscriptionId?: string;
}

export const DEFAULT_TOLERANCE_SECONDS = 300;
const encoder = new TextEncoder();

interface SignatureParts {
  timestamp: string;
  kid: string;
  signatures: string[];
}

/** `t=<unix seconds>,kid=<kid>,ed25519=<base64url>` (more than one ed25519 value allowed). */
function parseSignatureHeader(header: string): SignatureParts | undefined {
  let timestamp: string | undefined;
  let kid: string | undefined;
  const signatures: string[] = [];
  for (const part of header.split(',')) {
    const at = part.indexOf('=');
    if (at <= 0) return undefined;
    const key = part.slice(0, at).trim();
    const value = part.slice(at + 1).trim();
    if (key === 't' && /^\d{1,12}$/.test(value)) timestamp = value;
    else if (key === 'kid' && value.length > 0) kid = value;
    else if (key === 'ed25519' && /^[A-Za-z0-9_-]+$/.test(value)) signatures.push(value);
  }
  if (timestamp === undefined || kid === undefined || signatures.length === 0) return undefined;
  return { timestamp, kid, signatures };
}

function base64UrlBytes(text: string): Uint8Array<ArrayBuffer> {
  const base64 = text.replace(/-/g, '+').replace(/_/g, '/').padEnd(Math.ceil(text.length / 4) * 4, '=');
  const binary = atob(base64);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** The signed bytes: the timestamp, a dot, and the body exactly as received. */
function signedBytes(timestamp: string, rawBody: string | Uint8Array): Uint8Array<ArrayBuffer> {
  const head = encoder.encode(`${timestamp}.`);
  const body = typeof rawBody === 'string' ? encoder.encode(rawBody) : rawBody;
  const out = new Uint8Array(head.length + body.length);
  out.set(head);
  out.set(body, head.length);
  return out;
}

async function verifyWith(jwk: WebhookJwk, signature: string, data: Uint8Array<ArrayBuffer>): Promise<boolean> {
  try {
    const key = await crypto.subtle.importKey('jwk', { kty: 'OKP', crv: 'Ed25519', x: jwk.x }, { name: 'Ed25519' }, false, ['verify']);
    return await crypto.subtle.verify({ name: 'Ed25519' }, key, base64UrlBytes(signature), data);
  } catch {
    return false; // a key that is not Ed25519, or a signature that is not base64url of the right length
  }
}

/**
 * Checks a delivery's signature against a JWK Set. Pass the body exactly as it arrived
 * (bytes, or the string they decode to): re-serialised JSON does not verify.
 */
export async function verifyWebhook(rawBody: string | Uint8Array, signatureHeader: string | null | undefined, jwks: WebhookJwks, options: VerifyOptions = {}): Promise<WebhookVerification> {
  const parts = signatureHeader ? parseSignatureHeader(signatureHeader) : undefined;
  if (parts === undefined) return { valid: false, reason: 'malformed' };
  const timestampSeconds = Number(parts.timestamp);
  const nowSeconds = Math.floor((options.nowMs ?? Date.now()) / 1000);
  if (Math.abs(nowSeconds - timestampSeconds) > (options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS)) return { valid: false, reason: 'stale' };
  const jwk = jwks.keys.find((key) => key.kid === parts.kid);
  if (jwk === undefined) return { valid: false, reason: 'unknown-kid' };
  const data = signedBytes(parts.timestamp, rawBody);
  for (const signature of parts.signatures) {
    if (!(await verifyWith(jwk, signature, data))) continue;
    if (options.subscriptionId !== undefined && subscriptionIdOf(rawBody) !== options.subscriptionId) return { valid: false, reason: 'wrong-subscription' };
    return { valid: true, kid: parts.kid, timestampSeconds };
  }
  return { valid: false, reason: 'bad-signature' };
}

/** The `subscription_id` of a delivery's body, or undefined when it has none. */
function subscriptionIdOf(rawBody: string | Uint8Array): string | undefined {
  try {
    const body = JSON.parse(typeof rawBody === 'string' ? rawBody : new TextDecoder().decode(rawBody)) as { subscription_id?: unknown } | null;
    return typeof body?.subscription_id === 'string' ? body.subscription_id : undefined;
  } catch {
    return undefined;
  }
}

export interface JwksCacheOptions {
  /** Refetch for an unknown kid at most this often (default 30 s), so junk kids cannot hammer the server. */
  minRefetchIntervalMs?: number;
  /** fetch for a URL source. */
  fetch?: FetchLike;
  /** The clock (default Date.now). */
  nowMs?: () => number;
}

/**
 * The server's JWK Set, fetched once and again when a delivery names a kid it does not
 * hold (the server rotated its key), at most once per `minRefetchIntervalMs`.
 */
export class WebhookJwksCache {
  /** @internal */ private readonly load: () => Promise<WebhookJwks>;
  /** @internal */ private readonly minRefetchIntervalMs: number;
  /** @internal */ private readonly now: () => number;
  /** @internal */ private current: Promise<WebhookJwks> | undefined;
  /** @internal */ private fetchedAtMs = -Infinity;
  /** Fetches made so far. */
  fetches = 0;

  /** `source`: the JWK Set's URL (a subscription's `webhook.signing.jwksUrl`) or a function such as `() => subs.jwks()`. */
  constructor(source: string | (() => Promise<WebhookJwks>), options: JwksCacheOptions = {}) {
    if (typeof source === 'string') {
      const transport = new Transport(options.fetch ? { fetch: options.fetch } : {});
      this.load = () => fetchJwks(transport, source);
    } else {
      this.load = source;
    }
    this.minRefetchIntervalMs = options.minRefetchIntervalMs ?? 30_000;
    this.now = options.nowMs ?? Date.now;
  }

  /** The cached set, fetched on first use (a failed fetch is tried again next time). */
  keys(): Promise<WebhookJwks> {
    return this.current ?? this.refetch();
  }

  /** Verifies with the cached keys; an unknown kid refetches them once (rate-limited) and tries again. */
  async verify(rawBody: string | Uint8Array, signatureHeader: string | null | undefined, options: VerifyOptions = {}): Promise<WebhookVerification> {
    const first = await verifyWebhook(rawBody, signatureHeader, await this.keys(), options);
    if (first.valid || first.reason !== 'unknown-kid' || this.now() - this.fetchedAtMs < this.minRefetchIntervalMs) return first;
    return verifyWebhook(rawBody, signatureHeader, await this.refetch(), options);
  }

  /** @internal */ private refetch(): Promise<WebhookJwks> {
    this.fetchedAtMs = this.now();
    this.fetches += 1;
    const loading = this.load();
    this.current = loading;
    loading.catch(() => {
      if (this.current === loading) this.current = undefined;
    });
    return loading;
  }
}

async function fetchJwks(transport: Transport, url: string): Promise<WebhookJwks> {
  const res = await transport.request(url, { method: 'GET' });
  if (res.status !== 200) throw new RillError({ code: 'UNEXPECTED_RESPONSE', message: `GET ${url} answered ${res.status}`, status: res.status });
  const body = JSON.parse(new TextDecoder().decode(res.body)) as WebhookJwks;
  if (!Array.isArray(body.keys)) throw new RillError({ code: 'UNEXPECTED_RESPONSE', message: `${url} is not a JWK Set` });
  return body;
}

/** What a webhook delivery carries. */
export interface WakeNotification {
  subscriptionId: string;
  wakeId: string;
  generation: number;
  /** The streams with pending work, with their cursors and tails. */
  streams: SubscriptionStreamInfo[];
  callbackUrl: string;
  callbackToken: string;
}

/** What the application did with a wake. */
export interface WakeOutcome {
  /** Cursor moves to send in a callback; without them, `done` answers `{"done": true}`, which acks the whole snapshot. */
  acks?: Ack[];
  /** End the wake (default true). False: the application calls back later itself. */
  done?: boolean;
}

/** The HTTP answer for the server's delivery. */
export interface WakeResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export interface WakeHandlerOptions extends VerifyOptions {
  /** The server's keys: a cache (refetched on an unknown kid) or a fixed set. */
  jwks: WebhookJwksCache | WebhookJwks;
  /** Handles the wake; a throw answers 500, so the server delivers it again later. */
  handle: (wake: WakeNotification) => Promise<WakeOutcome | void> | WakeOutcome | void;
  /** Carries the callback (default: a transport over the global fetch). */
  transport?: Transport;
}

function answer(status: number, body: unknown): WakeResponse {
  return { status, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
}

/** The notification in a delivery's body, or undefined when it is not one. */
export function parseWakeNotification(rawBody: string | Uint8Array): WakeNotification | undefined {
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(typeof rawBody === 'string' ? rawBody : new TextDecoder().decode(rawBody)) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  const { subscription_id, wake_id, generation, streams, callback_url, callback_token } = body ?? {};
  if (typeof subscription_id !== 'string' || typeof wake_id !== 'string' || typeof generation !== 'number') return undefined;
  if (typeof callback_url !== 'string' || typeof callback_token !== 'string' || !Array.isArray(streams)) return undefined;
  return { subscriptionId: subscription_id, wakeId: wake_id, generation, streams: streams.map(streamInfoOf), callbackUrl: callback_url, callbackToken: callback_token };
}

/**
 * One webhook delivery, from raw body to HTTP answer: 401 when the signature does not
 * verify (503 when the keys cannot be fetched), 400 when the body is no wake, 500 when
 * `handle` throws (the server retries),
 * else 200 — `{"done": true}` when the outcome has no acks (the server acks the wake's
 * snapshot), or, with acks, after the callback that sends them succeeded.
 */
export async function handleWakeRequest(request: { body: string | Uint8Array; signature: string | null | undefined }, options: WakeHandlerOptions): Promise<WakeResponse> {
  let verification: WebhookVerification;
  try {
    verification =
      options.jwks instanceof WebhookJwksCache ? await options.jwks.verify(request.body, request.signature, options) : await verifyWebhook(request.body, request.signature, options.jwks, options);
  } catch (error) {
    // The JWK Set could not be fetched: nothing can be verified now; the server delivers again later.
    return answer(503, { error: `cannot verify: ${error instanceof Error ? error.message : String(error)}` });
  }
  if (!verification.valid) return answer(401, { error: `signature ${verification.reason}` });
  const wake = parseWakeNotification(request.body);
  if (wake === undefined) return answer(400, { error: 'not a wake notification' });
  let outcome: WakeOutcome;
  try {
    outcome = (await options.handle(wake)) ?? {};
  } catch (error) {
    return answer(500, { error: error instanceof Error ? error.message : 'processing failed' });
  }
  const done = outcome.done ?? true;
  if (outcome.acks === undefined || outcome.acks.length === 0) return answer(200, done ? { done: true } : {});
  try {
    const transport = options.transport ?? new Transport();
    await postWithWakeToken(transport, wake.callbackUrl, wake.callbackToken, ackBody(wake, outcome.acks, done));
  } catch (error) {
    // A newer wake replaced this one: nothing to deliver again.
    if (error instanceof WakeFencedError) return answer(200, {});
    return answer(502, { error: `callback failed: ${error instanceof Error ? error.message : String(error)}` });
  }
  return answer(200, {});
}

/** The parts of a Node.js `IncomingMessage` / `ServerResponse` the listener uses. */
export interface NodeLikeRequest extends AsyncIterable<Uint8Array | string> {
  headers: Record<string, string | string[] | undefined>;
}
export interface NodeLikeResponse {
  writeHead(status: number, headers: Record<string, string>): unknown;
  end(body?: string): unknown;
}

/** Largest delivery body a listener reads (default 1 MiB); past it answers 413. */
export const DEFAULT_MAX_WAKE_BODY_BYTES = 1024 * 1024;

/** A request listener for `node:http` (`createServer(wakeRequestListener({...}))`) around `handleWakeRequest`. */
export function wakeRequestListener(options: WakeHandlerOptions & { maxBodyBytes?: number }): (req: NodeLikeRequest, res: NodeLikeResponse) => Promise<void> {
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_WAKE_BODY_BYTES;
  return async (req, res) => {
    let response: WakeResponse;
    try {
      response = await readAndHandle(req, options, maxBodyBytes);
    } catch (error) {
      // The request broke off while its body was read: no delivery to judge.
      response = answer(400, { error: `unreadable request: ${error instanceof Error ? error.message : String(error)}` });
    }
    res.writeHead(response.status, response.headers);
    res.end(response.body);
  };
}

async function readAndHandle(req: NodeLikeRequest, options: WakeHandlerOptions, maxBodyBytes: number): Promise<WakeResponse> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of req) {
    const bytes = typeof chunk === 'string' ? encoder.encode(chunk) : chunk;
    size += bytes.length;
    if (size > maxBodyBytes) return answer(413, { error: `body larger than ${maxBodyBytes} bytes` });
    chunks.push(bytes);
  }
  const body = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    body.set(chunk, at);
    at += chunk.length;
  }
  const header = req.headers['webhook-signature'];
  return handleWakeRequest({ body, signature: Array.isArray(header) ? header[0] : header }, options);
}
