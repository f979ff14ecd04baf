/**
 * Turning a read answer's bytes into messages, each with the offset after it.
 *
 * A rill JSON stream stores each message as its compact JSON text plus one newline, and
 * offsets count those bytes (DESIGN.md, "JSON streams"). A read returns the messages as
 * one JSON array of those same texts, so the offset after message i is the batch start
 * plus, for every message up to i, its text length plus one. The client needs these
 * per-message offsets to end a processing window in the middle of a read.
 */
import { positionOf, encodeOffset } from './offsets.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

function isSpace(byte: number): boolean {
  return byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d;
}

/**
 * Byte lengths of the elements of a top-level JSON array, white space around them left
 * out. Assumes `bytes` is valid JSON; answers undefined when it is not an array.
 */
export function arrayElementLengths(bytes: Uint8Array): number[] | undefined {
  let i = 0;
  while (i < bytes.length && isSpace(bytes[i]!)) i++;
  if (bytes[i] !== OPEN_ARRAY) return undefined;
  const lengths: number[] = [];
  let depth = 0;
  let inString = false;
  let start = -1;
  let lastSignificant = -1;
  for (i = i + 1; i < bytes.length; i++) {
    const byte = bytes[i]!;
    if (inString) {
      if (byte === BACKSLASH) i++;
      else if (byte === QUOTE) inString = false;
      lastSignificant = i;
      continue;
    }
    if (isSpace(byte)) continue;
    if (depth === 0 && (byte === COMMA || byte === CLOSE_ARRAY)) {
      if (start >= 0) lengths.push(lastSignificant - start + 1);
      if (byte === CLOSE_ARRAY) return lengths;
      start = -1;
      continue;
    }
    if (start < 0) start = i;
    if (byte === QUOTE) inString = true;
    else if (byte === OPEN_ARRAY || byte === OPEN_OBJECT) depth++;
    else if (byte === CLOSE_ARRAY || byte === CLOSE_OBJECT) depth--;
    lastSignificant = i;
  }
  return undefined;
}

/** One message of a read, with where it starts and where the next one starts. */
export interface Message<T = unknown> {
  value: T;
  /** Offset of the message's first byte; undefined when the server's offsets are not positions. */
  offset: string | undefined;
  /** Offset right after the message: a resume point, and a valid Stream-Seq. */
  nextOffset: string | undefined;
  /** Size of the message in the stream, in bytes. */
  size: number;
}

const utf8 = new TextDecoder('utf-8');

/**
 * Splits a JSON read (an array) into messages. Per-message offsets are given only when
 * they add up exactly to the answer's own `nextOffset`; otherwise they stay undefined
 * and only the batch boundaries are known.
 */
export function jsonMessages(bytes: Uint8Array, offset: string, nextOffset: string): Message[] {
  const parsed: unknown = bytes.length === 0 ? [] : JSON.parse(utf8.decode(bytes));
  if (!Array.isArray(parsed)) throw new TypeError('a JSON stream read did not answer a JSON array');
  const lengths = arrayElementLengths(bytes) ?? [];
  const start = positionOf(offset);
  const end = positionOf(nextOffset);
  const exact =
    start !== undefined && end !== undefined && lengths.length === parsed.length && lengths.reduce((sum, n) => sum + n + 1, start) === end;
  let position = start ?? 0;
  return parsed.map((value: unknown, i) => {
    const size = (lengths[i] ?? 0) + 1;
    const from = position;
    position += size;
    return {
      value,
      offset: exact ? encodeOffset(from) : undefined,
      nextOffset: exact ? encodeOffset(position) : i === parsed.length - 1 ? nextOffset : undefined,
      size,
    };
  });
}

/** A byte or text stream has no message framing: a read's bytes are one message. */
export function byteMessages(bytes: Uint8Array, offset: string, nextOffset: string): Message<Uint8Array>[] {
  if (bytes.length === 0) return [];
  return [{ value: bytes, offset, nextOffset, size: bytes.length }];
}
