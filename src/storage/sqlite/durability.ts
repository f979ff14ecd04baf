/**
 * Group commit on the WAL: commits are made durable by fsyncing the WAL file from
 * libuv's thread pool, so the event loop keeps working (and committing later batches)
 * while the disk flushes. One fsync covers every commit made before it began. Two may
 * be in flight: a commit made during an fsync starts the next one at once instead of
 * waiting for it to end (append p99 8 -> 7 ms at 500 streams here); whichever ends
 * first releases what it covers, and one that ends later covering less changes nothing.
 *
 * Until a commit is durable, readers keep seeing the state before it: for each stream
 * name changed by a not-yet-durable commit, its last durable state is kept here, with
 * the states its pending commits leave, which become visible as fsyncs cover them.
 * Appends only add bytes past the durable tail, so the durable state reads whole. A
 * commit that removes stored bytes (a drop, a recreation, a trim, a replaced snapshot
 * body) leaves the durable state naming bytes that are gone: readers of that name wait
 * until it is durable.
 */
import { closeSync, fdatasync, fsyncSync, openSync } from 'node:fs';
import type { StreamState } from '../../core/types.js';
import type { StreamChange } from './cache.js';

interface PendingName {
  /** The state readers see (null: no stream). */
  durable: StreamState | null;
  /** States left by commits not yet durable, oldest first. */
  commits: Array<{ seq: number; after: StreamState | null; removesBytes: boolean }>;
}

interface Waiter {
  /** The commit the waiter needs durable. */
  seq: number;
  done: (error?: unknown) => void;
}

/** The flush: `fs.fdatasync`, or a stand-in that tests complete in the order they choose. */
export type Fdatasync = (fd: number, done: (error: NodeJS.ErrnoException | null) => void) => void;

/** fsyncs of the WAL in flight at once. */
const MAX_SYNCS_IN_FLIGHT = 2;

export class WalDurability {
  private fd: number | null = null;
  private commitSeq = 0;
  private syncsInFlight = 0;
  /** The newest commit an fsync has been started for, and the newest known durable. */
  private requestedSeq = 0;
  private durableSeq = 0;
  private failed: unknown = undefined;
  private waiters: Waiter[] = [];
  /**
   * Names changed by commits not yet durable. Replaced by a new Map whenever it empties:
   * a long-lived Map churned per commit would keep its dead entries reachable from the
   * old generation and have V8 promote them (see Drain in http/server.ts).
   */
  private pending = new Map<string, PendingName>();

  constructor(
    private readonly walPath: string,
    private readonly dirPath: string,
    private readonly flush: Fdatasync = fdatasync,
    /** Called whenever an fsync ends, however it ended: another may start (see `hasRoom`). */
    private readonly onRoom: () => void = () => {},
  ) {}

  /** A transaction committed; `changes` holds each changed name's state before and after it. */
  committed(changes: Map<string, StreamChange>, trimmedIds?: ReadonlySet<number>): void {
    this.commitSeq++;
    for (const [name, change] of changes) {
      let entry = this.pending.get(name);
      if (!entry) {
        entry = { durable: change.before, commits: [] };
        this.pending.set(name, entry);
      }
      entry.commits.push({ seq: this.commitSeq, after: change.after, removesBytes: removesStoredBytes(change.before, change.after, trimmedIds) });
    }
  }

  /** The durable state of a name changed by a pending commit; undefined when none is pending. */
  durableState(name: string): StreamState | null | undefined {
    return this.pending.get(name)?.durable;
  }

  /**
   * The newest pending commit on `name` that removed stored bytes its durable state still
   * names; readers must wait for it to be durable. Undefined when there is none.
   */
  pendingRemoval(name: string): number | undefined {
    const commits = this.pending.get(name)?.commits ?? [];
    for (let i = commits.length - 1; i >= 0; i--) if (commits[i]!.removesBytes) return commits[i]!.seq;
    return undefined;
  }

  /** The newest commit so far, to wait for with `whenDurable`. */
  lastCommit(): number {
    return this.commitSeq;
  }

  /** Calls `done` once commit `seq` (by default the newest) is durable, at once if it is. */
  whenDurable(done: (error?: unknown) => void, seq = this.commitSeq): void {
    if (this.failed !== undefined) return done(this.failed);
    if (seq <= this.durableSeq) return done();
    this.waiters.push({ seq, done });
    this.sync();
  }

  private descriptor(): number {
    if (this.fd === null) {
      this.fd = openSync(this.walPath, 'r');
      // The WAL's directory entry must be durable too, once, for a power loss to find it.
      const dir = openSync(this.dirPath, 'r');
      try {
        fsyncSync(dir);
      } finally {
        closeSync(dir);
      }
    }
    return this.fd;
  }

  /**
   * Whether an fsync could start now for a new commit. When none can, a commit made now
   * would wait for one to end anyway, and committing later lets more writes share it.
   */
  hasRoom(): boolean {
    return this.syncsInFlight < MAX_SYNCS_IN_FLIGHT;
  }

  private sync(): void {
    if (!this.hasRoom() || this.requestedSeq >= this.commitSeq || this.waiters.length === 0) return;
    const covered = this.commitSeq;
    let fd: number;
    try {
      fd = this.descriptor();
    } catch (error) {
      return this.fail(error);
    }
    this.requestedSeq = covered;
    this.syncsInFlight++;
    // fdatasync, as SQLite itself uses: the data and the size needed to read it back, not timestamps.
    this.flush(fd, (error) => {
      this.syncsInFlight--;
      this.onRoom();
      // Once an fsync failed nothing is known durable, whatever later ones answer.
      if (this.failed !== undefined) return;
      if (error) return this.fail(error);
      if (covered > this.durableSeq) {
        this.durableSeq = covered;
        this.reached(covered);
      }
      this.sync();
    });
  }

  /** Every commit up to `covered` is durable: readers may see it, writers hear of it. */
  private reached(covered: number): void {
    for (const [name, entry] of this.pending) {
      while (entry.commits.length > 0 && entry.commits[0]!.seq <= covered) entry.durable = entry.commits.shift()!.after;
      if (entry.commits.length === 0) this.pending.delete(name);
    }
    if (this.pending.size === 0) this.pending = new Map();
    const ready = this.waiters.filter((w) => w.seq <= covered);
    this.waiters = this.waiters.filter((w) => w.seq > covered);
    for (const waiter of ready) waiter.done();
  }

  /** An fsync failed: what it covered may or may not be on disk. Nothing is durable from now on. */
  private fail(error: unknown): void {
    this.failed = error;
    const waiters = this.waiters;
    this.waiters = [];
    for (const waiter of waiters) waiter.done(error);
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}

/**
 * Whether a commit took away bytes that a reader of the state before it would read. A
 * raised earliest offset removes bytes only when the commit deleted some (`trimmedIds`,
 * the streams it ran trimBefore on): a retention policy raises it at every append of a
 * stream and deletes in 1 MiB steps, and making every reader of that stream wait for the
 * fsync in between would be for nothing.
 */
function removesStoredBytes(before: StreamState | null, after: StreamState | null, trimmedIds: ReadonlySet<number> | undefined): boolean {
  if (before === null) return false;
  if (after === null || after.id !== before.id) return true;
  // Not told which streams were trimmed: any raise may have deleted bytes.
  if (after.earliestOffset > before.earliestOffset && (trimmedIds === undefined || trimmedIds.has(after.id))) return true;
  // One body is stored per stream: publishing another replaces the one `before` names.
  const body = before.snapshot;
  if (!body) return false;
  return after.snapshot?.offset !== body.offset || after.snapshot.digest !== body.digest;
}
