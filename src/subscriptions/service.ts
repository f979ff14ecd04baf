/**
 * The subscription service: turns committed appends into wakes and wakes into webhook
 * deliveries. It holds no rule (core/subscription.ts decides, inside the store's
 * transactions) and no state a crash could lose: every wake, lease and retry schedule is
 * stored, and a sweep over the store finds whatever this node did not act on in time
 * (its own restart, another node's appends, a lease that ran out).
 */
import type { Logger } from 'pino';
import { bucketOfScope, splitStreamKey } from '../protocol/ids.js';
import { encodeOffset } from '../protocol/offset.js';
import type { SubscriptionConfig, SubscriptionLimits, SubscriptionState, WakeStream } from '../core/subscription-types.js';
import { patternTakes, type DeliveryResult } from '../core/subscription.js';
import type { CommitEvent, Store } from '../storage/store.js';
import { FailureSpell } from '../ops/failure-spell.js';
import { sendWebhook } from './sender.js';
import { WebhookKeys } from './signing.js';
import { WakeTokens, type WakeTokenCheck } from './tokens.js';
import assert from 'node:assert/strict';

/** What an operator sets (`rill serve` flags; http/settings.ts holds the defaults). */
export interface SubscriptionSettings {
  limits: SubscriptionLimits;
  /** Development only: webhooks may go to localhost over http (`--webhook-allow-localhost`). */
  allowLocalhost: boolean;
  /** Longest a webhook endpoint may take to answer before the attempt counts as failed. */
  deliveryTimeoutMs: number;
  /** Webhook deliveries in flight at once; the rest wait for the next sweep. */
  maxConcurrentDeliveries: number;
  /** How often the store is swept for due deliveries, expired leases and missed wakes. */
  sweepIntervalMs: number;
  /** How long a callback or claim token stays valid after it is issued. */
  tokenTtlMs: number;
}

/** Told of wakes and delivery attempts (ops/metrics.ts counts them). */
export interface SubscriptionObserver {
  subscriptionWoke(): void;
  webhookDelivered(result: 'done' | 'accepted' | 'failed'): void;
}

export interface SubscriptionServiceOptions extends SubscriptionSettings {
  observer: SubscriptionObserver | null;
  nowMs: () => number;
  log: Logger;
  /** The server's base URL, for callback and JWK Set URLs in notifications. */
  baseUrl: () => string;
}

/** The root URL path of a scope: `/v1/stream` or `/{bucket}`. */
export function rootPathOf(scope: string): string {
  const bucket = bucketOfScope(scope);
  return bucket === null ? '/v1/stream' : `/${bucket}`;
}

/** A stream as a notification, claim or GET lists it (the protocol's field names). */
export function streamInfo(item: WakeStream): Record<string, unknown> {
  return {
    path: item.path,
    link_type: item.explicit ? 'explicit' : 'glob',
    acked_offset: encodeOffset(item.acked),
    tail_offset: encodeOffset(item.tail),
    has_pending: item.tail > item.acked,
  };
}

/** Most subscriptions looked at, on start, for deliveries a crash cut off (the rest wait out their attempt). */
const MAX_RESUMED_DELIVERIES = 10_000;

/**
 * A node's name in the delivery attempts it takes. A SQLite data directory has one server
 * at a time (its lock), so whoever opens it is the node that took its attempts; nodes
 * sharing PostgreSQL are told apart by host and the port they listen on (a node restarted
 * on another port takes another name: what it had taken then waits out its timeout).
 */
export function nodeNameOf(store: 'sqlite' | 'memory' | 'postgres', host: string, port: string): string {
  return store === 'postgres' ? `${host}:${port}` : 'local';
}

/** Most stream names remembered as matching no pattern. */
const MAX_UNMATCHED = 100_000;

/** How often the signing keys and the wake-token secret are read again, for a rotation made on another node. */
const KEYS_REFRESH_MS = 30_000;
/** At most this often, a token that fails to verify makes the node read the secret again. */
const TOKENS_REREAD_MS = 1_000;

type PatternConfig = Pick<SubscriptionConfig, 'pattern' | 'wakeStream'>;

