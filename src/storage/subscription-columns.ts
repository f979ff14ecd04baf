/**
 * The stored form of subscriptions and their links, shared by every engine: one row of
 * `subscriptions` (the whole state as JSON, plus the columns the engines query on) and
 * one row of `subscription_links`, and path order. Which links are pending and which
 * subscriptions are due are rules of core/subscription-queries.ts.
 */
import { dueAtMs } from '../core/subscription-queries.js';
import type { LinkView, SubscriptionLink, SubscriptionState } from '../core/subscription-types.js';
import { compareUtf8 } from '../core/utf8-order.js';

/** A row of `subscriptions`. Booleans are 0 and 1, as in every other table. */
export interface SubscriptionRow {
  key: string;
  scope: string;
  /** The whole SubscriptionState as JSON: the columns below are derived from it, for queries. */
  record: string;
  /** 1 while a wake is in flight (pending links then wait for it). */
  awake: number;
  /** When the server must act without being asked (dueAtMs); null when never by itself. */
  due_ms: number | null;
  /** 1 when the configuration has a pattern: new streams of the scope are matched against it. */
  has_pattern: number;
}

export const SUBSCRIPTION_COLUMNS = ['key', 'scope', 'record', 'awake', 'due_ms', 'has_pattern'] as const;

export function subscriptionRow(subscription: SubscriptionState): SubscriptionRow {
  return {
    key: subscription.key,
    scope: subscription.scope,
    record: JSON.stringify(subscription),
    awake: subscription.wake === null ? 0 : 1,
    due_ms: dueAtMs(subscription),
    has_pattern: subscription.config.pattern === null ? 0 : 1,
  };
}

/** The state stored in a row's `record` (every field is plain JSON data). */
export function subscriptionFromRecord(record: string): SubscriptionState {
  return JSON.parse(record) as SubscriptionState;
}

/** A row of `subscription_links`. */
export interface LinkRow {
  sub_key: string;
  stream: string;
  path: string;
  explicit: number;
  glob: number;
  acked: number;
}

export const LINK_COLUMNS = ['sub_key', 'stream', 'path', 'explicit', 'glob', 'acked'] as const;

export function linkRow(link: SubscriptionLink): LinkRow {
  return {
    sub_key: link.subKey,
    stream: link.stream,
    path: link.path,
    explicit: link.explicit ? 1 : 0,
    glob: link.glob ? 1 : 0,
    acked: link.ackedOffset,
  };
}

export function linkFromRow(row: LinkRow): SubscriptionLink {
  return { subKey: row.sub_key, stream: row.stream, path: row.path, explicit: row.explicit === 1, glob: row.glob === 1, ackedOffset: row.acked };
}

/** Link views sorted by path, the first `limit` of them. */
export function firstByPath(views: LinkView[], limit: number): LinkView[] {
  return views.sort((a, b) => compareUtf8(a.link.path, b.link.path)).slice(0, limit);
}
