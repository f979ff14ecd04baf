/**
 * Room kept for a disk another process fills to the last byte. The free-space limit
 * (disk-space.ts) keeps rill's own writes from eating the room that deletes, retention
 * and a restart need, but it cannot stop another process. So the SQLite engine holds a
 * file of zeros in its data directory (`rill.reserve`): when the filesystem has less free
 * than the reserve's size, the file is emptied, and rill has that much room to open its
 * database, recover, and run the deletes that free space. Once the filesystem has room
 * for it twice over, the file is written again.
 */
import { closeSync, openSync, statfsSync, statSync, truncateSync, writeSync } from 'node:fs';
import { join } from 'node:path';

export const RESERVE_FILE = 'rill.reserve';
/** Most a reserve holds: a restart's lock and WAL growth (the WAL is checkpointed every 250 pages, 1 MiB) and deletes' page changes, several times over. */
const MAX_RESERVE_BYTES = 4 * 1024 * 1024;
const WRITE_CHUNK_BYTES = 1024 * 1024;

/** The reserve for a free-space limit: a quarter of it, at most 4 MiB (none when the limit is off). */
export function reserveBytesFor(minFreeBytes: number): number {
  return Math.min(MAX_RESERVE_BYTES, Math.floor(minFreeBytes / 4));
}

/** Free bytes of the filesystem holding `path`, as an unprivileged process may use them. */
export function filesystemFreeBytes(path: string): number {
  const fs = statfsSync(path);
  return fs.bavail * fs.bsize;
}

export class SpaceReserve {
  private readonly path: string;
  /** Bytes the file holds now. */
  private heldBytes: number;

  constructor(
    dataDir: string,
    readonly bytes: number,
  ) {
    this.path = join(dataDir, RESERVE_FILE);
    this.heldBytes = sizeOf(this.path);
  }

  /** Bytes the reserve holds that rill may free at will: space that is rill's, not used. */
  get held(): number {
    return this.heldBytes;
  }

  /**
   * Empties the reserve when the filesystem has less free than its size, fills it when
   * there is room for it twice over; answers the filesystem's free bytes afterwards.
   */
  adjust(filesystemFree: number): number {
    if (this.heldBytes > 0 && filesystemFree < this.bytes) return filesystemFree + this.release();
    if (this.heldBytes < this.bytes && filesystemFree >= 2 * this.bytes) return filesystemFree - this.fill();
    return filesystemFree;
  }

  /** Empties the file; answers the bytes freed. */
  private release(): number {
    const freed = this.heldBytes;
    truncateSync(this.path, 0);
    this.heldBytes = 0;
    return freed;
  }

  /**
   * Writes the file up to its size with zeros (written, not only sized: a sparse file
   * would hold no blocks to give back). Answers the bytes added; a write the disk refuses
   * leaves what was written so far.
   */
  private fill(): number {
    const before = this.heldBytes;
    const fd = openSync(this.path, 'a');
    try {
      const zeros = Buffer.alloc(WRITE_CHUNK_BYTES);
      while (this.heldBytes < this.bytes) {
        this.heldBytes += writeSync(fd, zeros, 0, Math.min(zeros.length, this.bytes - this.heldBytes));
      }
    } catch {
      // The disk filled meanwhile: the reserve holds what it got, and is filled further later.
    } finally {
      closeSync(fd);
    }
    return this.heldBytes - before;
  }
}

function sizeOf(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}
