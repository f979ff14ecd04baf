/**
 * The questions about subscriptions that storage answers by query, each engine in its own
 * way (SQL over columns, or a walk over memory): the rule is written once here, and every
 * engine's query names the function it renders. test/storage/subscription-queries.test.ts
 * draws random states and holds each engine's answers to these functions.
 */
import type { LinkView, SubscriptionState } from './subscription-types.js';
import type { StreamState } from './types.js';

/**
 * When the subscription needs the server at the latest: its webhook delivery's next
 * attempt while one is pending, else its wake's lease expiry, else never (null). Engines
 * store it as a column (`due_ms`).
 */
export function dueAtMs(subscription: SubscriptionState): number | null {
  const wake = subscription.wake;
  if (wake === null) return null;
  if (wake.delivery !== null) return wake.delivery.nextAttemptAtMs;
  return wake.leaseExpiresAtMs;
}

/** A link's stream's tail as a subscription sees it: null once the stream is gone or deleted. */
export function linkedTail(stream: StreamState | null | undefined): number | null {
  return stream && !stream.deleted ? stream.tail : null;
}

/** The link's stream holds data its subscription has not acknowledged. */
export function isPending(view: LinkView): boolean {
  return pendingAt(view.tail, view.link.ackedOffset);
}

/** isPending, for a linked tail (linkedTail) and the link's acknowledged offset. */
export function pendingAt(tail: number | null, ackedOffset: number): boolean {
  return tail !== null && tail > ackedOffset;
}

/**
 * The server must act on the subscription at `nowMs`: something is due by time (a
 * delivery, a lease's end), or no wake is in flight and some link is pending (isPending).
 * `hasPendingLink` is asked only of an idle subscription: it costs a look at the links.
 */
export function isDue(subscription: SubscriptionState, nowMs: number, hasPendingLink: () => boolean): boolean {
  const dueMs = dueAtMs(subscription);
  return (dueMs !== null && dueMs <= nowMs) || (subscription.wake === null && hasPendingLink());
}
