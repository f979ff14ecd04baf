/**
 * `rill check --postgres-url … --cold-store …`: the segment rows of a PostgreSQL database,
 * for the cold tier's check (storage/cold/check.ts). Reads only, on one connection of its own.
 */
import pg from 'pg';
import { SEGMENT_LINES_SQL, type SegmentLine } from '../cold/check.js';

/** pg answers BIGINT as text: the check compares offsets as numbers. */
const NUMBERS = ['stream_id', 'earliest_offset', 'start', 'end_offset', 'hot_start'] as const;

export async function postgresSegmentLines(url: string): Promise<SegmentLine[]> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    const { rows } = await client.query<Record<string, unknown>>(SEGMENT_LINES_SQL);
    return rows.map((row) => {
      const line = { ...row };
      for (const column of NUMBERS) line[column] = row[column] === null ? null : Number(row[column]);
      return line as unknown as SegmentLine;
    });
  } finally {
    await client.end();
  }
}
