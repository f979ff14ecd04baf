/**
 * The commit notifier. Long-poll and SSE readers wait here for the stream they follow
 * to change; each committed batch wakes the readers of the streams it touched. Live
 * connections are counted against a limit so that readers cannot exhaust the server.
 */
import type { StreamState } from '../core/types.js';
import type { CommitEvent, Store } from '../storage/store.js';
import { Latch } from './latch.js';
import { DEFAULT_REMOTE_CHECK_MS, RemoteWatch } from './remote.js';
import { SharedEvents } from './shared.js';

export type WaitResult = 'changed' | 'timeout' | 'aborted';

/**
 * A waiting reader that can take a commit without waking: the hub loads the stream once
 * for all its followers, has one follower of each `key()` prepare what the commit brought
 * (a read and a rendering), and hands that to every follower of the key in one
 * synchronous pass. With a thousand SSE readers on one stream, each waking, loading the
 * stream and looking up the shared event on its own cost about as much as all the socket
 * writes together.
 */
export interface Follower<T> {
  /**
   * Followers with equal keys take one prepared change: the key must hold everything
   * `prepare` depends on besides the stream (the position and rendering).
   */
  key(): string;
  prepare(stream: StreamState | undefined): Promise<T>;
  /** Takes the change synchronously; false ends the wait with 'changed', so the reader goes on by itself. */
  take(prepared: T): boolean;
}

type Finish = (result: WaitResult) => void;
type Waiters = Map<Finish, Follower<unknown> | undefined>;

export class LiveHub {
  /** Waits by stream name; each is told why it ends ('changed' on a commit, 'aborted' on a hang-up or the drain). */
  private readonly waiters = new Map<string, Waiters>();
  /** Streams whose followers are being handed a change, and those that changed again meanwhile. */
  private readonly delivering = new Set<string>();
  private readonly redeliver = new Set<string>();
  private connections = 0;
  private readonly unsubscribe: () => void;
  /** Fires when the server starts draining. */
  private readonly drained = new Latch();
  /** Reads shared by the live readers of one stream state (see shared.ts). */
  readonly shared = new SharedEvents();

  /** Commits on other nodes, when the store is shared by several. */
  private readonly remoteWatch: RemoteWatch | null;

  constructor(
    private readonly store: Store,
    readonly maxConnections: number,
    remoteCheckMs = DEFAULT_REMOTE_CHECK_MS,
  ) {
    this.unsubscribe = store.onCommit((events) => this.wake(events));
    this.remoteWatch = store.remote ? new RemoteWatch(store.remote, this, remoteCheckMs) : null;
  }

  get liveConnections(): number {
    return this.connections;
  }

  /** Takes a live-connection slot; false when the server holds too many. */
  acquire(): boolean {
    if (this.drained.fired || this.connections >= this.maxConnections) return false;
    this.connections++;
    return true;
  }

  release(): void {
    if (this.connections <= 0) throw new Error('invariant: live connection released twice');
    this.connections--;
  }

  private wake(events: CommitEvent[]): void {
    for (const event of events) this.wakeStream(event.name);
  }

  /** Streams changed by a commit this node did not see: another node's (see remote.ts). */
  wakeNames(names: Iterable<string>): void {
    for (const name of names) this.wakeStream(name);
  }

  /** Live readers waiting on the stream now (SSE readers between events, long-polls). */
  waitingOn(name: string): number {
    return this.waiters.get(name)?.size ?? 0;
  }

  /** The streams live readers wait on now. */
  watchedNames(): string[] {
    return [...this.waiters.keys()];
  }

  private wakeStream(name: string): void {
    this.shared.drop(name);
    const set = this.waiters.get(name);
    if (!set) return;
    let followed = false;
    for (const [finish, follower] of [...set]) {
      if (follower) followed = true;
      else finish('changed');
    }
    if (followed) this.handOver(name);
  }

  /** Hands a commit to the stream's followers, one hand-over at a time so that none takes changes out of order. */
  private handOver(name: string): void {
    if (this.delivering.has(name)) return void this.redeliver.add(name);
    this.delivering.add(name);
    const done = () => this.delivering.delete(name);
    this.deliver(name).then(done, done);
  }

  private async deliver(name: string): Promise<void> {
    do {
      this.redeliver.delete(name);
      const set = this.waiters.get(name);
      if (!set) return;
      const byKey = new Map<string, Array<[Finish, Follower<unknown>]>>();
      for (const [finish, follower] of set) {
        if (!follower) continue;
        const key = follower.key();
        const group = byKey.get(key);
        if (group) group.push([finish, follower]);
        else byKey.set(key, [[finish, follower]]);
      }
      if (byKey.size > 0) await this.deliverGroups(name, set, byKey);
    } while (this.redeliver.has(name));
  }

  private async deliverGroups(name: string, set: Waiters, byKey: Map<string, Array<[Finish, Follower<unknown>]>>): Promise<void> {
    let stream: StreamState | undefined;
    try {
      stream = await this.store.getStream(name);
    } catch {
      // The readers meet the failure on their own, and answer it as they do.
      for (const group of byKey.values()) for (const [finish] of group) finish('changed');
      return;
    }
    for (const group of byKey.values()) {
      let prepared: unknown;
      try {
        prepared = await group[0]![1].prepare(stream);
      } catch {
        for (const [finish] of group) finish('changed');
        continue;
      }
      // A follower whose wait ended meanwhile (timeout, hang-up, drain) takes nothing.
      for (const [finish, follower] of group) if (set.has(finish) && !takes(follower, prepared)) finish('changed');
    }
  }

  /**
   * Resolves when the stream `name` changes, the timeout passes, or the reader hangs up. A
   * `follower` is handed the changes it can take instead (see Follower), and the wait
   * goes on.
   */
  wait(name: string, timeoutMs: number, hangup?: Latch, follower?: Follower<unknown>): Promise<WaitResult> {
    return new Promise((resolve) => {
      let set = this.waiters.get(name);
      if (!set) {
        set = new Map();
        this.waiters.set(name, set);
      }
      const waiters = set;
      let stopWatchingHangup = () => {};
      // A wait ends once, by a commit, its timeout, a hang-up or the drain (which ends
      // every wait through `waiters`, so a wait adds itself to no other set).
      const finish = (result: WaitResult) => {
        if (!waiters.delete(finish)) return;
        clearTimeout(timer);
        if (waiters.size === 0 && this.waiters.get(name) === waiters) this.waiters.delete(name);
        stopWatchingHangup();
        resolve(result);
      };
      const timer = setTimeout(() => finish('timeout'), Math.max(0, timeoutMs));
      waiters.set(finish, follower);
      if (hangup?.fired || this.drained.fired) finish('aborted');
      else if (hangup) stopWatchingHangup = hangup.watch(() => finish('aborted'));
    });
  }

  /** Calls `listener` when the server starts draining (at once if it already is). */
  onDrain(listener: () => void): () => void {
    return this.drained.watch(listener);
  }

  /** Ends every wait (live readers answer and close) and refuses new live readers. */
  drain(): void {
    this.drained.fire();
    for (const set of [...this.waiters.values()]) for (const finish of [...set.keys()]) finish('aborted');
  }

  get isDraining(): boolean {
    return this.drained.fired;
  }

  close(): void {
    this.drain();
    this.unsubscribe();
    this.remoteWatch?.close();
  }
}

/** A follower's take that throws leaves it to its reader, which meets the error itself. */
function takes(follower: Follower<unknown>, prepared: unknown): boolean {
  try {
    return follower.take(prepared);
  } catch {
    return false;
  }
}