export class SubscriptionService {
  /** Stream key -> keys of the subscriptions linking it (possibly stale: the sweep corrects). */
  private readonly linked = new Map<string, Set<string>>();
  /** Scope -> subscription key -> what its pattern takes in, to index streams created after their subscription. */
  private readonly patterns = new Map<string, Map<string, PatternConfig>>();
  /** Streams known to match no pattern (cleared when patterns change): appends to them cost one lookup. */
  private readonly unmatched = new Set<string>();
  private readonly toWake = new Set<string>();
  private readonly delivering = new Set<string>();
  private wakeScheduled = false;
  private keysReadAtMs = 0;
  private tokensReadAtMs = 0;
  private sweepTimer: NodeJS.Timeout | null = null;
  private sweeping: Promise<void> | null = null;
  private unsubscribe: (() => void) | null = null;
  private closed = false;
  /** This node's name in the attempts it takes (nodeNameOf); null until run: no delivery before. */
  private nodeName: string | null = null;

  /** The sweep's failures while the store is down: one line when they begin, one when they end. */
  private readonly sweepFailures: FailureSpell;

  private openedKeys: WebhookKeys | null = null;
  private openedTokens: WakeTokens | null = null;

  constructor(
    private readonly store: Store,
    readonly options: SubscriptionServiceOptions,
  ) {
    this.sweepFailures = new FailureSpell(options.log, Date.now, {
      failing: 'the subscription sweep is failing; it runs again every sweep interval, and says when it recovers',
      recovered: 'the subscription sweep recovered',
    });
  }

  /** The webhook signing keys (open once the service started; requests come only after). */
  get keys(): WebhookKeys {
    assert(this.openedKeys, 'the subscription service is used before it started');
    return this.openedKeys;
  }

  get tokens(): WakeTokens {
    assert(this.openedTokens, 'the subscription service is used before it started');
    return this.openedTokens;
  }

  async start(): Promise<void> {
    this.openedKeys = await WebhookKeys.open(this.store, this.options.nowMs());
    this.openedTokens = await WakeTokens.open(this.store, this.options.tokenTtlMs);
    await this.loadIndex();
    this.unsubscribe = this.store.onCommit((events) => this.committed(events));
  }

  /**
   * Begins delivering, once the server listens and so knows its name, which is the same
   * after a restart: first, what a crash cut off is sent again at once.
   */
  async run(nodeName: string): Promise<void> {
    this.nodeName = nodeName;
    await this.resumeCutOffDeliveries(nodeName);
    this.sweepTimer = setInterval(() => void this.sweep(), this.options.sweepIntervalMs);
    this.sweepTimer.unref();
    void this.sweep();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.unsubscribe?.();
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    await this.sweeping;
  }

  // ---- what the HTTP layer tells us --------------------------------------------------

  /** A subscription was created or its membership changed: index its links. */
  async indexSubscription(sub: SubscriptionState): Promise<void> {
    this.addPattern(sub);
    let after: string | null = null;
    for (;;) {
      const page = await this.store.subscriptionLinks(sub.key, after, 1_000);
      for (const view of page) this.link(view.link.stream, sub.key);
      if (page.length < 1_000) break;
      after = page[page.length - 1]!.link.path;
    }
    this.wakeSoon(sub.key);
  }

  /** The subscription was deleted. */
  forget(subKey: string): void {
    this.dropFromIndex(subKey);
  }

  /** A step made a new wake: a webhook one is delivered now. */
  woke(sub: SubscriptionState): void {
    this.options.observer?.subscriptionWoke();
    if (sub.config.type === 'webhook' && sub.wake?.delivery) void this.deliver(sub.key);
  }

  // ---- commits -> wakes --------------------------------------------------------------

  private committed(events: CommitEvent[]): void {
    for (const event of events) {
      if (!event.stream || event.stream.deleted) continue;
      const keys = this.linked.get(event.name) ?? this.matchNewStream(event.name);
      if (keys) for (const key of keys) this.wakeSoon(key);
    }
  }

  /** A stream not in the index may be one created after a pattern subscription: its creation linked it. */
  private matchNewStream(name: string): Set<string> | undefined {
    if (this.patterns.size === 0 || this.unmatched.has(name)) return undefined;
    const { scope, path } = splitStreamKey(name);
    const patterns = this.patterns.get(scope);
    if (!patterns) return undefined;
    for (const [subKey, config] of patterns) if (patternTakes(config, path)) this.link(name, subKey);
    const keys = this.linked.get(name);
    if (!keys) {
      // A bound on what a server with millions of streams keeps here: forgetting costs a few glob matches.
      if (this.unmatched.size >= MAX_UNMATCHED) this.unmatched.clear();
      this.unmatched.add(name);
    }
    return keys;
  }

