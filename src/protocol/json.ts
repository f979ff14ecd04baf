/**
 * JSON-mode message framing.
 *
 * A JSON stream stores each message as its compact text (insignificant white space
 * removed, every token kept exactly as written, so numbers keep their precision)
 * followed by one newline. The stream's bytes are therefore its NDJSON rendition, and
 * offsets are positions in it. A POSTed array is flattened one level: each element is a
 * message.
 */

const utf8 = new TextDecoder('utf-8', { fatal: true });

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const NEWLINE = 0x0a;

function isJsonWhitespace(byte: number): boolean {
  return byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d;
}

export type JsonFrameResult =
  | { ok: true; messages: Buffer[]; isArray: boolean }
  | { ok: false; reason: 'invalid' | 'empty-array' };

/** True when `body` is one valid UTF-8 JSON text. */
export function isValidJson(body: Uint8Array): boolean {
  try {
    JSON.parse(utf8.decode(body));
    return true;
  } catch {
    return false;
  }
}

/**
 * Splits a JSON body into messages. `flatten` applies the one-level array flattening of
 * appends; each returned buffer is one compact message ending in a newline.
 */
export function frameJsonBody(body: Uint8Array, flatten: boolean): JsonFrameResult {
  if (!isValidJson(body)) return { ok: false, reason: 'invalid' };
  const compact = compactJson(body);
  const isArray = compact.bytes[0] === OPEN_ARRAY;
  if (!flatten || !isArray) {
    return { ok: true, isArray, messages: [withNewline(compact.bytes, 0, compact.length)] };
  }
  const bounds = compact.elementBounds;
  if (bounds.length === 0) return { ok: false, reason: 'empty-array' };
  const messages: Buffer[] = [];
  for (let i = 0; i < bounds.length; i += 2) {
    messages.push(withNewline(compact.bytes, bounds[i]!, bounds[i + 1]!));
  }
  return { ok: true, isArray, messages };
}

function withNewline(source: Buffer, start: number, end: number): Buffer {
  const out = Buffer.allocUnsafe(end - start + 1);
  source.copy(out, 0, start, end);
  out[end - start] = NEWLINE;
  return out;
}

interface CompactJson {
  bytes: Buffer;
  length: number;
  /** Start/end pairs of the top-level array's elements, in `bytes`. */
  elementBounds: number[];
}

/**
 * Removes insignificant white space from a valid JSON text and records where the
 * elements of a top-level array begin and end. Assumes the input is valid JSON.
 */
function compactJson(body: Uint8Array): CompactJson {
  const out = Buffer.allocUnsafe(body.length);
  const elementBounds: number[] = [];
  let length = 0;
  let depth = 0;
  let inString = false;
  let topIsArray = false;
  let elementOpen = false;
  for (let i = 0; i < body.length; i++) {
    const byte = body[i]!;
    if (inString) {
      out[length++] = byte;
      if (byte === BACKSLASH) {
        out[length++] = body[++i]!;
      } else if (byte === QUOTE) {
        inString = false;
      }
      continue;
    }
    if (isJsonWhitespace(byte)) continue;
    if (depth === 1 && topIsArray) {
      if (byte === COMMA) {
        elementBounds.push(length);
        elementOpen = false;
        continue;
      }
      if (byte === CLOSE_ARRAY) {
        if (elementOpen) elementBounds.push(length);
        elementOpen = false;
      } else if (!elementOpen) {
        elementBounds.push(length);
        elementOpen = true;
      }
    }
    if (byte === QUOTE) inString = true;
    else if (byte === OPEN_ARRAY || byte === OPEN_OBJECT) {
      if (depth === 0 && byte === OPEN_ARRAY) topIsArray = true;
      depth++;
    } else if (byte === CLOSE_ARRAY || byte === CLOSE_OBJECT) depth--;
    out[length++] = byte;
  }
  return { bytes: out, length, elementBounds };
}

/** Splits stored NDJSON bytes into message texts (without their newlines). */
export function splitStoredJson(bytes: Uint8Array): Buffer[] {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const messages: Buffer[] = [];
  let start = 0;
  for (;;) {
    const nl = buf.indexOf(NEWLINE, start);
    if (nl < 0) break;
    messages.push(buf.subarray(start, nl));
    start = nl + 1;
  }
  return messages;
}

/** Renders stored NDJSON bytes as one JSON array. */
export function ndjsonToArray(bytes: Uint8Array): Buffer {
  if (bytes.length === 0) return Buffer.from('[]');
  const out = Buffer.allocUnsafe(bytes.length + 1);
  out[0] = OPEN_ARRAY;
  for (let i = 0; i < bytes.length; i++) {
    out[i + 1] = bytes[i] === NEWLINE ? COMMA : bytes[i]!;
  }
  out[bytes.length] = CLOSE_ARRAY;
  return out;
}

/** Length of the longest prefix of `bytes` that ends on a message boundary. */
export function wholeMessagesLength(bytes: Uint8Array, limit: number): number {
  const end = Math.min(limit, bytes.length);
  for (let i = end - 1; i >= 0; i--) {
    if (bytes[i] === NEWLINE) return i + 1;
  }
  return 0;
}
