/**
 * JSON-mode message framing.
 *
 * A JSON stream stores each message as its compact text (insignificant white space
 * removed, every token kept exactly as written, so numbers keep their precision)
 * followed by one newline. The stream's bytes are therefore its NDJSON rendition, and
 * offsets are positions in it. A POSTed array is flattened one level: each element is a
 * message.
 *
 * Framing is one pass over the bytes that validates the JSON grammar and writes the
 * NDJSON at once: no JSON.parse, no string decoded, no object or buffer per element, so
 * its cost is proportional to the bytes with a small constant. It can stop after a
 * budget of bytes and go on later, so a large body is framed in slices between which the
 * server answers other requests.
 */
import { protocolError, type ProtocolError } from './errors.js';

/** Deepest nesting of arrays and objects a JSON body may have. */
export const MAX_JSON_DEPTH = 512;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON_BYTE = 0x3a;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const NEWLINE = 0x0a;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;

// Framer states. Numbers have one state per position in their grammar.
const VALUE = 0; // a value must start
const ARRAY_FIRST = 1; // after '[': a value or ']'
const AFTER_VALUE = 2; // ',', a closer, or (at depth 0) the end
const OBJECT_FIRST = 3; // after '{': a key or '}'
const OBJECT_KEY = 4; // after ',' in an object: a key
const COLON = 5; // after a key
const STRING = 6;
const STRING_ESCAPE = 7;
const STRING_HEX = 8;
const LITERAL = 9;
const NUM_MINUS = 10;
const NUM_ZERO = 11;
const NUM_INT = 12;
const NUM_DOT = 13;
const NUM_FRAC = 14;
const NUM_EXP = 15;
const NUM_EXP_SIGN = 16;
const NUM_EXP_DIGITS = 17;

const IN_ARRAY = 1;
const IN_OBJECT = 2;

const LITERALS: Record<number, Uint8Array> = {
  0x74: Buffer.from('true'),
  0x66: Buffer.from('false'),
  0x6e: Buffer.from('null'),
};

export type JsonFrameFailure = 'invalid' | 'empty-array' | 'too-deep' | 'too-many-messages';

export type JsonFrameResult =
  | { ok: true; data: Buffer; messageCount: number }
  | { ok: false; reason: JsonFrameFailure; at: number };

function isJsonWhitespace(byte: number): boolean {
  return byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d;
}

function isDigit(byte: number): boolean {
  return byte >= ZERO && byte <= NINE;
}

function isHexDigit(byte: number): boolean {
  return isDigit(byte) || (byte >= 0x41 && byte <= 0x46) || (byte >= 0x61 && byte <= 0x66);
}

/** The number state after `byte`, or -1 when `byte` does not continue the number. */
function numberStep(state: number, byte: number): number {
  const digit = isDigit(byte);
  const exponent = byte === 0x65 || byte === 0x45;
  switch (state) {
    case NUM_MINUS:
      return byte === ZERO ? NUM_ZERO : digit ? NUM_INT : -1;
    case NUM_ZERO:
      return byte === DOT ? NUM_DOT : exponent ? NUM_EXP : -1;
    case NUM_INT:
      return digit ? NUM_INT : byte === DOT ? NUM_DOT : exponent ? NUM_EXP : -1;
    case NUM_DOT:
      return digit ? NUM_FRAC : -1;
    case NUM_FRAC:
      return digit ? NUM_FRAC : exponent ? NUM_EXP : -1;
    case NUM_EXP:
      return byte === PLUS || byte === MINUS ? NUM_EXP_SIGN : digit ? NUM_EXP_DIGITS : -1;
    default: // NUM_EXP_SIGN, NUM_EXP_DIGITS
      return digit ? NUM_EXP_DIGITS : -1;
  }
}

function isNumberComplete(state: number): boolean {
  return state === NUM_ZERO || state === NUM_INT || state === NUM_FRAC || state === NUM_EXP_DIGITS;
}

function isNumberState(state: number): boolean {
  return state >= NUM_MINUS;
}