  private wakeSoon(key: string): void {
    this.toWake.add(key);
    if (this.wakeScheduled) return;
    this.wakeScheduled = true;
    setImmediate(() => void this.wakeQueued());
  }

  private async wakeQueued(): Promise<void> {
    this.wakeScheduled = false;
    const keys = [...this.toWake];
    this.toWake.clear();
    await Promise.all(keys.map((key) => this.wake(key)));
  }

  private async wake(key: string): Promise<void> {
    if (this.closed) return;
    try {
      const outcome = await this.store.run('wakeSubscription', { key, maxStreams: this.options.limits.maxStreamsPerWake });
      if (outcome.kind === 'changed' && outcome.nextWake) this.woke(outcome.subscription);
      else if (outcome.kind === 'absent') this.dropFromIndex(key);
    } catch (error) {
      this.options.log.warn({ err: error, subscription: key }, 'a subscription wake failed; the sweep will retry it');
    }
  }

  // ---- the sweep ---------------------------------------------------------------------

  /** Acts on whatever is due: deliveries, expired leases, pending work without a wake. */
  sweep(): Promise<void> {
    if (this.sweeping || this.closed) return this.sweeping ?? Promise.resolve();
    this.sweeping = this.sweepOnce().finally(() => (this.sweeping = null));
    return this.sweeping;
  }

  private async sweepOnce(): Promise<void> {
    try {
      const now = this.options.nowMs();
      // Another node sharing the store may have rotated the signing key or the token secret.
      if (now - this.keysReadAtMs >= KEYS_REFRESH_MS) {
        this.keysReadAtMs = now;
        await this.keys.refresh();
        await this.tokens.refresh();
      }
      for (const key of await this.store.dueSubscriptions(now, 1_000)) {
        const sub = await this.store.getSubscription(key);
        if (!sub) continue;
        if (sub.wake?.delivery && sub.wake.delivery.nextAttemptAtMs <= now) void this.deliver(key);
        else await this.wake(key);
      }
      this.sweepFailures.succeeded();
    } catch (error) {
      this.sweepFailures.failed(error);
    }
  }

  // ---- webhook delivery --------------------------------------------------------------

  /**
   * Deliveries this node had taken when it stopped (a crash cut them off) are due at once:
   * nobody else may send them until the attempt times out, and this node is back. An attempt
   * is taken for twice the delivery timeout, so those due within that horizon are all of them.
   */
  private async resumeCutOffDeliveries(nodeName: string): Promise<void> {
    const horizonMs = this.options.nowMs() + this.attemptHoldMs;
    for (const key of await this.store.dueSubscriptions(horizonMs, MAX_RESUMED_DELIVERIES)) {
      const sub = await this.store.getSubscription(key);
      const wake = sub?.wake;
      if (!sub || wake?.delivery?.sender !== nodeName) continue;
      const reference = { wakeId: wake.id, generation: sub.generation };
      const result = { kind: 'resumed', sender: nodeName } as const;
      await this.store.run('recordDelivery', { key, reference, result, random: 0, maxStreams: this.options.limits.maxStreamsPerWake });
    }
  }

  private async deliver(key: string): Promise<void> {
    if (this.closed || this.nodeName === null || this.delivering.has(key) || this.delivering.size >= this.options.maxConcurrentDeliveries) return;
    this.delivering.add(key);
    try {
      let next = await this.attempt(key);
      while (next && !this.closed) next = await this.attempt(key);
    } catch (error) {
      this.options.log.warn({ err: error, subscription: key }, 'a webhook delivery could not be recorded; the sweep will retry it');
    } finally {
      this.delivering.delete(key);
    }
  }

  /** How long a node holds an attempt it took: no other node sends it meanwhile (twice the delivery timeout). */
  private get attemptHoldMs(): number {
    return 2 * this.options.deliveryTimeoutMs;
  }

