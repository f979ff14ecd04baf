/** The SQLite engine's defaults, for the server's settings without loading the engine (and its native module). */

/** Stream states the engine keeps in memory (about 1.2 KB each). */
export const DEFAULT_STREAM_CACHE_ENTRIES = 20_000;
