/** Reading a window of a stream for a response, ending where a response may end. */
import type { StreamState } from '../core/types.js';
import { usableLength, utf8SafeLength } from '../core/window.js';
import { isJsonContentType } from '../protocol/content-type.js';
import type { Store } from '../storage/store.js';

export interface ReadWindow {
  data: Buffer;
  next: number;
}

/**
 * Reads up to `maxBytes` from `position`. A JSON message larger than the window is
 * returned whole and alone: the window grows to the end of the append holding it (a
 * message never spans two appends), so it is read once more rather than again and again
 * as the window doubles (twenty reads of a 5 MiB append for a window of 10 bytes);
 * `textSafe` keeps a text window from splitting a UTF-8 character.
 */
export async function readWindow(store: Store, stream: StreamState, position: number, maxBytes: number, textSafe: boolean): Promise<ReadWindow> {
  const json = isJsonContentType(stream.config.contentType);
  let size = maxBytes;
  for (;;) {
    const raw = await store.readRange(stream, position, size);
    const reachesTail = position + raw.length >= stream.tail;
    let n = usableLength(raw, json, reachesTail, maxBytes);
    if (n === 0 && raw.length > 0) {
      const append = await store.chunkAt(stream, position);
      const appendEnd = append === null ? 0 : append.start + append.data.length - position;
      size = Math.max(size * 2, appendEnd);
      continue;
    }
    if (textSafe && !json && !reachesTail) n = utf8SafeLength(raw.subarray(0, n)) || n;
    return { data: raw.subarray(0, n), next: position + n };
  }
}
