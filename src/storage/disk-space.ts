/**
 * Free disk space as a limit on writes (the way Elasticsearch's flood-stage watermark and
 * RabbitMQ's disk_free_limit work): once the data directory's filesystem has less than
 * `minFreeBytes` free, writes that add data are refused with 507 INSUFFICIENT_STORAGE
 * before they reach the database, while deletes, retention and expiry still run. They
 * have that room to work in, so an operator can always free space through rill, and a
 * restart on such a disk has room to open the database and recover.
 *
 * Writes resume once free space is back above the limit by a quarter of it.
 *
 * Free space counts the database's own free pages (`freeInStoreBytes`): a deleted
 * stream's pages are reused by later writes before the file grows, so writes resume as
 * soon as a delete frees enough, although the filesystem shows no more free space.
 */
import type { CommandName, StoreCommands } from './store.js';
import { InsufficientStorageError } from './errors.js';
import { filesystemFreeBytes, type SpaceReserve } from './space-reserve.js';

/**
 * Disk bytes a command may take, or 0 for one that frees space or takes next to none.
 * Data is counted twice: it is written to the WAL, then to the database file (and held
 * appends once more when they are indexed, which the limit's room absorbs).
 */
export function bytesAdded<K extends CommandName>(kind: K, input: StoreCommands[K]['input']): number {
  const ROW_BYTES = 4096;
  switch (kind) {
    case 'append':
      return 2 * (input as StoreCommands['append']['input']).request.data.length + ROW_BYTES;
    case 'appendTransaction': {
      const { operations } = input as StoreCommands['appendTransaction']['input'];
      return operations.reduce((sum, { request }) => sum + 2 * request.data.length + ROW_BYTES, 0);
    }
    case 'createStream':
      return 2 * (input as StoreCommands['createStream']['input']).data.length + ROW_BYTES;
    case 'publishSnapshot':
      return 2 * (input as StoreCommands['publishSnapshot']['input']).body.length + ROW_BYTES;
    case 'putAttrs':
    case 'createBucket':
    case 'setBucketSettings':
      return ROW_BYTES;
    case 'createSubscription':
      return ROW_BYTES * 4;
    case 'addSubscriptionStreams':
      return ROW_BYTES + 256 * (input as StoreCommands['addSubscriptionStreams']['input']).paths.length;
    default:
      // deleteBucket, deleteStream, expireStreams, setRetention: these free space. Wakes,
      // claims, acks and deliveries rewrite rows in place: refusing them on a full disk
      // would stall workers on the data already stored.
      return 0;
  }
}

export interface DiskSpaceOptions {
  /** A path on the filesystem to watch (the data directory). */
  path: string;
  minFreeBytes: number;
  /** Free pages inside the store, reused before the file grows. */
  freeInStoreBytes: () => number;
  /** Room held for a disk another process fills (space-reserve.ts), counted as free: it is rill's to give back. */
  reserve?: SpaceReserve | null;
  /** Called when writes start being refused (full: true) and when they are accepted again. */
  onChange?: (full: boolean, freeBytes: number) => void;
}

/** How long a reading of the filesystem's free space is trusted, less what was admitted since. */
const READING_MS = 100;

export class DiskSpace {
  private freeBytes = Number.POSITIVE_INFINITY;
  private readAtMs = Number.NEGATIVE_INFINITY;
  private full = false;

  constructor(private readonly options: DiskSpaceOptions) {
    this.read();
  }

  /**
   * Admits a command, counting the space it may take, or answers its refusal. Once
   * writes are refused, they are admitted again only when free space is back above the
   * limit by a quarter of it, so that writes do not flap in and out at the edge (nor small
   * ones keep trickling in after large ones are refused).
   */
  admit<K extends CommandName>(kind: K, input: StoreCommands[K]['input']): InsufficientStorageError | null {
    const bytes = bytesAdded(kind, input);
    if (bytes === 0) return null;
    if (performance.now() - this.readAtMs >= READING_MS) this.read();
    if (this.freeBytes - bytes < this.options.minFreeBytes + (this.full ? this.resumeMarginBytes : 0)) {
      this.setFull(true);
      return new InsufficientStorageError(this.freeBytes);
    }
    this.freeBytes -= bytes;
    this.setFull(false);
    return null;
  }

  private get resumeMarginBytes(): number {
    return Math.floor(this.options.minFreeBytes / 4);
  }

  /** The database itself ran out of space (another process filled the disk): refuse until a new reading says otherwise. */
  ranOut(): InsufficientStorageError {
    this.read();
    this.freeBytes = Math.min(this.freeBytes, this.options.minFreeBytes - 1);
    this.setFull(true);
    return new InsufficientStorageError(this.freeBytes);
  }

  get isFull(): boolean {
    return this.full;
  }

  private read(): void {
    const { reserve } = this.options;
    const filesystemFree = filesystemFreeBytes(this.options.path);
    const unreserved = reserve ? reserve.adjust(filesystemFree) : filesystemFree;
    this.freeBytes = unreserved + (reserve?.held ?? 0) + this.options.freeInStoreBytes();
    this.readAtMs = performance.now();
    if (this.freeBytes < this.options.minFreeBytes) this.setFull(true);
    else if (this.freeBytes >= this.options.minFreeBytes + this.resumeMarginBytes) this.setFull(false);
  }

  private setFull(full: boolean): void {
    if (full === this.full) return;
    this.full = full;
    this.options.onChange?.(full, this.freeBytes);
  }
}
