/**
 * Per-bucket limits (--bucket-max-streams, --bucket-max-subscriptions), checked before a
 * create that would add a stream or subscription to a bucket; the rule is core/bucket.ts.
 *
 * The count and the create are two steps, not one store transaction (the storage engines
 * are left as they are), so while a limit is set the creates of one bucket run one at a
 * time in this process: the count a create checks is the one it adds to. Nodes sharing a
 * store check apart, so together they may pass a limit by the creates that race on others.
 * A bucket's own limits (PATCH /{bucket}) replace the server-wide ones; they are read
 * through ctx.bucketSettings, so another node's change applies here within its cache time.
 */
import { bucketLimitRefusal } from '../core/bucket.js';
import { effectiveBucketLimits } from '../core/bucket-settings.js';
import type { ProtocolError } from '../protocol/errors.js';
import { bucketOfScope } from '../protocol/ids.js';
import type { HandlerContext } from './context.js';
import type { StreamAddress } from './router.js';

/** Runs tasks of one key one after another, and tasks of different keys freely. */
export class CreateGate {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const before = this.tails.get(key) ?? Promise.resolve();
    const result = before.then(task);
    const tail = result.catch(() => undefined);
    this.tails.set(key, tail);
    // The last task of a key leaves no entry behind.
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }
}

/** Runs a stream create, or refuses it when it would add a stream past its bucket's limit. */
export async function createWithinStreamLimit<T>(ctx: HandlerContext, address: StreamAddress, create: () => Promise<T>): Promise<T | ProtocolError> {
  const bucket = address.bucket;
  // The /v1 family is no tenant's bucket: the limits are per bucket.
  if (bucket === null) return create();
  const limits = effectiveBucketLimits(ctx.settings.bucketLimits, await ctx.bucketSettings.get(bucket));
  if (limits.maxStreams === 0) return create();
  return ctx.creates.run(`streams ${bucket}`, async () => {
    // A PUT of a stream that exists adds none: it answers as it always does, even at the limit.
    if ((await ctx.store.getStream(address.key)) === undefined) {
      const info = await ctx.store.getBucket(bucket);
      const refused = info === undefined ? null : bucketLimitRefusal('streams', info.streamCount, limits);
      if (refused) return refused;
    }
    return create();
  });
}

/** Runs a subscription create, or refuses it when it would add one past its bucket's limit. */
export async function createWithinSubscriptionLimit<T>(ctx: HandlerContext, scope: string, key: string, create: () => Promise<T>): Promise<T | ProtocolError> {
  const bucket = bucketOfScope(scope);
  if (bucket === null) return create();
  const limits = effectiveBucketLimits(ctx.settings.bucketLimits, await ctx.bucketSettings.get(bucket));
  if (limits.maxSubscriptions === 0) return create();
  return ctx.creates.run(`subscriptions ${bucket}`, async () => {
    if ((await ctx.store.getSubscription(key)) === undefined) {
      // Counting stops at the limit: no more need be read to know it is reached.
      const held = (await ctx.store.listSubscriptions(scope, null, limits.maxSubscriptions)).length;
      const refused = bucketLimitRefusal('subscriptions', held, limits);
      if (refused) return refused;
    }
    return create();
  });
}
