/**
 * Every error the storage layer raises, in one place. `StorageError` is their common base;
 * a `StorageRefusal` is one a request is answered with, carrying its typed outcome
 * (`protocol`: a code of the one table, src/protocol/errors.ts, with the facts that go
 * with it), so the HTTP layer maps storage failures with one check (`storageRefusal`).
 * The others are the engines' own signals: a batch's storage failure, a commit whose
 * outcome is unknown, a data directory in use.
 */
import { protocolError, type ProtocolError } from '../protocol/errors.js';

/** Raised by the storage layer. */
export abstract class StorageError extends Error {}

/** A storage error a request is answered with: its code and facts are `protocol`. */
export abstract class StorageRefusal extends StorageError {
  abstract readonly protocol: ProtocolError;
}

/** Thrown to a command whose batch could not be committed. */
export class StorageUnavailableError extends StorageRefusal {
  readonly protocol = protocolError('STORAGE_UNAVAILABLE', 'storage is unavailable; the write was not applied', { retryAfterSeconds: 1 });
  constructor(override readonly cause: unknown) {
    super(`storage unavailable: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

/**
 * A read of a stream whose name keeps losing stored bytes (dropped and recreated, or
 * trimmed) faster than commits become durable: each such commit makes its readers wait
 * one more fsync, and past a bound they are refused rather than held without end.
 */
export class ReadNotSettledError extends StorageRefusal {
  readonly protocol = protocolError('UNAVAILABLE', 'the stream is being removed or trimmed faster than reads can settle; retry later', {
    retryAfterSeconds: 1,
  });
  constructor(name: string, waits: number) {
    super(`read of ${name} not settled after ${waits} waits for removals to become durable`);
  }
}

/**
 * The storage itself failed inside a batch (disk full, I/O error, a transaction the
 * database abandoned). The whole batch is refused with STORAGE_UNAVAILABLE and applies
 * nothing, rather than the one command failing while the others commit.
 */
export class StorageFailure extends StorageError {
  constructor(override readonly cause: unknown) {
    super(`storage failed: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

/**
 * The storage could not make a committed batch durable (an fsync failed). Whether its
 * writes survive is unknown until the server restarts and reads the disk, so the store
 * refuses everything from then on.
 */
export class DurabilityLostError extends StorageRefusal {
  readonly protocol = protocolError('STORAGE_UNAVAILABLE', 'storage failed while making the write durable; its outcome is unknown: retry it unchanged', {
    retryAfterSeconds: 1,
  });
  constructor(override readonly cause: unknown) {
    super(`durability lost: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

/**
 * The connection to a networked database was lost while its COMMIT was under way: the
 * batch may or may not have applied. Its commands are told so (retry unchanged), and the
 * store goes on, since the database, not this process, holds the truth.
 */
export class CommitOutcomeUnknownError extends StorageError {
  constructor(override readonly cause: unknown) {
    super(`commit outcome unknown: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

/** A read could not reach the storage (a networked database that is down or restarting). */
export class ReadUnavailableError extends StorageRefusal {
  readonly protocol = protocolError('STORAGE_UNAVAILABLE', 'storage is unavailable; retry later', { retryAfterSeconds: 1 });
  constructor(override readonly cause: unknown) {
    super(`storage unavailable for a read: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

/** Thrown to a command whose own step failed on an invariant; the rest of the batch commits. */
export class CommandFailedError extends StorageRefusal {
  readonly protocol = protocolError('INTERNAL', 'the server failed to process the request');
  constructor(override readonly cause: unknown) {
    super(`command failed: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

/** Refused before it reached the database: the disk is below its free-space limit. */
export class InsufficientStorageError extends StorageRefusal {
  readonly protocol = protocolError('INSUFFICIENT_STORAGE', 'the server is short of disk space; the write was not applied (deletes and retention still work)', {
    retryAfterSeconds: 10,
  });
  constructor(readonly freeBytes: number) {
    super(`insufficient storage: ${freeBytes} bytes free`);
  }
}

/** The cold tier's uploads are behind by more than their limit (core/cold-tier.ts, coldBacklogRefusal). */
export class ColdBacklogError extends StorageRefusal {
  constructor(readonly protocol: ProtocolError) {
    super(protocol.message);
  }
}

/** A range of history the cold tier holds is in an object that is missing, corrupt or another range's. */
export class ColdObjectInvalidError extends StorageRefusal {
  readonly protocol: ProtocolError;
  constructor(stream: string, start: number, end: number, key: string, why: string) {
    super(`cold object ${key} of stream ${stream} (bytes ${start} to ${end}) is unusable: ${why}`);
    this.protocol = protocolError('COLD_OBJECT_INVALID', `the history of stream ${stream} from byte ${start} to ${end} is in object ${key}, which ${why}; nothing of that range was served`);
  }
}

/** A read needed the cold tier's object store, which could not be reached or answered an error. */
export class ColdStoreUnavailableError extends StorageRefusal {
  readonly protocol: ProtocolError;
  constructor(stream: string, start: number, end: number, override readonly cause: unknown) {
    super(`cold store unavailable reading stream ${stream} (bytes ${start} to ${end}): ${cause instanceof Error ? cause.message : String(cause)}`);
    this.protocol = protocolError('COLD_STORE_UNAVAILABLE', `the history of stream ${stream} from byte ${start} to ${end} is in object storage, which could not be read; retry later`, {
      retryAfterSeconds: 1,
    });
  }
}

/** Another process (or another store of this one) has the data directory open. */
export class DataDirInUseError extends StorageError {
  readonly code = 'DATA_DIR_IN_USE';
  constructor(readonly dataDir: string) {
    super(`the data directory ${dataDir} is in use by another rill server (its rill.lock is held); stop that one first`);
  }
}

/** The typed answer a storage error carries; null for any other error. */
export function storageRefusal(error: unknown): ProtocolError | null {
  return error instanceof StorageRefusal ? error.protocol : null;
}
