/** The SQLite engine's defaults, for the server's settings without loading the engine (and its native module). */

/** Most stream states the engine keeps in memory: past the byte bound below, fewer. */
export const DEFAULT_STREAM_CACHE_ENTRIES = 1_000_000;
/**
 * The memory the cached stream states may take, estimated (sqlite/cache.ts `entryBytes`):
 * about 180,000 plain streams (366 bytes each), fewer with attributes or time marks.
 */
export const DEFAULT_STREAM_CACHE_BYTES = 64 * 1024 * 1024;