/**
 * Validates and frames one JSON body, resumable: step() frames up to a budget of bytes
 * and says whether it has finished; result() then gives the NDJSON or the refusal.
 */
export class JsonFramer {
  private readonly out: Buffer;
  private outLength = 0;
  private at = 0;
  private state = VALUE;
  /** Open arrays and objects, innermost last (IN_ARRAY or IN_OBJECT). */
  private readonly containers: number[] = [];
  private keyString = false;
  private hexLeft = 0;
  private literal: Uint8Array = LITERALS[0x74]!;
  private literalAt = 0;
  /** The top-level value is an array being flattened: its elements are the messages. */
  private flattening = false;
  private messageCount = 0;
  private failure: JsonFrameFailure | null = null;
  private finished = false;

  constructor(
    private readonly body: Uint8Array,
    private readonly flatten: boolean,
    private readonly maxMessages: number,
  ) {
    this.out = Buffer.allocUnsafe(body.length + 1);
    // A UTF-8 byte order mark is not part of the JSON text (RFC 8259 lets a parser ignore it).
    if (body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf) this.at = 3;
  }

  /** Frames up to `budgetBytes` more bytes; true once the body is framed or refused. */
  step(budgetBytes: number): boolean {
    if (this.finished) return true;
    const end = this.sliceEnd(budgetBytes);
    let i = this.at;
    while (i < end && this.failure === null) {
      i = this.state === STRING ? this.scanString(i, end) : this.scanTokens(i, end);
    }
    if (this.failure !== null) return true;
    this.at = i;
    if (i === this.body.length) this.finish();
    return this.finished;
  }

  result(): JsonFrameResult {
    if (!this.finished) throw new Error('invariant: JsonFramer.result() before it finished');
    if (this.failure !== null) return { ok: false, reason: this.failure, at: this.at };
    return { ok: true, data: this.out.subarray(0, this.outLength), messageCount: this.messageCount };
  }

  /** The end of the next slice, moved past any UTF-8 continuation bytes so no character is cut. */
  private sliceEnd(budgetBytes: number): number {
    let end = Math.min(this.body.length, this.at + budgetBytes);
    while (end < this.body.length && (this.body[end]! & 0xc0) === 0x80) end++;
    return end;
  }

  private fail(reason: JsonFrameFailure, at: number): boolean {
    this.failure = reason;
    this.at = at;
    this.finished = true;
    return true;
  }

  private finish(): void {
    if (isNumberState(this.state)) {
      if (!isNumberComplete(this.state)) return void this.fail('invalid', this.at);
      this.state = AFTER_VALUE;
    }
    if (this.state !== AFTER_VALUE || this.containers.length !== 0) return void this.fail('invalid', this.at);
    if (this.flattening) {
      if (this.messageCount === 0) return void this.fail('empty-array', this.at);
    } else {
      this.out[this.outLength++] = NEWLINE;
      this.messageCount = 1;
    }
    this.finished = true;
  }

  /**
   * Everything outside string contents, up to the slice's end or the start of a string's
   * contents. One loop over a switch, with the hot fields in locals, because this runs
   * for every byte of every JSON append (a method call per byte framed `[0,0,...]`
   * at a tenth of this speed).
   */
  private scanTokens(start: number, end: number): number {
    const body = this.body;
    const out = this.out;
    let outLength = this.outLength;
    let state = this.state;
    let i = start;
    let failed = false;
    for (; i < end; i++) {
      const byte = body[i]!;
      if (state >= NUM_MINUS) {
        const next = numberStep(state, byte);
        if (next >= 0) {
          state = next;
          out[outLength++] = byte;
          continue;
        }
        if (!isNumberComplete(state)) {
          failed = true;
          break;
        }
        state = AFTER_VALUE; // and `byte` is read again below, as what follows the number
      }
      if (state === LITERAL) {
        if (byte !== this.literal[this.literalAt]) {
          failed = true;
          break;
        }
        out[outLength++] = byte;
        if (++this.literalAt === this.literal.length) state = AFTER_VALUE;
        continue;
      }
      if (state === STRING_ESCAPE || state === STRING_HEX) {
        state = this.escapeStep(state, byte);
        if (state < 0) {
          failed = true;
          break;
        }
        out[outLength++] = byte;
        if (state === STRING) {
          i++;
          break;
        }
        continue;
      }
      if (isJsonWhitespace(byte)) continue;
      this.outLength = outLength;
      state = this.structural(state, byte, i);
      outLength = this.outLength;
      if (state < 0) {
        failed = true;
        break;
      }
      if (state === STRING) {
        i++;
        break;
      }
    }
    this.outLength = outLength;
    this.state = state;
    if (failed && this.failure === null) this.fail('invalid', i);
    return i;
  }

