/**
 * WAL checkpoints off the event loop. SQLite checkpoints inside the COMMIT that grows the
 * WAL past `wal_autocheckpoint` pages: it copies the WAL's pages into the database file and
 * fsyncs it, on the event loop. For small commits that is a few milliseconds; after a 32 MiB
 * append it held every request for about 250 ms. Here a thread with a connection of its
 * own does it (checkpoint-worker.ts), nudged once about a mebibyte has been committed since
 * the last nudge (what 250 pages meant inline). The event loop's connection keeps a far
 * larger autocheckpoint as a backstop should the thread fall behind or fail; it then
 * copies only what is left.
 */
import { Worker } from 'node:worker_threads';
import { workerScript } from '../worker-script.js';
import type { FromCheckpoints, ToCheckpoints } from './checkpoint-worker.js';

/** Committed bytes (an estimate of WAL growth) between nudges. */
const NUDGE_BYTES = 1024 * 1024;

/** What a commit adds to the WAL beyond its appended bytes: the pages its rows and indexes touch, roughly. */
export const COMMIT_OVERHEAD_BYTES = 8 * 1024;

/**
 * The process's checkpoint thread, shared by its stores (a thread costs about 60 ms to
 * start, and a test process opens many servers). It starts when a store first needs a
 * checkpoint, not when one opens: a server that never commits a mebibyte never starts it
 * (a server's start to its first answer and SIGTERM took 0.93 s of CPU with it, 0.70 s
 * without). It holds the process open only while a store's close waits for it.
 */
class CheckpointThread {
  private static current: CheckpointThread | null = null;
  private readonly stores = new Map<number, WalCheckpointer>();
  private nextId = 1;
  private closing = 0;

  private constructor(private readonly worker: Worker) {
    worker.unref();
    worker.on('message', (answer: FromCheckpoints) => this.heard(answer));
    // A thread that fails leaves every store to its backstop; the next store opened starts another.
    worker.on('error', (error) => this.lost(error));
    worker.on('exit', (code) => this.lost(new Error(`the checkpoint thread exited with code ${code}`)));
  }

  static get(): CheckpointThread {
    CheckpointThread.current ??= new CheckpointThread(new Worker(workerScript(import.meta.url, 'checkpoint-worker')));
    return CheckpointThread.current;
  }

  register(store: WalCheckpointer, dbPath: string): number {
    const id = this.nextId++;
    this.stores.set(id, store);
    this.post({ kind: 'open', store: id, dbPath });
    return id;
  }

  post(message: ToCheckpoints): void {
    if (message.kind === 'close' && ++this.closing === 1) this.worker.ref();
    this.worker.postMessage(message);
  }

  private heard(answer: FromCheckpoints): void {
    const store = this.stores.get(answer.store);
    if (answer.kind === 'closed') {
      this.stores.delete(answer.store);
      if (--this.closing === 0) this.worker.unref();
    }
    store?.heard(answer);
  }

  private lost(error: Error): void {
    if (CheckpointThread.current === this) CheckpointThread.current = null;
    for (const store of this.stores.values()) store.lost(error);
    this.stores.clear();
  }
}

/** One store's checkpoints, on the process's checkpoint thread. */
export class WalCheckpointer {
  /** The thread and this store's id on it, once the first checkpoint was asked for. */
  private thread: CheckpointThread | null = null;
  private id = 0;
  private running = false;
  /** Nudged while running: another checkpoint follows this one. */
  private again = false;
  private bytesSinceNudge = 0;
  /** Closed: asked to close (or its thread gone), then answered; the backstop checkpoints from then on. */
  private state: 'open' | 'closing' | 'closed' = 'open';
  private readonly closed: Promise<void>;
  private markClosed!: () => void;
  /** The latest checkpoint failure, for diagnosis; the next nudge tries again. */
  lastFailure: string | null = null;

  constructor(private readonly dbPath: string) {
    this.closed = new Promise((resolve) => (this.markClosed = resolve));
  }

  /** Whether this store has a connection on the checkpoint thread (from its first checkpoint on). */
  get onThread(): boolean {
    return this.thread !== null;
  }

  /** A transaction committed about `bytes` to the WAL. */
  committed(bytes: number): void {
    this.bytesSinceNudge += bytes;
    if (this.bytesSinceNudge < NUDGE_BYTES || this.state !== 'open') return;
    this.bytesSinceNudge = 0;
    if (this.running) this.again = true;
    else this.start();
  }

  private start(): void {
    this.running = true;
    if (this.thread === null) {
      this.thread = CheckpointThread.get();
      this.id = this.thread.register(this, this.dbPath);
    }
    this.thread.post({ kind: 'checkpoint', store: this.id });
  }

  heard(answer: FromCheckpoints): void {
    if (answer.kind === 'closed') return this.end();
    this.running = false;
    if (answer.kind === 'failed') this.lastFailure = answer.message;
    if (!this.again || this.state !== 'open') return;
    this.again = false;
    this.start();
  }

  /** The thread failed or ended. */
  lost(error: Error): void {
    this.lastFailure = error.message;
    this.end();
  }

  private end(): void {
    this.state = 'closed';
    this.markClosed();
  }

  /** Closes the thread's connection to the store; resolves once it is closed (at once if the thread is gone or never had one). */
  close(): Promise<void> {
    if (this.state === 'open') {
      this.state = 'closing';
      if (this.thread === null) this.end();
      else this.thread.post({ kind: 'close', store: this.id });
    }
    return this.closed;
  }
}
