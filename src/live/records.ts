/**
 * Finding where a record starts (core/records.ts says how ordinals follow from the stored
 * bytes), and the record envelope view. A stream keeps no index of ordinals: a read
 * counts newlines from the nearest place whose ordinal is known, which is F at the
 * earliest offset, N at the tail, or a place an earlier read found (`RecordMarks`).
 * Readers mostly resume where their last answer ended, so a reader that pages through a
 * stream finds its start at once.
 */
import { recordSearchFrom, skipRecordsBackward, skipRecordsForward, type RecordMark } from '../core/records.js';
import { splitStoredJson } from '../protocol/json.js';
import type { StreamState } from '../core/types.js';
import type { Store } from '../storage/store.js';

/** Bytes read at a time while counting records. */
const SCAN_WINDOW_BYTES = 1024 * 1024;
/** Places remembered per stream, and streams remembered; the oldest go first. */
const MARKS_PER_STREAM = 16;
const MARKED_STREAMS = 4096;

/**
 * Places whose ordinal is known, by stream id. A stream id is never reused and ordinals
 * never change, so a place stays true for as long as it is retained (core checks that).
 */
export class RecordMarks {
  private readonly byStream = new Map<number, RecordMark[]>();

  of(streamId: number): readonly RecordMark[] {
    return this.byStream.get(streamId) ?? [];
  }

  add(streamId: number, mark: RecordMark): void {
    let marks = this.byStream.get(streamId);
    if (marks) this.byStream.delete(streamId);
    else {
      if (this.byStream.size >= MARKED_STREAMS) this.byStream.delete(this.byStream.keys().next().value!);
      marks = [];
    }
    this.byStream.set(streamId, marks);
    if (marks.some((m) => m.record === mark.record)) return;
    if (marks.length >= MARKS_PER_STREAM) marks.shift();
    marks.push(mark);
  }
}

/** The offset where record `record` starts (F <= record <= N, resolved by core). */
export async function locateRecord(store: Store, stream: StreamState, record: number, marks: RecordMarks): Promise<number> {
  const { below, above } = recordSearchFrom(stream, record, marks.of(stream.id));
  if (below.record === record) return below.offset;
  if (above.record === record) return above.offset;
  const offset = record - below.record <= above.record - record ? await scanForward(store, stream, below, record) : await scanBackward(store, stream, above, below, record);
  marks.add(stream.id, { record, offset });
  return offset;
}

async function scanForward(store: Store, stream: StreamState, from: RecordMark, record: number): Promise<number> {
  let position = from.offset;
  let skip = record - from.record;
  for (;;) {
    const data = await store.readRange(stream, position, SCAN_WINDOW_BYTES);
    if (data.length === 0) throw new Error(`invariant: record ${record} of stream ${stream.id} lies beyond its tail ${stream.tail}`);
    const found = skipRecordsForward(data, skip);
    if ('at' in found) return position + found.at;
    skip -= found.seen;
    position += data.length;
  }
}

async function scanBackward(store: Store, stream: StreamState, from: RecordMark, floor: RecordMark, record: number): Promise<number> {
  let end = from.offset;
  let skip = from.record - record;
  for (;;) {
    const start = Math.max(floor.offset, end - SCAN_WINDOW_BYTES);
    const data = await store.readRange(stream, start, end - start);
    const found = skipRecordsBackward(data, skip);
    if ('at' in found) return start + found.at;
    if (start === floor.offset && found.seen === skip) return start;
    if (start === floor.offset) throw new Error(`invariant: record ${record} of stream ${stream.id} lies below ${floor.record}`);
    skip -= found.seen;
    end = start;
  }
}

/** Media type of the record envelope view, and of one envelope (an SSE data event's payload). */
export const ENVELOPE_CONTENT_TYPE = 'application/vnd.durable-stream-records+ndjson';
export const ENVELOPE_ITEM_CONTENT_TYPE = 'application/vnd.durable-stream-record+json';

/**
 * The envelope lines of whole stored messages whose first is record `first`: each
 * `{"record":n,"value":<stored text>}`, the text embedded byte for byte.
 */
export function envelopeLines(data: Buffer, first: number): Buffer[] {
  return splitStoredJson(data).map((text, i) => Buffer.concat([Buffer.from(`{"record":${first + i},"value":`), text, Buffer.from('}')]));
}