  /** The state after a structural byte (outside strings, numbers and literals), or -1 if it is not allowed there. */
  private structural(state: number, byte: number, i: number): number {
    switch (state) {
      case ARRAY_FIRST:
        if (byte === CLOSE_ARRAY) return this.close(IN_ARRAY, byte);
        return this.startValue(byte, i);
      case VALUE:
        return this.startValue(byte, i);
      case AFTER_VALUE:
        return this.afterValue(byte);
      case OBJECT_FIRST:
        if (byte === CLOSE_OBJECT) return this.close(IN_OBJECT, byte);
        return this.startKey(byte);
      case OBJECT_KEY:
        return this.startKey(byte);
      default: // COLON
        if (byte !== COLON_BYTE) return -1;
        this.emit(byte);
        return VALUE;
    }
  }

  private emit(byte: number): void {
    this.out[this.outLength++] = byte;
  }

  private startKey(byte: number): number {
    if (byte !== QUOTE) return -1;
    this.emit(byte);
    this.keyString = true;
    return STRING;
  }

  private startValue(byte: number, i: number): number {
    if (this.flattening && this.containers.length === 1 && ++this.messageCount > this.maxMessages) {
      this.fail('too-many-messages', i);
      return -1;
    }
    if (byte === OPEN_OBJECT || byte === OPEN_ARRAY) return this.open(byte, i);
    this.emit(byte);
    if (byte === QUOTE) {
      this.keyString = false;
      return STRING;
    }
    if (byte === MINUS) return NUM_MINUS;
    if (isDigit(byte)) return byte === ZERO ? NUM_ZERO : NUM_INT;
    const literal = LITERALS[byte];
    if (literal === undefined) return -1;
    this.literal = literal;
    this.literalAt = 1;
    return LITERAL;
  }

  private open(byte: number, i: number): number {
    if (this.containers.length === MAX_JSON_DEPTH) {
      this.fail('too-deep', i);
      return -1;
    }
    const isArray = byte === OPEN_ARRAY;
    this.containers.push(isArray ? IN_ARRAY : IN_OBJECT);
    if (isArray && this.containers.length === 1 && this.flatten) this.flattening = true;
    else this.emit(byte);
    return isArray ? ARRAY_FIRST : OBJECT_FIRST;
  }

  private close(container: number, byte: number): number {
    const containers = this.containers;
    if (containers.length === 0 || containers[containers.length - 1] !== container) return -1;
    const flattened = this.flattening && containers.length === 1;
    containers.pop();
    // The flattened array's brackets are dropped; its last element ends with a newline.
    if (!flattened) this.emit(byte);
    else if (this.messageCount > 0) this.emit(NEWLINE);
    return AFTER_VALUE;
  }

  private afterValue(byte: number): number {
    if (byte === CLOSE_ARRAY) return this.close(IN_ARRAY, byte);
    if (byte === CLOSE_OBJECT) return this.close(IN_OBJECT, byte);
    const depth = this.containers.length;
    if (byte !== COMMA || depth === 0) return -1;
    // Between the flattened array's elements, the comma becomes the newline ending a message.
    this.emit(this.flattening && depth === 1 ? NEWLINE : COMMA);
    return this.containers[depth - 1] === IN_ARRAY ? VALUE : OBJECT_KEY;
  }

  /** After a string's closing quote: a key wants its colon, a value is done. */
  private afterString(): number {
    return this.keyString ? COLON : AFTER_VALUE;
  }

