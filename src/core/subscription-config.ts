/**
 * A subscription's configuration as a client sends it (PUT .../__ds/subscriptions/:id):
 * parsed, checked against the limits, and normalised so that equal configurations hash
 * equal and a repeated PUT re-confirms rather than conflicts.
 */
import { checkPattern } from './glob.js';
import {
  DEFAULT_LEASE_TTL_MS,
  MAX_LEASE_TTL_MS,
  MIN_LEASE_TTL_MS,
  type SubscriptionConfig,
  type SubscriptionLimits,
} from './subscription-types.js';
import { compareUtf8 } from './utf8-order.js';
import { checkWebhookUrl } from './webhook-url.js';

export type ConfigRefusal = { code: 'BAD_REQUEST' | 'WEBHOOK_URL_REJECTED' | 'SUBSCRIPTION_FULL'; message: string };

export type ParsedConfig = { ok: true; config: SubscriptionConfig } | { ok: false; refusal: ConfigRefusal };

/** Checks a stream path relative to a scope; null when it is acceptable. */
export type PathCheck = (path: string) => string | null;

const bad = (message: string): ParsedConfig => ({ ok: false, refusal: { code: 'BAD_REQUEST', message } });

/** Leading and trailing slashes are not part of a path (the reference server accepts `/events/*`). */
export function normalizePath(path: string): string {
  return path.replace(/^\/+/, '').replace(/\/+$/, '');
}

export function parseSubscriptionConfig(
  body: unknown,
  limits: SubscriptionLimits,
  checkPath: PathCheck,
  allowLocalhost: boolean,
): ParsedConfig {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return bad('the body must be a JSON object');
  const b = body as Record<string, unknown>;
  if (b.type !== 'webhook' && b.type !== 'pull-wake') return bad('type must be "webhook" or "pull-wake"');
  const pattern = optionalString(b.pattern, 'pattern');
  if (isRefusal(pattern)) return pattern;
  if (pattern !== null) {
    const check = checkPattern(pattern, limits.maxPatternBytes, limits.maxPatternSegments);
    if (!check.ok) return bad(check.reason);
  }
  const streams = parseStreams(b.streams, limits, checkPath);
  if (!Array.isArray(streams)) return streams;
  if (pattern === null && streams.length === 0) return bad('a subscription needs a pattern or streams');
  const leaseTtlMs = b.lease_ttl_ms ?? DEFAULT_LEASE_TTL_MS;
  if (typeof leaseTtlMs !== 'number' || !Number.isInteger(leaseTtlMs) || leaseTtlMs < MIN_LEASE_TTL_MS || leaseTtlMs > MAX_LEASE_TTL_MS) {
    return bad(`lease_ttl_ms must be an integer from ${MIN_LEASE_TTL_MS} to ${MAX_LEASE_TTL_MS}`);
  }
  const description = optionalString(b.description, 'description');
  if (isRefusal(description)) return description;
  if (description !== null && Buffer.byteLength(description) > limits.maxDescriptionBytes) {
    return bad(`description is longer than ${limits.maxDescriptionBytes} bytes`);
  }
  const delivery = parseDelivery(b, checkPath, allowLocalhost);
  if ('ok' in delivery) return delivery;
  return { ok: true, config: { type: b.type, pattern, streams, ...delivery, leaseTtlMs, description } };
}

const isRefusal = (value: string | null | ParsedConfig): value is ParsedConfig => value !== null && typeof value === 'object';

function optionalString(value: unknown, name: string): string | null | ParsedConfig {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string') return bad(`${name} must be a string`);
  const normalized = name === 'description' ? value : normalizePath(value);
  return normalized.length === 0 ? null : normalized;
}

function parseStreams(value: unknown, limits: SubscriptionLimits, checkPath: PathCheck): string[] | ParsedConfig {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) return bad('streams must be an array of stream paths');
  if (value.length > limits.maxStreamsPerSubscription) {
    return { ok: false, refusal: { code: 'SUBSCRIPTION_FULL', message: `a subscription holds at most ${limits.maxStreamsPerSubscription} streams` } };
  }
  const paths = new Set<string>();
  for (const item of value) {
    if (typeof item !== 'string') return bad('streams must contain only strings');
    const path = normalizePath(item);
    const problem = checkPath(path);
    if (problem !== null) return bad(`stream "${item}": ${problem}`);
    paths.add(path);
  }
  return [...paths].sort(compareUtf8);
}

function parseDelivery(
  b: Record<string, unknown>,
  checkPath: PathCheck,
  allowLocalhost: boolean,
): Pick<SubscriptionConfig, 'webhookUrl' | 'wakeStream'> | Extract<ParsedConfig, { ok: false }> {
  if (b.type === 'webhook') {
    const webhook = b.webhook as { url?: unknown } | undefined;
    if (typeof webhook !== 'object' || webhook === null || typeof webhook.url !== 'string' || webhook.url.length === 0) {
      return bad('a webhook subscription needs webhook.url') as Extract<ParsedConfig, { ok: false }>;
    }
    const check = checkWebhookUrl(webhook.url, allowLocalhost);
    if (!check.ok) return { ok: false, refusal: { code: 'WEBHOOK_URL_REJECTED', message: check.reason } };
    return { webhookUrl: webhook.url, wakeStream: null };
  }
  if (typeof b.wake_stream !== 'string' || normalizePath(b.wake_stream).length === 0) {
    return bad('a pull-wake subscription needs wake_stream') as Extract<ParsedConfig, { ok: false }>;
  }
  const wakeStream = normalizePath(b.wake_stream);
  const problem = checkPath(wakeStream);
  if (problem !== null) return bad(`wake_stream: ${problem}`) as Extract<ParsedConfig, { ok: false }>;
  return { webhookUrl: null, wakeStream };
}

/**
 * A pull-wake subscription's wake stream must exist when the subscription is created: its
 * wake events would otherwise go nowhere, and the worker wait for a wake that never comes.
 * (A wake stream deleted later is the operator's to recreate; wakes resume on it.)
 */
export function wakeStreamRefusal(wakeStream: string | null, exists: boolean): ConfigRefusal | null {
  if (wakeStream === null || exists) return null;
  return { code: 'BAD_REQUEST', message: `the wake stream ${wakeStream} does not exist: create it (a JSON stream) before the subscription` };
}

/** The configuration's canonical text: equal configurations, however sent, give equal text (its hash is their identity). */
export function canonicalConfig(config: SubscriptionConfig): string {
  return JSON.stringify([config.type, config.pattern, config.streams, config.webhookUrl, config.wakeStream, config.leaseTtlMs, config.description]);
}
