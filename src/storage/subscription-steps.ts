/**
 * The executor's subscription steps: load what core/subscription.ts needs inside the
 * batch's transaction, decide, and write back exactly what it decided, with the stream
 * facts (tails, the wake event's append) in the same transaction. No rule lives here.
 */
import { randomBytes } from 'node:crypto';
import { literalPrefix } from '../core/glob.js';
import {
  decideAck,
  decideClaim,
  decideCreateSubscription,
  decideDelivery,
  decideRelease,
  decideWake,
  follows,
  leaseExpired,
  newLink,
  patternTakes,
  withMembership,
  withoutExplicit,
  type AckItem,
  type AckOutcome,
  type ClaimOutcome,
  type CreateSubscriptionOutcome,
  type DeliveryOutcome,
  type DeliveryResult,
  type Rejected,
  type ReleaseOutcome,
  type TokenClaims,
  type WakeEvent,
  type WakeReference,
} from '../core/subscription.js';
import type { LinkView, SubscriptionLimits, SubscriptionLink, SubscriptionState } from '../core/subscription-types.js';
import type { AppendOutcome, AppendRequest, StreamState } from '../core/types.js';
import { bucketOfScope, splitStreamKey } from '../protocol/ids.js';
import type { Txn } from './executor.js';

/** Whether a step left a wake in flight that the service must act on (send a webhook). */
export interface WakeNews {
  /** A new wake was made by this step. */
  nextWake: boolean;
}

export interface SubscriptionCommands {
  createSubscription: { input: { candidate: SubscriptionState; limits: SubscriptionLimits }; output: CreateSubscriptionOutcome };
  deleteSubscription: { input: { key: string }; output: { kind: 'deleted' | 'absent' } };
  addSubscriptionStreams: { input: { key: string; paths: string[]; limits: SubscriptionLimits }; output: { kind: 'added' } | Rejected };
  removeSubscriptionStream: { input: { key: string; path: string }; output: { kind: 'removed' } | Rejected };
  wakeSubscription: { input: { key: string; maxStreams: number }; output: { kind: 'absent' | 'unchanged' } | ({ kind: 'changed'; subscription: SubscriptionState } & WakeNews) };
  claimSubscription: { input: { key: string; worker: string; maxStreams: number }; output: ClaimOutcome };
  ackSubscription: {
    input: { key: string; mode: 'callback' | 'ack'; claims: TokenClaims; reference: WakeReference; acks: AckItem[]; done: boolean; maxStreams: number };
    output: AckOutcome | (Extract<AckOutcome, { kind: 'acked' }> & WakeNews);
  };
  releaseSubscription: {
    input: { key: string; claims: TokenClaims; reference: WakeReference; maxStreams: number };
    output: ReleaseOutcome | (Extract<ReleaseOutcome, { kind: 'released' }> & WakeNews);
  };
  recordDelivery: { input: { key: string; reference: WakeReference; result: DeliveryResult; random: number; maxStreams: number }; output: DeliveryOutcome & Partial<WakeNews> };
}

export const newWakeId = (): string => `w_${randomBytes(12).toString('base64url')}`;

/** The `v1` scope always exists; a bucket's, while the bucket does. */
function scopeExists(txn: Txn, scope: string): boolean {
  const bucket = bucketOfScope(scope);
  return bucket === null || txn.getBucket(bucket) !== undefined;
}

export class SubscriptionSteps {
  constructor(
    private readonly txn: Txn,
    private readonly nowMs: number,
    /** The executor's append step, for wake events (same transaction, same rules as any append). */
    private readonly append: (name: string, request: AppendRequest) => AppendOutcome,
  ) {}

  create({ candidate, limits }: SubscriptionCommands['createSubscription']['input']): CreateSubscriptionOutcome {
    const outcome = decideCreateSubscription({
      scopeExists: scopeExists(this.txn, candidate.scope),
      existing: this.txn.subscriptions.getSubscription(candidate.key),
      candidate,
      subscriptionCount: this.txn.subscriptions.countSubscriptions(),
      limits,
    });
    if (outcome.kind !== 'created') return outcome;
    const links = new Map<string, SubscriptionLink>();
    for (const path of candidate.config.streams) {
      if (!follows(candidate.config, path)) continue;
      const name = `${candidate.scope}/${path}`;
      links.set(name, newLink(candidate.key, name, path, 'explicit', this.tailOf(name)));
    }
    if (candidate.config.pattern !== null) {
      const prefix = `${candidate.scope}/${literalPrefix(candidate.config.pattern)}`;
      for (const { name, tail } of this.txn.subscriptions.streamsByPrefix(prefix, limits.maxStreamsPerSubscription + 1)) {
        const path = name.slice(candidate.scope.length + 1);
        if (patternTakes(candidate.config, path)) links.set(name, withMembership(links.get(name), newLink(candidate.key, name, path, 'glob', tail)));
      }
    }
    if (links.size > limits.maxStreamsPerSubscription) {
      return { kind: 'rejected', error: { code: 'SUBSCRIPTION_FULL', message: `the subscription would hold more than ${limits.maxStreamsPerSubscription} streams` } };
    }
    this.txn.subscriptions.putSubscription(candidate);
    for (const link of links.values()) this.txn.subscriptions.putLink(link);
    return outcome;
  }

