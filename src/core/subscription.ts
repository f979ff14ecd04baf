/**
 * The subscription rules (PROTOCOL.md sections 6 and 7) as pure decisions: each takes the
 * state the engine loaded inside its transaction (time, wake ids and randomness passed
 * in) and answers an outcome with the state to store. Engines store it in the same
 * transaction, so a crash never separates a cursor from the facts it rests on.
 */
import type { ProtocolError } from '../protocol/errors.js';
import { globMatch } from './glob.js';
import { retryDelayMs } from './retry.js';
import type { LinkView, SubscriptionConfig, SubscriptionLimits, SubscriptionLink, SubscriptionState, WakeState, WakeStream } from './subscription-types.js';

/** A refusal on the subscription routes: rill's error with the protocol's extra fields. */
export interface SubscriptionRefusal extends ProtocolError {
  currentHolder?: string;
  generation?: number;
}

const refuse = (code: SubscriptionRefusal['code'], message: string, extra: Partial<SubscriptionRefusal> = {}): { kind: 'rejected'; error: SubscriptionRefusal } => ({
  kind: 'rejected',
  error: { code, message, ...extra },
});

export type Rejected = ReturnType<typeof refuse>;

/** What a wake token (verified by the caller) says about who holds it. */
export interface TokenClaims {
  incarnation: string;
  generation: number;
  wakeId: string;
}

/** The wake identifiers a callback, ack or release names in its body. */
export interface WakeReference {
  wakeId: string;
  generation: number;
}

/** The event a pull-wake wake appends to the subscription's wake stream. */
export interface WakeEvent {
  type: 'wake';
  subscription_id: string;
  wake_id: string;
  generation: number;
  stream: string;
  ts: number;
}

/**
 * Whether a subscription follows the stream at `path` (relative to its scope). A pull-wake
 * subscription never follows its own wake stream: each wake appends an event there, which
 * would be pending work for the next wake, for ever.
 */
export const follows = (config: Pick<SubscriptionConfig, 'wakeStream'>, path: string): boolean => path !== config.wakeStream;

/** Whether the subscription's pattern takes in the stream at `path`. */
export const patternTakes = (config: Pick<SubscriptionConfig, 'pattern' | 'wakeStream'>, path: string): boolean =>
  config.pattern !== null && follows(config, path) && globMatch(config.pattern, path);

export const leaseExpired = (wake: WakeState, nowMs: number): boolean => wake.leaseExpiresAtMs !== null && nowMs >= wake.leaseExpiresAtMs;

export const hasPending = (view: LinkView): boolean => view.tail !== null && view.tail > view.link.ackedOffset;

export function wakeStreamOf(view: LinkView): WakeStream {
  return { path: view.link.path, explicit: view.link.explicit, acked: view.link.ackedOffset, tail: view.tail ?? view.link.ackedOffset };
}

// ---- creation -------------------------------------------------------------------------

export type CreateSubscriptionOutcome = { kind: 'created'; subscription: SubscriptionState } | { kind: 'confirmed'; subscription: SubscriptionState } | Rejected;

export function decideCreateSubscription(input: {
  /** The scope's bucket exists (always, for the v1 scope), read in the same transaction as the rest. */
  scopeExists: boolean;
  existing: SubscriptionState | undefined;
  candidate: SubscriptionState;
  subscriptionCount: number;
  limits: SubscriptionLimits;
}): CreateSubscriptionOutcome {
  const { existing, candidate } = input;
  // A deleted bucket takes its subscriptions with it; none may be created in one after.
  if (!input.scopeExists) return refuse('BUCKET_NOT_FOUND', 'bucket not found');
  if (existing) {
    if (existing.configHash === candidate.configHash) return { kind: 'confirmed', subscription: existing };
    return refuse('SUBSCRIPTION_ALREADY_EXISTS', `subscription ${candidate.id} exists with another configuration`);
  }
  if (input.subscriptionCount >= input.limits.maxSubscriptions) {
    return refuse('SUBSCRIPTION_LIMIT', `the server holds at most ${input.limits.maxSubscriptions} subscriptions`);
  }
  return { kind: 'created', subscription: candidate };
}

