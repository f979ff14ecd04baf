/**
 * Subscriptions: a durable cursor over a set of streams (a glob `pattern` and/or explicit
 * `streams`) that wakes a worker, by a signed webhook or by a wake event appended to a
 * pull-wake stream. This is the typed API over the `{root}/__ds/subscriptions` routes,
 * where the root is `/v1/stream` (`client.subscriptions()`) or a bucket
 * (`client.bucket(b).subscriptions()`); paths are relative to that root.
 *
 * The wire is snake_case JSON; this API is camelCase. Refusals become typed errors like
 * every other answer (`NotFoundError` for SUBSCRIPTION_NOT_FOUND, `WakeFencedError`,
 * `AlreadyClaimedError`, a `RillError` with code NO_PENDING_WORK, ...).
 */
import { errorFromResponse, RillError } from './errors.js';
import type { Transport } from './http.js';
import type { StreamHandle } from './stream.js';

export type SubscriptionType = 'webhook' | 'pull-wake';

/** What `put` sends: the subscription's configuration. */
export interface SubscriptionConfig {
  type: SubscriptionType;
  /** A glob over stream paths: `*` one segment, `**` zero or more. */
  pattern?: string;
  /** Streams linked explicitly. A subscription needs a pattern, streams, or both. */
  streams?: string[];
  /** Webhook subscriptions: where wakes are POSTed. */
  webhook?: { url: string };
  /** Pull-wake subscriptions: the JSON stream wake events are appended to. */
  wakeStream?: string;
  /** How long a claimed wake is held without an ack (1 s to 10 min; default 30 s). */
  leaseTtlMs?: number;
  description?: string;
}

/** A stream the subscription follows, with its cursor. */
export interface SubscriptionLink {
  path: string;
  linkType: 'explicit' | 'glob';
  /** Everything before this offset is acknowledged. */
  ackedOffset: string;
}

/** A followed stream as a wake shows it: its cursor and the tail at the wake. */
export interface SubscriptionStreamInfo extends SubscriptionLink {
  tailOffset: string;
  /** True when the tail is past the acknowledged offset. */
  hasPending: boolean;
}

export interface WebhookSigning {
  alg: string;
  kid: string;
  jwksUrl: string;
}

/** A subscription as a listing shows it (no streams). */
export interface SubscriptionSummary {
  id: string;
  type: SubscriptionType;
  pattern?: string;
  webhook?: { url: string; signing?: WebhookSigning };
  wakeStream?: string;
  leaseTtlMs: number;
  createdAt: string;
  status: 'active' | 'failed';
  description?: string;
  /** The current wake generation, when the server says. */
  generation?: number;
  /** The wake in flight, if any. */
  wake?: { wakeId: string; holder: string | null; leaseExpiresAt: string; delivery?: WebhookDelivery };
}

/**
 * A webhook wake's delivery: attempts so far and when the next is due. `lastError` is
 * given to a token that may manage the subscription's bucket only (it may quote the URL).
 */
export interface WebhookDelivery {
  attempts: number;
  nextAttemptAt: string;
  lastError?: string | null;
}

export interface Subscription extends SubscriptionSummary {
  streams: SubscriptionLink[];
  /** Of the streams listed, how many hold data past their acknowledged offset. */
  streamsPending: number;
  /** More streams are linked than the answer lists (the server lists the first ones). */
  streamsTruncated: boolean;
}

export interface SubscriptionListing {
  subscriptions: SubscriptionSummary[];
  /** Pass as `after` for the next page; null on the last page. */
  next: string | null;
}

/** What an ack, callback or release names: one wake, by id, generation and token. */
export interface WakeRef {
  wakeId: string;
  generation: number;
  token: string;
}

/** A claimed pull wake. */
export interface Wake extends WakeRef {
  subscriptionId: string;
  streams: SubscriptionStreamInfo[];
  leaseTtlMs: number;
}

/** An inclusive cursor move: everything of `stream` before `offset` is processed. */
export interface Ack {
  stream: string;
  offset: string;
}

export interface AckResult {
  /** The server started a new wake at once: more work arrived after this one's snapshot. */
  nextWake: boolean;
}

/** One Ed25519 public key of the server's webhook JWK Set. */
export interface WebhookJwk {
  kty: 'OKP';
  crv: 'Ed25519';
  x: string;
  kid: string;
  alg?: string;
  use?: string;
}

