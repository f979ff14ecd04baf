/**
 * Record ordinals for streams stored before rill kept record coordinates (SQLite schema
 * 9, PostgreSQL schema 3), and append ordinals for streams without records stored before
 * those counted their appends (SQLite schema 10, PostgreSQL schema 4). Their ordinals
 * were never answered, so any numbering that follows the rules is theirs to keep: a
 * stream numbers its retained messages from 0 at its earliest offset (a fork too,
 * counting what it inherits), so F = 0 and N is the count of retained messages
 * (docs/decisions.md, "Record coordinates").
 */
import { countMessagesIn } from '../core/records.js';
import type { StreamState } from '../core/types.js';
import type { StoredChunk } from './chain.js';

/** F and N of a stored stream without them; `retained` are its chunks from the earliest offset to the tail. */
export function legacyRecords(stream: Pick<StreamState, 'config'>, retained: Iterable<StoredChunk>): { first: number; next: number } {
  return { first: 0, next: countMessagesIn(stream, retained) };
}

/**
 * The SQL condition (both engines) of a row of a stream without records, whose F and N
 * were 0 before they numbered its appends (SQLite schema 10, PostgreSQL schema 4): the
 * upgrade empties them, and the backfill numbers its retained appends from 0. A JSON
 * stream's content type is `application/json`, with parameters or not (mediaType).
 */
export const WITHOUT_RECORDS_SQL = "NOT (content_type = 'application/json' OR content_type LIKE 'application/json;%')";

/**
 * A stream state with placeholder ordinals, to read a legacy row's chunks through the
 * usual chain (whose reads look only at positions and fork links).
 */
export function withoutRecords<T extends { record_first: number | null; record_next: number | null }>(row: T): T {
  return { ...row, record_first: row.record_first ?? 0, record_next: row.record_next ?? 0 };
}
