/**
 * The commit notifier. Long-poll and SSE readers wait here for the stream they follow
 * to change; each committed batch wakes the readers of the streams it touched. Live
 * connections are counted against a limit so that readers cannot exhaust the server.
 */
import type { CommitEvent, Store } from '../storage/store.js';
import { SharedEvents } from './shared.js';

export type WaitResult = 'changed' | 'timeout' | 'aborted';

export class LiveHub {
  /** Waits by stream name; each is told why it ends ('changed' on a commit, 'aborted' on drain). */
  private readonly waiters = new Map<string, Set<(result: WaitResult) => void>>();
  private connections = 0;
  private readonly unsubscribe: () => void;
  private draining = false;
  private readonly drainListeners = new Set<() => void>();
  private readonly abortListeners = new WeakMap<AbortSignal, Set<() => void>>();
  /** Reads shared by the live readers of one stream state (see shared.ts). */
  readonly shared = new SharedEvents();

  constructor(
    store: Store,
    readonly maxConnections: number,
  ) {
    this.unsubscribe = store.onCommit((events) => this.wake(events));
  }

  get liveConnections(): number {
    return this.connections;
  }

  /** Takes a live-connection slot; false when the server holds too many. */
  acquire(): boolean {
    if (this.draining || this.connections >= this.maxConnections) return false;
    this.connections++;
    return true;
  }

  release(): void {
    if (this.connections <= 0) throw new Error('invariant: live connection released twice');
    this.connections--;
  }

  private wake(events: CommitEvent[]): void {
    for (const event of events) {
      this.shared.drop(event.name);
      const set = this.waiters.get(event.name);
      if (!set) continue;
      for (const wakeUp of [...set]) wakeUp('changed');
    }
  }

  /** Resolves when the stream `name` changes, the timeout passes, or `signal` aborts. */
  wait(name: string, timeoutMs: number, signal?: AbortSignal): Promise<WaitResult> {
    return new Promise((resolve) => {
      let set = this.waiters.get(name);
      if (!set) {
        set = new Set();
        this.waiters.set(name, set);
      }
      const waiters = set;
      let stopWatchingAbort = () => {};
      // A wait ends once, by a commit, its timeout, its signal or the drain (which ends
      // every wait through `waiters`, so a wait adds itself to no other set).
      const finish = (result: WaitResult) => {
        if (!waiters.delete(finish)) return;
        clearTimeout(timer);
        if (waiters.size === 0 && this.waiters.get(name) === waiters) this.waiters.delete(name);
        stopWatchingAbort();
        resolve(result);
      };
      const timer = setTimeout(() => finish('timeout'), Math.max(0, timeoutMs));
      waiters.add(finish);
      if (signal?.aborted || this.draining) finish('aborted');
      else if (signal) stopWatchingAbort = this.watchAbort(signal, () => finish('aborted'));
    });
  }

  /**
   * Calls `listener` when `signal` aborts. A live reader waits once per commit on the
   * same signal; it gets one 'abort' listener for its life, since adding and removing
   * EventTarget listeners on every wait is a real cost when a commit wakes thousands.
   */
  private watchAbort(signal: AbortSignal, listener: () => void): () => void {
    let listeners = this.abortListeners.get(signal);
    if (!listeners) {
      const forSignal = new Set<() => void>();
      signal.addEventListener('abort', () => [...forSignal].forEach((call) => call()), { once: true });
      this.abortListeners.set(signal, forSignal);
      listeners = forSignal;
    }
    const watching = listeners;
    watching.add(listener);
    return () => watching.delete(listener);
  }

  /** Calls `listener` when the server starts draining (at once if it already is). */
  onDrain(listener: () => void): () => void {
    if (this.draining) {
      listener();
      return () => {};
    }
    this.drainListeners.add(listener);
    return () => this.drainListeners.delete(listener);
  }

  /** Ends every wait (live readers answer and close) and refuses new live readers. */
  drain(): void {
    this.draining = true;
    for (const set of [...this.waiters.values()]) for (const finish of [...set]) finish('aborted');
    for (const listener of [...this.drainListeners]) listener();
  }

  get isDraining(): boolean {
    return this.draining;
  }

  close(): void {
    this.drain();
    this.unsubscribe();
  }
}
