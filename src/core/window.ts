/**
 * Where a read response may end. A JSON stream's response never ends inside a message;
 * other streams may end anywhere, except that text sent over SSE ends on a UTF-8
 * character boundary.
 */

const NEWLINE = 0x0a;

/**
 * Where a read of a stream's bytes from `from`, of at most `maxBytes`, ends: a window of a
 * plain stream holds every byte up to there, so its end is known before it is read.
 */
export function windowEnd(tail: number, from: number, maxBytes: number): number {
  return Math.min(tail, from + maxBytes);
}

/**
 * Bytes of `window` a response may carry when the reader asked for at most `limitBytes`.
 * `window` is longer than the limit only when it was read further to finish a message.
 * A JSON response holds the most whole messages that fit the limit or, when the first
 * message alone is larger, exactly that message: the limit is exceeded only as far as
 * one whole message needs. 0 means "read further to finish the first message".
 */
export function usableLength(window: Uint8Array, json: boolean, reachesTail: boolean, limitBytes: number = window.length): number {
  const within = Math.min(window.length, limitBytes);
  if (!json || (reachesTail && within === window.length)) return within;
  for (let i = within - 1; i >= 0; i--) if (window[i] === NEWLINE) return i + 1;
  const firstEnd = window.indexOf(NEWLINE, within);
  if (firstEnd >= 0) return firstEnd + 1;
  return reachesTail ? window.length : 0;
}

/** Length of the longest prefix of `window` that does not split a UTF-8 sequence. */
export function utf8SafeLength(window: Uint8Array): number {
  const n = window.length;
  // Walk back over at most three continuation bytes to the lead byte of the last character.
  for (let back = 1; back <= Math.min(4, n); back++) {
    const byte = window[n - back]!;
    if ((byte & 0xc0) === 0x80) continue;
    const needed = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return needed > back ? n - back : n;
  }
  return n;
}

/** A JSON read may start only where a message starts. */
export function startsOnMessage(previousByte: number | undefined): boolean {
  return previousByte === undefined || previousByte === NEWLINE;
}