  delete({ key }: { key: string }): { kind: 'deleted' | 'absent' } {
    if (!this.txn.subscriptions.getSubscription(key)) return { kind: 'absent' };
    this.txn.subscriptions.dropSubscription(key);
    return { kind: 'deleted' };
  }

  addStreams({ key, paths, limits }: SubscriptionCommands['addSubscriptionStreams']['input']): SubscriptionCommands['addSubscriptionStreams']['output'] {
    const sub = this.txn.subscriptions.getSubscription(key);
    if (!sub) return { kind: 'rejected', error: { code: 'SUBSCRIPTION_NOT_FOUND', message: 'no such subscription' } };
    paths = paths.filter((path) => follows(sub.config, path));
    const fresh = paths.map((path) => `${sub.scope}/${path}`).filter((name) => !this.txn.subscriptions.getLink(key, name));
    if (this.txn.subscriptions.countLinks(key) + fresh.length > limits.maxStreamsPerSubscription) {
      return { kind: 'rejected', error: { code: 'SUBSCRIPTION_FULL', message: `a subscription holds at most ${limits.maxStreamsPerSubscription} streams` } };
    }
    for (const path of paths) {
      const name = `${sub.scope}/${path}`;
      this.txn.subscriptions.putLink(withMembership(this.txn.subscriptions.getLink(key, name), newLink(key, name, path, 'explicit', this.tailOf(name))));
    }
    return { kind: 'added' };
  }

  removeStream({ key, path }: { key: string; path: string }): SubscriptionCommands['removeSubscriptionStream']['output'] {
    const sub = this.txn.subscriptions.getSubscription(key);
    if (!sub) return { kind: 'rejected', error: { code: 'SUBSCRIPTION_NOT_FOUND', message: 'no such subscription' } };
    const name = `${sub.scope}/${path}`;
    const link = this.txn.subscriptions.getLink(key, name);
    if (link) {
      const kept = withoutExplicit(link);
      if (kept) this.txn.subscriptions.putLink(kept);
      else this.txn.subscriptions.dropLink(key, name);
    }
    return { kind: 'removed' };
  }

  wake({ key, maxStreams }: SubscriptionCommands['wakeSubscription']['input']): SubscriptionCommands['wakeSubscription']['output'] {
    const sub = this.txn.subscriptions.getSubscription(key);
    if (!sub) return { kind: 'absent' };
    const decision = this.wakeIfPending(sub, maxStreams);
    if (!decision) return { kind: 'unchanged' };
    return { kind: 'changed', subscription: decision.subscription, nextWake: decision.woke };
  }

  claim({ key, worker, maxStreams }: SubscriptionCommands['claimSubscription']['input']): ClaimOutcome {
    const sub = this.txn.subscriptions.getSubscription(key);
    const pending = () => this.txn.subscriptions.pendingLinks(key, maxStreams);
    const outcome = decideClaim({ subscription: sub, pending, worker, nowMs: this.nowMs, wakeId: newWakeId() });
    if (outcome.kind === 'claimed') this.txn.subscriptions.putSubscription(outcome.subscription);
    return outcome;
  }

  ack(input: SubscriptionCommands['ackSubscription']['input']): SubscriptionCommands['ackSubscription']['output'] {
    const sub = this.txn.subscriptions.getSubscription(input.key);
    const outcome = decideAck({
      subscription: sub,
      mode: input.mode,
      claims: input.claims,
      reference: input.reference,
      acks: input.acks,
      links: sub ? this.linkViews(input.key, sub.scope, input.acks.map((a) => a.path)) : new Map(),
      done: input.done,
      nowMs: this.nowMs,
    });
    if (outcome.kind !== 'acked') return outcome;
    for (const link of outcome.links) this.txn.subscriptions.putLink(link);
    return { ...outcome, ...this.settle(outcome.subscription, input.maxStreams) };
  }