/** A link for a stream joining a subscription: from its current tail, or from 0 when it does not exist yet. */
export function newLink(subKey: string, stream: string, path: string, kind: 'explicit' | 'glob', ackedOffset: number): SubscriptionLink {
  return { subKey, stream, path, explicit: kind === 'explicit', glob: kind === 'glob', ackedOffset };
}

/** The link once `kind` membership is added (an existing link keeps its cursor). */
export function withMembership(existing: SubscriptionLink | undefined, fresh: SubscriptionLink): SubscriptionLink {
  if (!existing) return fresh;
  return { ...existing, explicit: existing.explicit || fresh.explicit, glob: existing.glob || fresh.glob };
}

/** Removing explicit membership: the link stays while the pattern still names the stream. */
export function withoutExplicit(link: SubscriptionLink): SubscriptionLink | null {
  return link.glob ? { ...link, explicit: false } : null;
}

// ---- wakes ----------------------------------------------------------------------------

export type WakeDecision = { subscription: SubscriptionState; event: WakeEvent | null; woke: boolean } | null;

/**
 * Clears a wake whose lease ran out, then wakes if streams have unacknowledged data and no
 * wake is in flight. `pending` lists the pending streams (at most maxStreamsPerWake).
 * Null when nothing changes.
 */
export function decideWake(subscription: SubscriptionState, pending: LinkView[], nowMs: number, wakeId: string): WakeDecision {
  let current = subscription;
  let changed = false;
  if (current.wake && leaseExpired(current.wake, nowMs)) {
    current = { ...current, wake: null };
    changed = true;
  }
  if (current.wake !== null || pending.length === 0) return changed ? { subscription: current, event: null, woke: false } : null;
  const generation = current.generation + 1;
  const webhook = current.config.type === 'webhook';
  const wake: WakeState = {
    id: wakeId,
    snapshot: pending.map(wakeStreamOf),
    holder: null,
    leaseExpiresAtMs: null,
    delivery: webhook ? { attempts: 0, nextAttemptAtMs: nowMs, lastError: null } : null,
  };
  const event: WakeEvent | null = webhook
    ? null
    : { type: 'wake', subscription_id: current.id, wake_id: wakeId, generation, stream: pending[0]!.link.path, ts: nowMs };
  return { subscription: { ...current, generation, wake }, event, woke: true };
}

export type ClaimOutcome = { kind: 'claimed'; subscription: SubscriptionState } | Rejected;

/**
 * A pull-wake worker claims the wake in flight, with the streams it listed when it was
 * made, or, with none in flight, a new one over the streams pending now. `pending` is
 * asked only then: listing them means scanning every link.
 */
export function decideClaim(input: {
  subscription: SubscriptionState | undefined;
  pending: () => LinkView[];
  worker: string;
  nowMs: number;
  wakeId: string;
}): ClaimOutcome {
  const { subscription, nowMs } = input;
  if (!subscription) return refuse('SUBSCRIPTION_NOT_FOUND', 'no such subscription');
  if (subscription.config.type !== 'pull-wake') return refuse('BAD_REQUEST', 'only pull-wake subscriptions are claimed');
  const live = subscription.wake && !leaseExpired(subscription.wake, nowMs) ? subscription.wake : null;
  if (live?.holder) return refuse('ALREADY_CLAIMED', `held by ${live.holder}`, { currentHolder: live.holder, generation: subscription.generation });
  const lease = { holder: input.worker, leaseExpiresAtMs: nowMs + subscription.config.leaseTtlMs };
  if (live && live.snapshot.length > 0) return { kind: 'claimed', subscription: { ...subscription, wake: { ...live, ...lease } } };
  const pending = input.pending();
  if (pending.length === 0) return refuse('NO_PENDING_WORK', 'no stream of the subscription has unacknowledged data');
  const wake: WakeState = { id: live?.id ?? input.wakeId, snapshot: pending.map(wakeStreamOf), delivery: null, ...lease };
  return { kind: 'claimed', subscription: { ...subscription, generation: live ? subscription.generation : subscription.generation + 1, wake } };
}

// ---- acknowledgements -----------------------------------------------------------------

export interface AckItem {
  path: string;
  /** The position acknowledged up to; null when the offset was not a concrete offset. */
  offset: number | null;
}

