/**
 * What the storage thread and the event loop's thread say to each other (host.ts,
 * worker.ts). Messages cross in packets (codec.ts); errors cross as `WireError`, rebuilt
 * on the other side as the storage error they were, so that the HTTP layer's one mapping
 * (`storageRefusal`) and every `instanceof` check work as if the store were local.
 */
import type { StorageObserver, Store, StoreCommands, StreamCacheCounters } from '../store.js';
import { decode, encode, type Packet } from './codec.js';
import type { ProducerSettings, StreamState } from '../../core/types.js';
import type { RecentIndexing } from '../sqlite/held-writes.js';
import * as storageErrors from '../errors.js';

/** Settings of the SQLite store the thread opens (SqliteStoreOptions without its callbacks). */
export interface ThreadSettings {
  dataDir: string;
  producers: ProducerSettings;
  streamCacheEntries?: number;
  streamCacheBytes?: number;
  minFreeDiskBytes?: number;
  recentIndexing?: RecentIndexing;
}

/** The Store's asynchronous reads, called by name across the thread. */
export type ReadName = Exclude<
  {
    [K in keyof Store]-?: Store[K] extends (...args: never[]) => Promise<unknown> ? K : never;
  }[keyof Store],
  'run' | 'close'
>;

/**
 * The event loop's thread to the store's, about store `store` (one thread holds every
 * store its process opens). Every message carries the host's clock: the store judges
 * time by it.
 */
export type ToStore = { store: number; nowMs: number } & (
  | { kind: 'open'; settings: ThreadSettings }
  | { kind: 'run'; id: number; command: keyof StoreCommands; input: unknown }
  | { kind: 'read'; id: number; read: ReadName; args: unknown[] }
  | { kind: 'touch'; stream: StreamState; atMs: number }
  | { kind: 'observe'; durable: boolean }
  | { kind: 'close'; id: number }
);

export type ObserverEvent = { [K in keyof StorageObserver]-?: { event: K; args: Parameters<NonNullable<StorageObserver[K]>> } }[keyof StorageObserver];

/** The stream cache's counters as they cross with each answer. */
export type CacheCounterList = [hits: number, misses: number, entries: number, bytes: number, largeAppendHits: number, largeAppendBytes: number];

export function toCounterList(c: StreamCacheCounters): CacheCounterList {
  return [c.hits, c.misses, c.entries, c.bytes, c.largeAppendHits, c.largeAppendBytes];
}

export function fromCounterList([hits, misses, entries, bytes, largeAppendHits, largeAppendBytes]: CacheCounterList): StreamCacheCounters {
  return { hits, misses, entries, bytes, largeAppendHits, largeAppendBytes };
}

/** The store's thread to the event loop's, about store `store`. Answers carry the stream cache's counters (for /metrics). */
export type FromStore = { store: number } & (
  | { kind: 'opened' }
  | { kind: 'openFailed'; error: WireError }
  | { kind: 'answer'; id: number; value: unknown; cache: CacheCounterList }
  | { kind: 'failed'; id: number; error: WireError }
  | { kind: 'commit'; events: unknown[] }
  | { kind: 'observed'; observed: ObserverEvent }
  | { kind: 'diskSpace'; full: boolean; freeBytes: number }
  | { kind: 'fatal'; error: WireError }
);

/** An error as it crosses: its class (when it is one of storage's), message, own fields and cause. */
export interface WireError {
  className: string | null;
  name: string;
  message: string;
  stack: string | undefined;
  fields: Record<string, unknown>;
  cause: WireError | undefined;
}

/** The storage errors that keep their class across the thread (every concrete one of errors.ts); any other arrives as a plain Error. */
const STORAGE_ERRORS: Record<string, { prototype: Error }> = Object.fromEntries(
  Object.entries(storageErrors).filter(([, value]) => typeof value === 'function' && value.prototype instanceof storageErrors.StorageError),
);

/** How deep a chain of causes crosses; deeper ones are cut (a cycle would not end). */
const MAX_CAUSE_DEPTH = 4;

export function toWire(error: unknown, depth = 0): WireError {
  if (!(error instanceof Error)) return { className: null, name: 'Error', message: String(error), stack: undefined, fields: {}, cause: undefined };
  const className = Object.hasOwn(STORAGE_ERRORS, error.constructor.name) ? error.constructor.name : null;
  const fields: Record<string, unknown> = {};
  // Own fields of plain values (`freeBytes`, `dataDir`, a SqliteError's `code`) and a
  // refusal's typed outcome; any other object might not be data (or hold a cycle).
  for (const [key, value] of Object.entries(error)) {
    if (key === 'protocol' || value === null || ['string', 'number', 'boolean'].includes(typeof value)) fields[key] = value;
  }
  const cause = depth < MAX_CAUSE_DEPTH && error.cause !== undefined ? toWire(error.cause, depth + 1) : undefined;
  return { className, name: error.name, message: error.message, stack: error.stack, fields, cause };
}

export function fromWire(wire: WireError): Error {
  const storageClass = wire.className === null ? undefined : STORAGE_ERRORS[wire.className];
  const error: Error = storageClass ? Object.create(storageClass.prototype) : new Error(wire.message);
  Object.defineProperty(error, 'message', { value: wire.message, writable: true, configurable: true });
  if (!storageClass && wire.name !== 'Error') Object.defineProperty(error, 'name', { value: wire.name, writable: true, configurable: true });
  if (wire.stack !== undefined) Object.defineProperty(error, 'stack', { value: wire.stack, writable: true, configurable: true });
  Object.assign(error, wire.fields);
  if (wire.cause !== undefined) Object.defineProperty(error, 'cause', { value: fromWire(wire.cause), writable: true, configurable: true });
  return error;
}

/**
 * Messages posted during one turn, sent together as one packet (codec.ts) at its end: a
 * burst of calls (a group commit's worth) reaches the other thread at once, so it lands in
 * one batch there, and a batch's answers come back in one packet.
 */
export class Outbox<T> {
  private pending: T[] = [];
  constructor(private readonly deliver: (packet: Packet, transfer: ArrayBuffer[]) => void) {}

  post(message: T): void {
    if (this.pending.length === 0) setImmediate(() => this.flush());
    this.pending.push(message);
  }

  private flush(): void {
    const messages = this.pending;
    this.pending = [];
    const { packet, transfer } = encode(messages);
    this.deliver(packet, transfer);
  }
}

/** The messages of a packet another thread's Outbox sent. */
export function unpack<T>(packet: Packet): T[] {
  return decode(packet) as T[];
}