export interface WebhookJwks {
  keys: WebhookJwk[];
}

export interface CallOptions {
  signal?: AbortSignal;
}

/** Wire shapes (snake_case), as the server sends them. */
interface WireLink {
  path: string;
  link_type: 'explicit' | 'glob';
  acked_offset: string;
  tail_offset?: string;
  has_pending?: boolean;
}

interface WireSubscription {
  id?: string;
  subscription_id?: string;
  type: SubscriptionType;
  pattern?: string;
  streams?: WireLink[];
  webhook?: { url: string; signing?: { alg: string; kid: string; jwks_url: string } };
  wake_stream?: string;
  lease_ttl_ms: number;
  created_at: string;
  status: 'active' | 'failed';
  description?: string;
  generation?: number;
  wake?: { wake_id: string; holder: string | null; lease_expires_at: string; delivery?: { attempts: number; next_attempt_at: string; last_error?: string | null } | null } | null;
  streams_truncated?: boolean;
}

interface WireWake {
  wake_id: string;
  generation: number;
  token: string;
  streams: WireLink[];
  lease_ttl_ms: number;
}

export function linkOf(wire: WireLink): SubscriptionLink {
  return { path: wire.path, linkType: wire.link_type, ackedOffset: wire.acked_offset };
}

export function streamInfoOf(wire: WireLink): SubscriptionStreamInfo {
  const tailOffset = wire.tail_offset ?? wire.acked_offset;
  return { ...linkOf(wire), tailOffset, hasPending: wire.has_pending ?? tailOffset > wire.acked_offset };
}

function summaryOf(wire: WireSubscription): SubscriptionSummary {
  const summary: SubscriptionSummary = {
    id: wire.id ?? wire.subscription_id ?? '',
    type: wire.type,
    leaseTtlMs: wire.lease_ttl_ms,
    createdAt: wire.created_at,
    status: wire.status,
  };
  if (wire.pattern !== undefined) summary.pattern = wire.pattern;
  if (wire.webhook !== undefined) {
    const signing = wire.webhook.signing;
    summary.webhook = { url: wire.webhook.url, ...(signing ? { signing: { alg: signing.alg, kid: signing.kid, jwksUrl: signing.jwks_url } } : {}) };
  }
  if (wire.wake_stream !== undefined) summary.wakeStream = wire.wake_stream;
  if (wire.description !== undefined) summary.description = wire.description;
  if (wire.generation !== undefined) summary.generation = wire.generation;
  if (wire.wake) {
    const { delivery } = wire.wake;
    summary.wake = { wakeId: wire.wake.wake_id, holder: wire.wake.holder, leaseExpiresAt: wire.wake.lease_expires_at };
    if (delivery) summary.wake.delivery = { attempts: delivery.attempts, nextAttemptAt: delivery.next_attempt_at, ...(delivery.last_error === undefined ? {} : { lastError: delivery.last_error }) };
  }
  return summary;
}

function subscriptionOf(wire: WireSubscription): Subscription {
  const links = wire.streams ?? [];
  return { ...summaryOf(wire), streams: links.map(linkOf), streamsPending: links.filter((l) => streamInfoOf(l).hasPending).length, streamsTruncated: wire.streams_truncated === true };
}

function configBody(config: SubscriptionConfig): Record<string, unknown> {
  const body: Record<string, unknown> = { type: config.type };
  if (config.pattern !== undefined) body.pattern = config.pattern;
  if (config.streams !== undefined) body.streams = config.streams;
  if (config.webhook !== undefined) body.webhook = { url: config.webhook.url };
  if (config.wakeStream !== undefined) body.wake_stream = config.wakeStream;
  if (config.leaseTtlMs !== undefined) body.lease_ttl_ms = config.leaseTtlMs;
  if (config.description !== undefined) body.description = config.description;
  return body;
}

/** The body of an ack or callback. */
export function ackBody(wake: Pick<WakeRef, 'wakeId' | 'generation'>, acks: readonly Ack[], done: boolean | undefined): string {
  const body: Record<string, unknown> = { wake_id: wake.wakeId, generation: wake.generation };
  if (acks.length > 0) body.acks = acks.map((a) => ({ stream: a.stream, offset: a.offset }));
  if (done !== undefined) body.done = done;
  return JSON.stringify(body);
}

const JSON_HEADERS = { 'content-type': 'application/json' };