export type AckOutcome = { kind: 'acked'; subscription: SubscriptionState; links: SubscriptionLink[]; done: boolean } | Rejected;

/**
 * The holder of a wake reports progress (webhook `callback`, pull-wake `ack`), optionally
 * ending the wake with `done`. A token or body of another generation or wake is fenced and
 * moves nothing; offsets never go backwards nor beyond the stream's tail.
 */
export function decideAck(input: {
  subscription: SubscriptionState | undefined;
  mode: 'callback' | 'ack';
  claims: TokenClaims;
  reference: WakeReference;
  acks: AckItem[];
  /** The links the acks name, by path (absent: not a stream of the subscription). */
  links: ReadonlyMap<string, LinkView>;
  done: boolean;
  nowMs: number;
}): AckOutcome {
  const { subscription, nowMs } = input;
  const fenced = checkHolder(subscription, input.mode === 'callback' ? 'webhook' : 'pull-wake', input.claims, input.reference, nowMs);
  if (fenced) return fenced;
  const sub = subscription!;
  const moved: SubscriptionLink[] = [];
  for (const ack of input.acks) {
    const view = input.links.get(ack.path);
    const problem = ackProblem(ack, view);
    if (problem) return refuse('INVALID_ACK_OFFSET', problem);
    if (ack.offset! > view!.link.ackedOffset) moved.push({ ...view!.link, ackedOffset: ack.offset! });
  }
  const wake = sub.wake!;
  const held: WakeState = { ...wake, holder: wake.holder ?? 'webhook', delivery: null, leaseExpiresAtMs: nowMs + sub.config.leaseTtlMs };
  return { kind: 'acked', subscription: { ...sub, wake: input.done ? null : held }, links: moved, done: input.done };
}

function ackProblem(ack: AckItem, view: LinkView | undefined): string | null {
  if (!view) return `${ack.path} is not a stream of this subscription`;
  if (ack.offset === null) return `the offset for ${ack.path} is not a stream offset`;
  if (ack.offset < view.link.ackedOffset) return `the offset for ${ack.path} is before the acknowledged offset`;
  if (view.tail === null || ack.offset > view.tail) return `the offset for ${ack.path} is beyond the stream's tail`;
  return null;
}

export type ReleaseOutcome = { kind: 'released'; subscription: SubscriptionState } | Rejected;

export function decideRelease(input: {
  subscription: SubscriptionState | undefined;
  claims: TokenClaims;
  reference: WakeReference;
  nowMs: number;
}): ReleaseOutcome {
  const fenced = checkHolder(input.subscription, 'pull-wake', input.claims, input.reference, input.nowMs);
  if (fenced) return fenced;
  return { kind: 'released', subscription: { ...input.subscription!, wake: null } };
}

/** The checks every holder's request passes: the subscription, its type, the token's incarnation, generation and wake. */
function checkHolder(
  subscription: SubscriptionState | undefined,
  type: SubscriptionState['config']['type'],
  claims: TokenClaims,
  reference: WakeReference,
  nowMs: number,
): Rejected | null {
  if (!subscription) return refuse('SUBSCRIPTION_NOT_FOUND', 'no such subscription');
  if (subscription.config.type !== type) return refuse('BAD_REQUEST', `this route is for ${type} subscriptions`);
  if (claims.incarnation !== subscription.incarnation) return refuse('TOKEN_INVALID', 'the token was issued for a subscription since deleted');
  const wake = subscription.wake;
  const current =
    wake !== null &&
    !leaseExpired(wake, nowMs) &&
    claims.generation === subscription.generation &&
    reference.generation === subscription.generation &&
    claims.wakeId === wake.id &&
    reference.wakeId === wake.id;
  if (!current) return refuse('FENCED', staleWakeMessage(subscription, claims, reference, nowMs), { generation: subscription.generation });
  return null;
}

/**
 * Why a holder's request names no current wake, most specific first: a replayed callback
 * or ack of a wake that ended (done or released, its generation still the latest) is told
 * the wake is finished, not that another generation holds the subscription.
 */
