/**
 * The stored form of a cold segment, shared by the SQL engines: one row of `cold_segments`
 * (schema.ts of each engine), and the segment it describes.
 */
import type { ColdSegmentRow } from './host.js';

export interface SegmentColumns {
  stream_id: number;
  start: number;
  end_offset: number;
  object_key: string;
  sha256: string;
  object_bytes: number;
}

export function segmentOf(row: SegmentColumns): ColdSegmentRow {
  return { streamId: row.stream_id, start: row.start, end: row.end_offset, key: row.object_key, sha256: row.sha256, bytes: row.object_bytes };
}