function parseJson<T>(body: Uint8Array): T {
  try {
    return JSON.parse(new TextDecoder().decode(body)) as T;
  } catch (error) {
    throw new RillError({ code: 'UNEXPECTED_RESPONSE', message: 'the answer is not valid JSON', cause: error });
  }
}

/**
 * POSTs an ack or a webhook callback with the wake's token as the bearer. Shared by
 * `Subscriptions.ack`, `Subscriptions.callback` and `handleWakeRequest`.
 */
export async function postWithWakeToken(transport: Transport, url: string, token: string, body: string, signal?: AbortSignal): Promise<AckResult> {
  const headers = { ...JSON_HEADERS, authorization: `Bearer ${token}` };
  const res = await transport.request(url, { method: 'POST', headers, body, signal });
  if (res.status !== 200) throw await errorFromResponse(res.response);
  const answer = parseJson<{ next_wake?: unknown }>(res.body);
  return { nextWake: answer.next_wake === true };
}

/** The subscriptions of one scope: `/v1/stream` or a bucket. */
export class Subscriptions {
  /** The scope's root URL (`…/v1/stream` or `…/{bucket}`). */
  readonly rootUrl: string;

  constructor(
    readonly transport: Transport,
    rootUrl: string,
    /** A handle on a stream of this scope by its scope-relative path. */
    private readonly streamOf: (path: string) => StreamHandle,
  ) {
    this.rootUrl = rootUrl.replace(/\/+$/, '');
  }

  /** The URL of a subscription, or of one of its actions. */
  urlOf(id: string, action?: string): string {
    if (id.length === 0) throw new RangeError('a subscription id must not be empty');
    const base = `${this.rootUrl}/__ds/subscriptions/${encodeURIComponent(id)}`;
    return action === undefined ? base : `${base}/${action}`;
  }

  /** A handle on a stream of this scope, by the path a subscription uses for it. */
  stream(path: string): StreamHandle {
    return this.streamOf(path);
  }

  /**
   * Creates the subscription, or re-confirms it when one with the same configuration
   * exists (`created: false`); another configuration under the id is refused with
   * SUBSCRIPTION_ALREADY_EXISTS.
   */
  async put(id: string, config: SubscriptionConfig, options: CallOptions = {}): Promise<{ subscription: Subscription; created: boolean }> {
    const res = await this.transport.request(this.urlOf(id), { method: 'PUT', headers: JSON_HEADERS, body: JSON.stringify(configBody(config)), signal: options.signal });
    if (res.status !== 201 && res.status !== 200) throw await errorFromResponse(res.response);
    return { subscription: subscriptionOf(parseJson<WireSubscription>(res.body)), created: res.status === 201 };
  }

  async get(id: string, options: CallOptions = {}): Promise<Subscription> {
    const res = await this.transport.request(this.urlOf(id), { method: 'GET', signal: options.signal });
    if (res.status !== 200) throw await errorFromResponse(res.response);
    return subscriptionOf(parseJson<WireSubscription>(res.body));
  }

  /** Deletes the subscription (nothing happens when it does not exist); wakes in flight are fenced. */
  async delete(id: string, options: CallOptions = {}): Promise<void> {
    await this.expectNoContent(this.urlOf(id), { method: 'DELETE', signal: options.signal });
  }

  /** One page of the scope's subscriptions in id order. */
  async list(options: { after?: string; limit?: number; signal?: AbortSignal } = {}): Promise<SubscriptionListing> {
    const params = new URLSearchParams();
    if (options.after !== undefined) params.set('after', options.after);
    if (options.limit !== undefined) params.set('limit', String(options.limit));
    const query = params.toString();
    const url = `${this.rootUrl}/__ds/subscriptions${query ? `?${query}` : ''}`;
    const res = await this.transport.request(url, { method: 'GET', signal: options.signal });
    if (res.status !== 200) throw await errorFromResponse(res.response);
    const body = parseJson<{ subscriptions: WireSubscription[]; next?: string | null }>(res.body);
    return { subscriptions: body.subscriptions.map(summaryOf), next: body.next ?? null };
  }

  /** Every subscription of the scope, page by page. */
  async *all(options: { limit?: number; signal?: AbortSignal } = {}): AsyncGenerator<SubscriptionSummary> {
    let after: string | undefined;
    for (;;) {
      const page = await this.list({ ...options, ...(after === undefined ? {} : { after }) });
      yield* page.subscriptions;
      if (page.next === null || page.subscriptions.length === 0) return;
      after = page.next;
    }
  }

