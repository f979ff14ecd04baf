/** Reading a window of a stream for a response, ending where a response may end. */
import type { StreamState } from '../core/types.js';
import { usableLength, utf8SafeLength } from '../core/window.js';
import { isJsonContentType } from '../protocol/content-type.js';
import type { Store } from '../storage/store.js';

/** A window of a stream's bytes, from the position it was read at to `next`. */
export interface ReadWindow {
  /** The bytes as the stored appends hold them, in order: a response writes them as they are. */
  readonly parts: readonly Buffer[];
  /** Bytes in the window. */
  readonly length: number;
  /** The bytes in one buffer: joined on first use, a copy that a plain read never makes. */
  readonly data: Buffer;
  readonly next: number;
}

class Window implements ReadWindow {
  private joined: Buffer | undefined;
  readonly length: number;
  readonly next: number;

  /** The window of `parts`, read from position `from`. */
  constructor(
    readonly parts: readonly Buffer[],
    from: number,
  ) {
    let length = 0;
    for (const part of parts) length += part.length;
    this.length = length;
    this.next = from + length;
  }

  get data(): Buffer {
    this.joined ??= this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts as Buffer[], this.length);
    return this.joined;
  }
}

/**
 * Reads up to `maxBytes` from `position`. Bytes of a plain stream are taken as stored
 * (joining 4 MiB of 1 MiB appends into one buffer was the largest cost of a catch-up read:
 * docs/performance.md). A JSON message larger than the window is returned whole and alone:
 * the window grows to the end of the append holding it (a message never spans two
 * appends), so it is read once more rather than again and again as the window doubles
 * (twenty reads of a 5 MiB append for a window of 10 bytes); `textSafe` keeps a text
 * window from splitting a UTF-8 character.
 */
export async function readWindow(store: Store, stream: StreamState, position: number, maxBytes: number, textSafe: boolean): Promise<ReadWindow> {
  const json = isJsonContentType(stream.config.contentType);
  if (!json && !textSafe) {
    return new Window((await store.readChunks(stream, position, maxBytes)).map((chunk) => chunk.data), position);
  }
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
    return new Window([raw.subarray(0, n)], position);
  }
}
