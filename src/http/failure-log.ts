/**
 * A storage failure is logged once when it begins and once when it ends, with the count
 * of refusals between, not once per refused request: on a full disk each refusal logged
 * a 2.4 KB stack trace, 5.4 MB for 2,232 refusals, onto the disk that was full.
 */
import type { Logger } from 'pino';
import { InsufficientStorageError } from '../storage/errors.js';

export class StorageFailureLog {
  private refusals = 0;
  private sinceMs = 0;

  constructor(
    private readonly log: Logger,
    private readonly now: () => number,
  ) {}

  /** A request (with its id), or the expiry sweep, was refused because the storage failed. */
  readonly refused = (error: unknown, reqId?: string): void => {
    // A disk short of space is not a failure: the store logs when it begins and ends (openStore).
    if (error instanceof InsufficientStorageError) return;
    if (this.refusals++ > 0) return;
    this.sinceMs = this.now();
    this.log.warn({ err: error, reqId }, 'storage is failing: requests that need it answer 503 until it recovers');
  };

  /** A request that needed the storage was served: a failure, if one was under way, has ended. */
  readonly served = (): void => {
    if (this.refusals === 0) return;
    this.log.warn({ refusals: this.refusals, failingMs: this.now() - this.sinceMs }, 'storage recovered');
    this.refusals = 0;
  };
}