  /** Links streams explicitly (each at its current tail). */
  async addStreams(id: string, paths: readonly string[], options: CallOptions = {}): Promise<void> {
    if (paths.length === 0) throw new RangeError('addStreams needs at least one stream path');
    await this.expectNoContent(this.urlOf(id, 'streams'), { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({ streams: paths }), signal: options.signal });
  }

  /** Removes an explicit link (a stream the pattern matches stays linked by the pattern). */
  async removeStream(id: string, path: string, options: CallOptions = {}): Promise<void> {
    await this.expectNoContent(this.urlOf(id, `streams/${encodeURIComponent(path)}`), { method: 'DELETE', signal: options.signal });
  }

  /** Claims the pull wake for `worker`; NO_PENDING_WORK or ALREADY_CLAIMED (409) otherwise. */
  async claim(id: string, worker: string, options: CallOptions = {}): Promise<Wake> {
    const res = await this.transport.request(this.urlOf(id, 'claim'), { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({ worker }), signal: options.signal });
    if (res.status !== 200) throw await errorFromResponse(res.response);
    const wire = parseJson<WireWake>(res.body);
    return {
      subscriptionId: id,
      wakeId: wire.wake_id,
      generation: wire.generation,
      token: wire.token,
      streams: wire.streams.map(streamInfoOf),
      leaseTtlMs: wire.lease_ttl_ms,
    };
  }

  /**
   * Moves cursors of a claimed wake (each ack inclusive: everything before `offset`),
   * renewing its lease; `done: true` also ends the wake. A stale wake is refused with
   * `WakeFencedError` and nothing moves.
   */
  ack(id: string, wake: WakeRef, acks: readonly Ack[], options: CallOptions & { done?: boolean } = {}): Promise<AckResult> {
    return postWithWakeToken(this.transport, this.urlOf(id, 'ack'), wake.token, ackBody(wake, acks, options.done), options.signal);
  }

  /** Gives a claimed wake back without moving its cursors; pending work wakes again. */
  async release(id: string, wake: WakeRef, options: CallOptions = {}): Promise<void> {
    const headers = { ...JSON_HEADERS, authorization: `Bearer ${wake.token}` };
    await this.expectNoContent(this.urlOf(id, 'release'), { method: 'POST', headers, body: ackBody(wake, [], undefined), signal: options.signal });
  }

  /** A webhook's callback: `url` and `token` are the notification's `callback_url` and `callback_token`. */
  callback(url: string, token: string, body: { wakeId: string; generation: number; acks?: readonly Ack[]; done?: boolean }, options: CallOptions = {}): Promise<AckResult> {
    return postWithWakeToken(this.transport, url, token, ackBody(body, body.acks ?? [], body.done), options.signal);
  }

  /** The server's webhook signing keys (`GET {root}/__ds/jwks.json`). */
  async jwks(options: CallOptions = {}): Promise<WebhookJwks> {
    const res = await this.transport.request(`${this.rootUrl}/__ds/jwks.json`, { method: 'GET', signal: options.signal });
    if (res.status !== 200) throw await errorFromResponse(res.response);
    return parseJson<WebhookJwks>(res.body);
  }

  /**
   * Makes a new webhook signing key the one that signs (admin on the whole server). The
   * old key stays in the JWK Set for an hour, so deliveries it signed still verify. The
   * wake-token secret is replaced too; tokens made before keep working until they expire.
   * Answers the new key's id and the JWK Set now published.
   */
  async rotateSigningKey(options: CallOptions = {}): Promise<{ kid: string; keys: WebhookJwks['keys'] }> {
    const res = await this.transport.request(`${this.rootUrl}/__ds/jwks/rotate`, { method: 'POST', signal: options.signal });
    if (res.status !== 200) throw await errorFromResponse(res.response);
    return parseJson<{ kid: string; keys: WebhookJwks['keys'] }>(res.body);
  }

  /** @internal */ private async expectNoContent(url: string, init: { method: string; headers?: Record<string, string>; body?: string; signal?: AbortSignal | undefined }): Promise<void> {
    const res = await this.transport.request(url, init);
    if (res.status !== 204 && res.status !== 200) throw await errorFromResponse(res.response);
  }
}
