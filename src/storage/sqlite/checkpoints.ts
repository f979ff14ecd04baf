/**
 * WAL checkpoints off the event loop. SQLite checkpoints inside the COMMIT that grows the
 * WAL past `wal_autocheckpoint` pages: it copies the WAL's pages into the database file and
 * fsyncs it, on the event loop. For small commits that is a few milliseconds; after a 32 MiB
 * append it held every request for about 250 ms. Here a thread with a connection of its
 * own does it, nudged once about a mebibyte has been committed since the last nudge (what
 * 250 pages meant inline). The event loop's connection keeps a far larger autocheckpoint as
 * a backstop should this thread fall behind or fail; it then copies only what is left.
 */
import { Worker } from 'node:worker_threads';
import { workerScript } from '../worker-script.js';

/** Committed bytes (an estimate of WAL growth) between nudges. */
const NUDGE_BYTES = 1024 * 1024;

/** What a commit adds to the WAL beyond its appended bytes: the pages its rows and indexes touch, roughly. */
export const COMMIT_OVERHEAD_BYTES = 8 * 1024;

type Answer = { kind: 'done'; walPages: number; copiedPages: number } | { kind: 'failed'; message: string };

export class WalCheckpointer {
  private readonly worker: Worker;
  private running = false;
  /** Nudged while running: another checkpoint follows this one. */
  private again = false;
  private bytesSinceNudge = 0;
  /** Why the thread is gone (it failed to open or died); the backstop checkpoints from then on. */
  private lost: Error | null = null;
  private readonly exited: Promise<void>;
  /** The latest checkpoint failure, for tests and diagnosis; the next nudge tries again. */
  lastFailure: string | null = null;
  /** Checkpoints completed, for tests. */
  completed = 0;

  constructor(dbPath: string) {
    this.worker = new Worker(workerScript(import.meta.url, 'checkpoint-worker'), { workerData: { dbPath } });
    this.worker.unref();
    this.worker.on('message', (answer: Answer) => this.heard(answer));
    this.worker.on('error', (error) => (this.lost = error));
    this.exited = new Promise((resolve) => this.worker.once('exit', () => resolve()));
  }

  /** A transaction committed about `bytes` to the WAL. */
  committed(bytes: number): void {
    this.bytesSinceNudge += bytes;
    if (this.bytesSinceNudge < NUDGE_BYTES || this.lost !== null) return;
    this.bytesSinceNudge = 0;
    if (this.running) this.again = true;
    else this.start();
  }

  private start(): void {
    this.running = true;
    this.worker.postMessage({ kind: 'checkpoint' });
  }

  private heard(answer: Answer): void {
    this.running = false;
    if (answer.kind === 'failed') this.lastFailure = answer.message;
    else this.completed++;
    if (!this.again) return;
    this.again = false;
    this.start();
  }

  /** Closes the thread's connection; resolves once the thread has ended. */
  close(): Promise<void> {
    if (this.lost === null) this.worker.postMessage({ kind: 'close' });
    return this.exited;
  }
}
