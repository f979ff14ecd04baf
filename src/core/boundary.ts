/**
 * Message boundaries. A message is one append of a binary or text stream, or one JSON
 * value of a JSON stream. Snapshots and retention may only cut a stream where a message
 * starts; offsets handed out by reads are always such places.
 */
import type { ChunkView } from './create.js';

const NEWLINE = 0x0a;

/**
 * `anchor` is the stored append that starts at or contains `position` (null at the
 * tail). JSON appends hold several messages, each ending in a newline.
 */
export function isMessageBoundary(anchor: ChunkView | null, position: number, json: boolean): boolean {
  if (anchor === null || anchor.start === position) return true;
  return json && anchor.data[position - anchor.start - 1] === NEWLINE;
}
