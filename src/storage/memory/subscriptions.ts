/**
 * The memory engine's subscriptions: plain maps, every change logged for the batch's
 * undo (see MemoryStore.record). Same answers as the SQL engines, without indexes.
 */
import type { LinkView, SubscriptionLink, SubscriptionState } from '../../core/subscription-types.js';
import type { StreamState } from '../../core/types.js';
import type { SubscriptionReads } from '../store.js';
import type { SubscriptionTxn } from '../executor.js';
import { isDue, isPending, linkedTail } from '../../core/subscription-queries.js';
import { compareUtf8 } from '../../core/utf8-order.js';
import { firstByPath } from '../subscription-columns.js';

export class MemorySubscriptions implements SubscriptionTxn {
  private readonly subscriptions = new Map<string, SubscriptionState>();
  /** Links by subscription key, then stream key. */
  private readonly linksBySub = new Map<string, Map<string, SubscriptionLink>>();
  private readonly meta = new Map<string, string>();

  constructor(
    /** Logs how to undo a change (a no-op outside a batch). */
    private readonly record: (undo: () => void) => void,
    /** Every stored stream, as the batch sees it. */
    private readonly streams: () => Iterable<StreamState>,
    private readonly stream: (name: string) => StreamState | undefined,
  ) {}

  // States are copied in and out, as the SQL engines' rows are: no caller shares one with the store.
  getSubscription(key: string): SubscriptionState | undefined {
    const stored = this.subscriptions.get(key);
    return stored && structuredClone(stored);
  }

  putSubscription(subscription: SubscriptionState): void {
    this.setIn(this.subscriptions, subscription.key, structuredClone(subscription));
  }

  dropSubscription(key: string): void {
    this.setIn(this.subscriptions, key, undefined);
    this.setIn(this.linksBySub, key, undefined);
  }

  countSubscriptions(): number {
    return this.subscriptions.size;
  }

  patternSubscriptions(scope: string): SubscriptionState[] {
    return [...this.subscriptions.values()].filter((s) => s.scope === scope && s.config.pattern !== null).map((s) => structuredClone(s));
  }

  scopeSubscriptionKeys(scope: string): string[] {
    return [...this.subscriptions.values()].filter((s) => s.scope === scope).map((s) => s.key);
  }

  getLink(subKey: string, stream: string): SubscriptionLink | undefined {
    const stored = this.linksBySub.get(subKey)?.get(stream);
    return stored && { ...stored };
  }

  putLink(link: SubscriptionLink): void {
    let links = this.linksBySub.get(link.subKey);
    if (!links) this.setIn(this.linksBySub, link.subKey, (links = new Map()));
    this.setIn(links, link.stream, { ...link });
  }

  dropLink(subKey: string, stream: string): void {
    const links = this.linksBySub.get(subKey);
    if (links) this.setIn(links, stream, undefined);
  }

  dropStreamLinks(stream: string): void {
    for (const links of this.linksBySub.values()) this.setIn(links, stream, undefined);
  }

  countLinks(subKey: string): number {
    return this.linksBySub.get(subKey)?.size ?? 0;
  }

  links(subKey: string, afterPath: string | null, limit: number): LinkView[] {
    const after = (link: SubscriptionLink) => afterPath === null || compareUtf8(link.path, afterPath) > 0;
    return firstByPath(this.views(subKey).filter((v) => after(v.link)), limit);
  }

  pendingLinks(subKey: string, limit: number): LinkView[] {
    return firstByPath(this.views(subKey).filter(isPending), limit);
  }

  streamsByPrefix(keyPrefix: string, limit: number): Array<{ name: string; tail: number }> {
    return [...this.streams()]
      .filter((s) => !s.deleted && s.name.startsWith(keyPrefix))
      .map((s) => ({ name: s.name, tail: s.tail }))
      .sort((a, b) => compareUtf8(a.name, b.name))
      .slice(0, limit);
  }

  /** The reads outside a batch (memory has no uncommitted state between batches). */
  readonly reads: SubscriptionReads = {
    getSubscription: async (key) => this.getSubscription(key),
    listSubscriptions: async (scope, afterKey, limit) =>
      [...this.subscriptions.values()]
        .filter((s) => (scope === null || s.key.startsWith(`${scope}/`)) && (afterKey === null || compareUtf8(s.key, afterKey) > 0))
        .sort((a, b) => compareUtf8(a.key, b.key))
        .slice(0, limit)
        .map((s) => structuredClone(s)),
    subscriptionLinks: async (subKey, afterPath, limit) => this.links(subKey, afterPath, limit),
    linkIndex: async (after, limit) => this.linkIndex(after, limit),
    dueSubscriptions: async (nowMs, limit) => this.due(nowMs, limit),
    getMeta: async (key) => this.meta.get(key),
    compareAndSetMeta: async (key, expected, value) => {
      if (this.meta.get(key) !== expected) return false;
      this.meta.set(key, value);
      return true;
    },
  };

  private linkIndex(after: { stream: string; subKey: string } | null, limit: number): Array<{ stream: string; subKey: string }> {
    const order = (a: { stream: string; subKey: string }, b: { stream: string; subKey: string }) =>
      compareUtf8(a.stream, b.stream) || compareUtf8(a.subKey, b.subKey);
    const all: Array<{ stream: string; subKey: string }> = [];
    for (const [subKey, links] of this.linksBySub) for (const stream of links.keys()) all.push({ stream, subKey });
    return all.filter((entry) => after === null || order(entry, after) > 0).sort(order).slice(0, limit);
  }

  private due(nowMs: number, limit: number): string[] {
    const keys = [...this.subscriptions.values()].filter((s) => isDue(s, nowMs, () => this.pendingLinks(s.key, 1).length > 0)).map((s) => s.key);
    return keys.sort(compareUtf8).slice(0, limit);
  }

  private views(subKey: string): LinkView[] {
    return [...(this.linksBySub.get(subKey)?.values() ?? [])].map((link) => ({ link: { ...link }, tail: linkedTail(this.stream(link.stream)) }));
  }

  /** Sets (or, with undefined, deletes) `key`, logging how to undo it. */
  private setIn<K, V>(map: Map<K, V>, key: K, value: V | undefined): void {
    const had = map.has(key);
    const previous = map.get(key);
    if (value === undefined) map.delete(key);
    else map.set(key, value);
    if (had || value !== undefined) this.record(() => (had ? map.set(key, previous as V) : map.delete(key)));
  }
}