function staleWakeMessage(subscription: SubscriptionState, claims: TokenClaims, reference: WakeReference, nowMs: number): string {
  const latest = claims.generation === subscription.generation && reference.generation === subscription.generation;
  const wake = subscription.wake;
  if (latest && wake === null) return 'the wake is finished (ended with done, or released): nothing is left to acknowledge; new data starts a new wake';
  if (latest && wake !== null && claims.wakeId === wake.id && reference.wakeId === wake.id && leaseExpired(wake, nowMs)) return "the wake's lease ran out: claim the subscription again";
  return 'the wake is stale: another generation holds the subscription, or the lease ran out';
}

// ---- webhook delivery -------------------------------------------------------------------

export type DeliveryResult =
  | { kind: 'started'; timeoutMs: number; sender: string }
  | { kind: 'resumed'; sender: string }
  | { kind: 'accepted' }
  | { kind: 'done' }
  | { kind: 'failed'; error: string };

export type DeliveryOutcome = { kind: 'stale' } | { kind: 'recorded'; subscription: SubscriptionState; autoAcks: SubscriptionLink[]; ended: boolean };

/**
 * Records a webhook attempt. `started` takes the attempt for its sender (no other node
 * sends it until the timeout has passed); `resumed` gives back an attempt its sender
 * started before a crash, due at once; `done` acks the wake's snapshot and ends the wake;
 * `failed` schedules the next attempt with exponential backoff.
 */
export function decideDelivery(input: {
  subscription: SubscriptionState | undefined;
  reference: WakeReference;
  result: DeliveryResult;
  /** The snapshot's links as stored now, by path. */
  links: ReadonlyMap<string, LinkView>;
  nowMs: number;
  random: number;
}): DeliveryOutcome {
  const { subscription: sub, result, nowMs } = input;
  const wake = sub?.wake;
  if (!sub || !wake || sub.generation !== input.reference.generation || wake.id !== input.reference.wakeId) return { kind: 'stale' };
  const recorded = (next: WakeState | null, autoAcks: SubscriptionLink[] = []): DeliveryOutcome => ({
    kind: 'recorded',
    subscription: { ...sub, wake: next },
    autoAcks,
    ended: next === null,
  });
  switch (result.kind) {
    case 'started':
      if (!wake.delivery || wake.delivery.nextAttemptAtMs > nowMs) return { kind: 'stale' };
      return recorded({ ...wake, delivery: { ...wake.delivery, nextAttemptAtMs: nowMs + result.timeoutMs, sender: result.sender } });
    case 'resumed':
      if (!wake.delivery || wake.delivery.sender !== result.sender || wake.delivery.nextAttemptAtMs <= nowMs) return { kind: 'stale' };
      return recorded({ ...wake, delivery: { ...wake.delivery, nextAttemptAtMs: nowMs, sender: null } });
    case 'accepted':
      // A callback may have come first and taken the lease already.
      if (!wake.delivery) return { kind: 'stale' };
      return recorded({ ...wake, holder: 'webhook', delivery: null, leaseExpiresAtMs: nowMs + sub.config.leaseTtlMs });
    case 'done':
      return recorded(null, autoAcksOf(wake.snapshot, input.links));
    case 'failed': {
      if (!wake.delivery) return { kind: 'stale' };
      const attempts = wake.delivery.attempts + 1;
      const delivery = { attempts, nextAttemptAtMs: nowMs + retryDelayMs(attempts, input.random), lastError: result.error };
      return recorded({ ...wake, delivery });
    }
  }
}

/** `{"done": true}` acks each snapshot stream up to the tail the wake listed, never backwards. */
function autoAcksOf(snapshot: WakeStream[], links: ReadonlyMap<string, LinkView>): SubscriptionLink[] {
  const moved: SubscriptionLink[] = [];
  for (const item of snapshot) {
    const view = links.get(item.path);
    if (!view || view.tail === null) continue;
    const to = Math.min(item.tail, view.tail);
    if (to > view.link.ackedOffset) moved.push({ ...view.link, ackedOffset: to });
  }
  return moved;
}

/** The subscription's status as GET shows it: `failed` while its webhook delivery is failing. */
export function statusOf(subscription: SubscriptionState): 'active' | 'failed' {
  return (subscription.wake?.delivery?.attempts ?? 0) > 0 ? 'failed' : 'active';
}