  release(input: SubscriptionCommands['releaseSubscription']['input']): SubscriptionCommands['releaseSubscription']['output'] {
    const outcome = decideRelease({ subscription: this.txn.subscriptions.getSubscription(input.key), claims: input.claims, reference: input.reference, nowMs: this.nowMs });
    if (outcome.kind !== 'released') return outcome;
    return { ...outcome, ...this.settle(outcome.subscription, input.maxStreams) };
  }

  recordDelivery(input: SubscriptionCommands['recordDelivery']['input']): SubscriptionCommands['recordDelivery']['output'] {
    const sub = this.txn.subscriptions.getSubscription(input.key);
    const paths = input.result.kind === 'done' && sub?.wake ? sub.wake.snapshot.map((s) => s.path) : [];
    const outcome = decideDelivery({
      subscription: sub,
      reference: input.reference,
      result: input.result,
      links: sub ? this.linkViews(input.key, sub.scope, paths) : new Map(),
      nowMs: this.nowMs,
      random: input.random,
    });
    if (outcome.kind !== 'recorded') return outcome;
    for (const link of outcome.autoAcks) this.txn.subscriptions.putLink(link);
    if (!outcome.ended) {
      this.txn.subscriptions.putSubscription(outcome.subscription);
      return outcome;
    }
    return { ...outcome, ...this.settle(outcome.subscription, input.maxStreams) };
  }

  /** A stream was created: it joins every subscription of its scope whose pattern names it, from its first byte. */
  streamCreated(stream: StreamState, ownDataFrom: number): void {
    const { scope, path } = splitStreamKey(stream.name);
    for (const sub of this.txn.subscriptions.patternSubscriptions(scope)) {
      if (!patternTakes(sub.config, path)) continue;
      this.txn.subscriptions.putLink(withMembership(this.txn.subscriptions.getLink(sub.key, stream.name), newLink(sub.key, stream.name, path, 'glob', ownDataFrom)));
    }
  }

  /** A bucket was deleted: its subscriptions go with it (a bucket recreated under the id starts without them). */
  bucketGone(bucket: string): void {
    for (const key of this.txn.subscriptions.scopeSubscriptionKeys(`b/${bucket}`)) this.txn.subscriptions.dropSubscription(key);
  }

  /** A stream was deleted or expired: it leaves its subscriptions. */
  streamGone(stream: StreamState): void {
    this.txn.subscriptions.dropStreamLinks(stream.name);
  }

  /** Stores the subscription after a wake ended (done, release, delivery done) and wakes again if work is pending. */
  private settle(subscription: SubscriptionState, maxStreams: number): WakeNews & { subscription: SubscriptionState } {
    const decision = this.wakeIfPending(subscription, maxStreams);
    if (decision) return { subscription: decision.subscription, nextWake: decision.woke };
    this.txn.subscriptions.putSubscription(subscription);
    return { subscription, nextWake: false };
  }

  private wakeIfPending(sub: SubscriptionState, maxStreams: number): { subscription: SubscriptionState; woke: boolean } | null {
    const pending = sub.wake === null || leaseExpired(sub.wake, this.nowMs) ? this.txn.subscriptions.pendingLinks(sub.key, maxStreams) : [];
    const decision = decideWake(sub, pending, this.nowMs, newWakeId());
    if (!decision) return null;
    this.txn.subscriptions.putSubscription(decision.subscription);
    if (decision.event) this.appendWakeEvent(decision.subscription, decision.event);
    return { subscription: decision.subscription, woke: decision.woke };
  }

  /** The wake event joins the wake stream like any JSON append; a missing or closed wake stream refuses it and the wake stands (workers may still claim). */
  private appendWakeEvent(sub: SubscriptionState, event: WakeEvent): void {
    const request: AppendRequest = {
      contentType: 'application/json',
      data: Buffer.from(`${JSON.stringify(event)}\n`),
      close: false,
      streamSeq: null,
      producer: null,
      bodyDigest: null,
      incarnation: null,
      recordMatch: null,
    };
    this.append(`${sub.scope}/${sub.config.wakeStream!}`, request);
  }

  private linkViews(key: string, scope: string, paths: string[]): Map<string, LinkView> {
    const views = new Map<string, LinkView>();
    for (const path of paths) {
      const name = `${scope}/${path}`;
      const link = this.txn.subscriptions.getLink(key, name);
      if (link) views.set(path, { link, tail: this.liveTail(name) });
    }
    return views;
  }

  private liveTail(name: string): number | null {
    const stream = this.txn.getStream(name);
    return stream && !stream.deleted ? stream.tail : null;
  }

  /** Where a new link starts: the stream's tail, or 0 for a stream that does not exist yet. */
  private tailOf(name: string): number {
    return this.liveTail(name) ?? 0;
  }
}