  /** The state after a byte of an escape sequence, or -1 if the escape is malformed. */
  private escapeStep(state: number, byte: number): number {
    if (state === STRING_HEX) {
      if (!isHexDigit(byte)) return -1;
      return --this.hexLeft === 0 ? STRING : STRING_HEX;
    }
    if (byte === 0x75) {
      this.hexLeft = 4;
      return STRING_HEX;
    }
    const simple = byte === QUOTE || byte === BACKSLASH || byte === 0x2f || byte === 0x62 || byte === 0x66 || byte === 0x6e || byte === 0x72 || byte === 0x74;
    return simple ? STRING : -1;
  }

  /** Copies string contents up to the closing quote, an escape or the slice's end; checks their UTF-8. */
  private scanString(i: number, end: number): number {
    const body = this.body;
    let j = i;
    for (;;) {
      while (j < end) {
        const byte = body[j]!;
        if (byte === QUOTE || byte === BACKSLASH || byte < 0x20 || byte >= 0x80) break;
        j++;
      }
      if (j === end || body[j]! < 0x80) break;
      const length = utf8SequenceLength(body, j, end);
      if (length === 0) {
        this.fail('invalid', j);
        return j;
      }
      j += length;
    }
    if (j > i) {
      this.out.set(body.subarray(i, j), this.outLength);
      this.outLength += j - i;
    }
    if (j === end) return j;
    const byte = body[j]!;
    if (byte < 0x20) {
      this.fail('invalid', j);
      return j;
    }
    this.emit(byte);
    this.state = byte === BACKSLASH ? STRING_ESCAPE : this.afterString();
    return j + 1;
  }
}

/**
 * The length of the well-formed UTF-8 sequence at `at` (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF), or 0. Slices never end inside a sequence that
 * could be whole (sliceEnd), so one cut off at `end` is malformed.
 */
function utf8SequenceLength(bytes: Uint8Array, at: number, end: number): number {
  const lead = bytes[at]!;
  let length: number;
  let low = 0x80;
  let high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) length = 2;
  else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead === 0xe0) low = 0xa0;
    else if (lead === 0xed) high = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead === 0xf0) low = 0x90;
    else if (lead === 0xf4) high = 0x8f;
  } else return 0;
  if (at + length > end) return 0;
  const second = bytes[at + 1]!;
  if (second < low || second > high) return 0;
  for (let k = 2; k < length; k++) if ((bytes[at + k]! & 0xc0) !== 0x80) return 0;
  return length;
}

/** Frames a whole body in one go (the HTTP layer frames large bodies in slices: frameJson in src/http/request.ts). */
export function frameJsonBody(body: Uint8Array, flatten: boolean, maxMessages: number): JsonFrameResult {
  const framer = new JsonFramer(body, flatten, maxMessages);
  framer.step(body.length);
  return framer.result();
}

/** The refusal of a JSON body or append-batch frame that framing did not accept. */
export function jsonRefusal(failure: { reason: JsonFrameFailure; at: number }, what: 'body' | 'frame', maxMessages: number): ProtocolError {
  switch (failure.reason) {
    case 'empty-array':
      return protocolError('EMPTY_JSON_ARRAY', 'an append of an empty JSON array has no messages');
    case 'too-many-messages':
      return protocolError('TOO_MANY_MESSAGES', `an append may carry at most ${maxMessages} messages (the server's --max-append-messages)`);
    case 'too-deep':
      return protocolError('INVALID_JSON', `the ${what}'s JSON is nested deeper than ${MAX_JSON_DEPTH} levels`);
    case 'invalid':
      return protocolError('INVALID_JSON', `the ${what} is not valid JSON (at byte ${failure.at})`);
  }
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

/** Messages in a JSON stream's stored bytes (or a whole-message part of them): one per newline. */
export function countJsonMessages(framed: Uint8Array): number {
  let n = 0;
  for (let at = framed.indexOf(NEWLINE); at >= 0; at = framed.indexOf(NEWLINE, at + 1)) n++;
  return n;
}
