/**
 * The storage thread: it opens the SQLite stores of its process (a server has one; a test
 * process may run several servers) and runs everything that touches them (batches, their
 * COMMITs, the indexing of appends, reads), so that none of it holds the event loop that
 * serves requests. host.ts is the other side.
 */
import { parentPort } from 'node:worker_threads';
import { SqliteStore } from '../sqlite/engine.js';
import { StorageUnavailableError } from '../errors.js';
import { NO_CACHE, type Store } from '../store.js';
import type { Packet } from './codec.js';
import { Outbox, toCounterList, toWire, unpack, type FromStore, type ObserverEvent, type ThreadSettings, type ToStore } from './wire.js';

const port = parentPort!;
const outbox = new Outbox<FromStore>((packet, transfer) => port.postMessage(packet, transfer));

/** One open store, with the host's clock as of its latest message: the store judges time by it, as it would by the host's own. */
interface Held {
  store: Store;
  clock: { nowMs: number };
  forwarding: 'no' | 'committed' | 'durable';
}

const stores = new Map<number, Held>();

function open(id: number, settings: ThreadSettings, nowMs: number): void {
  const send = (message: DistributiveOmit<FromStore, 'store'>): void => outbox.post({ ...message, store: id } as FromStore);
  const clock = { nowMs };
  let store: Store;
  try {
    store = new SqliteStore({ ...settings, nowMs: () => clock.nowMs, onDiskSpace: (full, freeBytes) => send({ kind: 'diskSpace', full, freeBytes }) });
  } catch (error) {
    return send({ kind: 'openFailed', error: toWire(error) });
  }
  store.onCommit((events) => send({ kind: 'commit', events }));
  store.onFatal((error) => send({ kind: 'fatal', error: toWire(error) }));
  stores.set(id, { store, clock, forwarding: 'no' });
  send({ kind: 'opened' });
}

const ignore = (): void => {};

/**
 * Tells the host of every batch, as its observers would be told in the host's own thread:
 * one forwarder of batches, and one of what durable batches appended once the host wants
 * that (adding it up costs the append path a little, so only then).
 */
function forward(id: number, held: Held, durable: boolean): void {
  const tell = (observed: ObserverEvent): void => outbox.post({ store: id, kind: 'observed', observed });
  if (held.forwarding === 'no') {
    held.store.observe({ batchCommitted: (...args) => tell({ event: 'batchCommitted', args }), batchRefused: () => tell({ event: 'batchRefused', args: [] }) });
    held.forwarding = 'committed';
  }
  if (durable && held.forwarding === 'committed') {
    held.store.observe({ batchCommitted: ignore, batchRefused: ignore, batchDurable: (...args) => tell({ event: 'batchDurable', args }) });
    held.forwarding = 'durable';
  }
}

function answer(id: number, held: Held, call: number, work: Promise<unknown>): void {
  work.then(
    (value) => {
      const cache = held.store.cacheCounters?.() ?? NO_CACHE;
      outbox.post({ store: id, kind: 'answer', id: call, value, cache: toCounterList(cache) });
    },
    (error: unknown) => outbox.post({ store: id, kind: 'failed', id: call, error: toWire(error) }),
  );
}

/** Closes the store, forgets it, and answers once it is closed. */
function close(id: number, held: Held, call: number): void {
  stores.delete(id);
  answer(id, held, call, held.store.close());
}

function refuseClosed(message: Exclude<ToStore, { kind: 'open' }>): void {
  if (message.kind !== 'run' && message.kind !== 'read' && message.kind !== 'close') return;
  const error = new StorageUnavailableError(new Error('store is closed'));
  outbox.post({ store: message.store, kind: 'failed', id: message.id, error: toWire(error) });
}

function serve(message: ToStore): void {
  if (message.kind === 'open') return open(message.store, message.settings, message.nowMs);
  const held = stores.get(message.store);
  // The host refuses calls once it closes a store; should one cross anyway, it is refused
  // here too, never allowed to end the thread that other stores of the process share.
  if (held === undefined) return refuseClosed(message);
  held.clock.nowMs = message.nowMs;
  switch (message.kind) {
    case 'run':
      return answer(message.store, held, message.id, held.store.run(message.command, message.input as never));
    case 'read': {
      const read = held.store[message.read] as (...args: unknown[]) => Promise<unknown>;
      return answer(message.store, held, message.id, read.apply(held.store, message.args));
    }
    case 'touch':
      return held.store.touch(message.stream, message.atMs);
    case 'observe':
      return forward(message.store, held, message.durable);
    case 'close':
      return close(message.store, held, message.id);
  }
}

port.on('message', (packet: Packet) => unpack<ToStore>(packet).forEach(serve));

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
