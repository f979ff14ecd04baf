/**
 * Record ordinals for streams stored before rill kept record coordinates (SQLite schema
 * 9, PostgreSQL schema 3). Their ordinals were never answered, so any numbering that
 * follows the rules is theirs to keep: a JSON stream numbers its retained messages from
 * 0 at its earliest offset (a fork too, counting what it inherits), so F = 0 and N is
 * the count of retained messages (docs/decisions.md, "Record coordinates").
 */
import { countRecordsIn } from '../core/records.js';
import { isJsonContentType } from '../protocol/content-type.js';
import type { StreamState } from '../core/types.js';
import type { StoredChunk } from './chain.js';

/** F and N of a stored stream without them; `retained` are its chunks from the earliest offset to the tail. */
export function legacyRecords(stream: Pick<StreamState, 'config'>, retained: Iterable<StoredChunk>): { first: number; next: number } {
  if (!isJsonContentType(stream.config.contentType)) return { first: 0, next: 0 };
  return { first: 0, next: countRecordsIn(retained) };
}

/**
 * A stream state with placeholder ordinals, to read a legacy row's chunks through the
 * usual chain (whose reads look only at positions and fork links).
 */
export function withoutRecords<T extends { record_first: number | null; record_next: number | null }>(row: T): T {
  return { ...row, record_first: row.record_first ?? 0, record_next: row.record_next ?? 0 };
}
