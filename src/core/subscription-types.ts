/**
 * Subscriptions (Durable Streams PROTOCOL.md sections 6 and 7): a durable cursor over a
 * set of streams that wakes a worker by signed webhook or by an event on a pull-wake
 * stream. The state here is plain data: engines load it, `core/subscription.ts` decides,
 * engines store what it returns, in the same transaction as the stream facts it reads.
 */

export type SubscriptionType = 'webhook' | 'pull-wake';

/**
 * Where a subscription lives and what its paths are relative to: the `/v1/stream` family
 * (`v1`) or one bucket (`b/{bucket}`). A stream's storage key is `{scope}/{path}`.
 */
export type SubscriptionScope = string;

export interface SubscriptionConfig {
  type: SubscriptionType;
  /** Glob over stream paths relative to the scope: `*` one segment, `**` zero or more. */
  pattern: string | null;
  /** Explicit stream paths given at creation (sorted, without duplicates). */
  streams: string[];
  /** Webhook subscriptions only. */
  webhookUrl: string | null;
  /** Pull-wake subscriptions only: the stream path (in the scope) wake events are appended to. */
  wakeStream: string | null;
  leaseTtlMs: number;
  description: string | null;
}

/** A webhook wake's delivery: attempts so far and when the next one is due. */
export interface DeliveryState {
  attempts: number;
  nextAttemptAtMs: number;
  /** Why the last attempt failed, for GET and the logs. */
  lastError: string | null;
  /**
   * The node sending the attempt in progress (absent or null when none is): once that node
   * is back after a crash, it sends again at once instead of waiting out the attempt.
   */
  sender?: string | null;
}

/** A pending stream as a wake lists it: `done` on a webhook's answer acks it up to `tail`. */
export interface WakeStream {
  path: string;
  explicit: boolean;
  acked: number;
  tail: number;
}

/** The wake in flight: from its creation until done, release or lease expiry. */
export interface WakeState {
  id: string;
  /** The pending streams when the wake was made (or claimed), at most maxStreamsPerWake. */
  snapshot: WakeStream[];
  /** The worker holding the lease; `webhook` once a webhook delivery was answered 2xx. */
  holder: string | null;
  /** Set while someone holds the lease. */
  leaseExpiresAtMs: number | null;
  /** Webhook wakes not yet answered 2xx; null for pull-wake, and once delivered. */
  delivery: DeliveryState | null;
}

export interface SubscriptionState {
  /** Storage key: `{scope}/{id}`. */
  key: string;
  scope: SubscriptionScope;
  id: string;
  /** New for every creation at this key: tokens of a deleted subscription never pass. */
  incarnation: string;
  config: SubscriptionConfig;
  /** SHA-256 (hex) of the normalised configuration: a PUT with the same hash re-confirms. */
  configHash: string;
  createdAtMs: number;
  /** Raised by every wake; tokens and acks of an older generation are fenced. */
  generation: number;
  wake: WakeState | null;
}

/** A stream's membership in a subscription, with the subscription's cursor on it. */
export interface SubscriptionLink {
  subKey: string;
  /** The stream's storage key. */
  stream: string;
  /** The stream's path relative to the subscription's scope. */
  path: string;
  explicit: boolean;
  glob: boolean;
  /** Everything before this position is acknowledged. */
  ackedOffset: number;
}

/** A link with its stream's tail (null when no such stream exists now). */
export interface LinkView {
  link: SubscriptionLink;
  tail: number | null;
}

/** Limits on what clients control; settings so tests and operators can change them. */
export interface SubscriptionLimits {
  maxSubscriptions: number;
  maxStreamsPerSubscription: number;
  maxPatternBytes: number;
  maxPatternSegments: number;
  /** Streams a wake lists; a larger backlog comes in further wakes. */
  maxStreamsPerWake: number;
  maxDescriptionBytes: number;
}

export const DEFAULT_SUBSCRIPTION_LIMITS: SubscriptionLimits = {
  maxSubscriptions: 10_000,
  maxStreamsPerSubscription: 100_000,
  maxPatternBytes: 256,
  maxPatternSegments: 16,
  maxStreamsPerWake: 1_000,
  maxDescriptionBytes: 1_024,
};

export const MIN_LEASE_TTL_MS = 1_000;
export const MAX_LEASE_TTL_MS = 600_000;
export const DEFAULT_LEASE_TTL_MS = 30_000;

export const FIRST_RETRY_DELAY_MS = 1_000;
export const MAX_RETRY_DELAY_MS = 60_000;
/** Each delay is moved by up to this fraction either way, so failing endpoints are not hit in step. */
export const RETRY_JITTER = 0.2;