  /** One delivery attempt; true when it ended the wake and a new one is due at once. */
  private async attempt(key: string): Promise<boolean> {
    const { limits, deliveryTimeoutMs } = this.options;
    const sub = await this.store.getSubscription(key);
    const wake = sub?.wake;
    if (!sub || !wake?.delivery || sub.config.webhookUrl === null) return false;
    const reference = { wakeId: wake.id, generation: sub.generation };
    const record = (result: DeliveryResult) =>
      this.store.run('recordDelivery', { key, reference, result, random: Math.random(), maxStreams: limits.maxStreamsPerWake });
    // Taking the attempt first: no other node sends it meanwhile, and a crash mid-send retries after the timeout.
    const taken = await record({ kind: 'started', timeoutMs: this.attemptHoldMs, sender: this.nodeName! });
    if (taken.kind === 'stale') return false;
    const rawBody = this.notification(sub);
    const sent = await sendWebhook({
      url: sub.config.webhookUrl,
      rawBody,
      signature: this.keys.sign(rawBody, this.options.nowMs()),
      deliveryId: wake.id,
      timeoutMs: deliveryTimeoutMs,
      allowLocalhost: this.options.allowLocalhost,
      maxResponseBytes: 64 * 1024,
    });
    this.options.observer?.webhookDelivered(sent.kind);
    if (sent.kind === 'failed') this.options.log.info({ subscription: key, attempt: wake.delivery.attempts + 1, reason: sent.error }, 'webhook delivery failed');
    const outcome = await record(sent);
    const nextWake = outcome.kind === 'recorded' && outcome.nextWake === true;
    if (nextWake) this.options.observer?.subscriptionWoke();
    return nextWake && outcome.subscription.wake?.delivery != null;
  }

  /** The wake notification body: the signed bytes are exactly these. */
  private notification(sub: SubscriptionState): string {
    const wake = sub.wake!;
    const callbackUrl = `${this.options.baseUrl()}${rootPathOf(sub.scope)}/__ds/subscriptions/${encodeURIComponent(sub.id)}/callback`;
    return JSON.stringify({
      subscription_id: sub.id,
      wake_id: wake.id,
      generation: sub.generation,
      streams: wake.snapshot.map(streamInfo),
      callback_url: callbackUrl,
      callback_token: this.issueToken(sub),
    });
  }

  /**
   * Checks a wake token. One that does not verify may be MACed with a secret another node
   * rotated in since this node read it: the secret is read again, at most once a second.
   */
  async verifyToken(token: string, subKey: string): Promise<WakeTokenCheck> {
    const now = this.options.nowMs();
    const checked = this.tokens.verify(token, subKey, now);
    if (checked.ok || checked.code === 'TOKEN_EXPIRED' || now - this.tokensReadAtMs < TOKENS_REREAD_MS) return checked;
    this.tokensReadAtMs = now;
    await this.tokens.refresh();
    return this.tokens.verify(token, subKey, now);
  }

  /** `rill subs rotate-key`: a new signing key and a new token secret, on every node; answers the new kid. */
  async rotateSecrets(): Promise<string> {
    const now = this.options.nowMs();
    await this.tokens.rotate(now);
    return this.keys.rotate(now);
  }

  issueToken(sub: SubscriptionState): string {
    return this.tokens.issue({
      subKey: sub.key,
      incarnation: sub.incarnation,
      generation: sub.generation,
      wakeId: sub.wake!.id,
      expiresAtMs: this.options.nowMs() + this.options.tokenTtlMs,
    });
  }

  // ---- the index ---------------------------------------------------------------------

  private async loadIndex(): Promise<void> {
    let after: { stream: string; subKey: string } | null = null;
    for (;;) {
      const page = await this.store.linkIndex(after, 5_000);
      for (const entry of page) this.link(entry.stream, entry.subKey);
      if (page.length < 5_000) break;
      after = page[page.length - 1]!;
    }
    let afterKey: string | null = null;
    for (;;) {
      const subs = await this.store.listSubscriptions(null, afterKey, 1_000);
      for (const sub of subs) this.addPattern(sub);
      if (subs.length < 1_000) break;
      afterKey = subs[subs.length - 1]!.key;
    }
  }

  private link(stream: string, subKey: string): void {
    let keys = this.linked.get(stream);
    if (!keys) this.linked.set(stream, (keys = new Set()));
    keys.add(subKey);
  }

  private dropFromIndex(subKey: string): void {
    for (const [scope, patterns] of this.patterns) if (patterns.delete(subKey) && patterns.size === 0) this.patterns.delete(scope);
    for (const [stream, keys] of this.linked) if (keys.delete(subKey) && keys.size === 0) this.linked.delete(stream);
  }

  private addPattern(sub: SubscriptionState): void {
    if (sub.config.pattern === null) return;
    let patterns = this.patterns.get(sub.scope);
    if (!patterns) this.patterns.set(sub.scope, (patterns = new Map()));
    patterns.set(sub.key, { pattern: sub.config.pattern, wakeStream: sub.config.wakeStream });
    this.unmatched.clear();
  }
}
