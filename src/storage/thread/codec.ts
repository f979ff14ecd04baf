/**
 * How messages cross between the event loop's thread and the storage thread: as one JSON
 * text, encoded as UTF-8 bytes whose buffer is transferred, and the byte arrays it names.
 * Structured clone, which postMessage uses otherwise, took about three times as long as
 * JSON for the small objects that make up most messages (a stream's state, an append's
 * outcome), cloned a string slower still than its UTF-8 bytes, and copies a view's whole
 * underlying buffer: a 100-byte body in Node's 8 KiB pool would cross as 8 KiB.
 *
 * What JSON cannot hold is written as an object with the one key MARK: a byte array (its
 * index in `buffers`), undefined, a number that is not finite, a Map. No value rill stores
 * or answers has a key with a NUL character in it.
 */
const MARK = '\u0000';

export interface Packet {
  /** The JSON text, UTF-8. */
  text: Uint8Array;
  buffers: Uint8Array[];
}

/** A packet, and what postMessage may transfer instead of copying: buffers only the packet holds. */
export interface Encoded {
  packet: Packet;
  transfer: ArrayBuffer[];
}

type Marked = ['b', number] | ['u'] | ['n', string] | ['m', Array<[unknown, unknown]>];

const utf8 = new TextEncoder();
const text = new TextDecoder();

export function encode(value: unknown): Encoded {
  const out: Encoded = { packet: { text: new Uint8Array(0), buffers: [] }, transfer: [] };
  out.packet.text = utf8.encode(JSON.stringify(encoded(value, out)));
  out.transfer.push(out.packet.text.buffer as ArrayBuffer);
  return out;
}

export function decode(packet: Packet): unknown {
  return decoded(JSON.parse(text.decode(packet.text)), packet.buffers);
}

const mark = (marked: Marked): Record<string, Marked> => ({ [MARK]: marked });

function encoded(value: unknown, out: Encoded): unknown {
  if (value === undefined) return mark(['u']);
  if (typeof value === 'number') return Number.isFinite(value) ? value : mark(['n', String(value)]);
  if (value === null || typeof value !== 'object') return value;
  if (value instanceof Uint8Array) return mark(['b', out.packet.buffers.push(bytesToSend(value, out)) - 1]);
  if (Array.isArray(value)) return value.map((entry) => encoded(entry, out));
  if (value instanceof Map) return mark(['m', [...value].map(([key, entry]) => [encoded(key, out), encoded(entry, out)])]);
  const object: Record<string, unknown> = {};
  for (const key in value) object[key] = encoded((value as Record<string, unknown>)[key], out);
  return object;
}

/**
 * A byte array as it is sent: one that is its buffer's whole is cloned (its owner keeps
 * it); a view into a larger buffer is copied, so that only its own bytes cross, and the
 * copy is transferred.
 */
function bytesToSend(bytes: Uint8Array, out: Encoded): Uint8Array {
  if (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength) return bytes;
  const copy = new Uint8Array(bytes);
  out.transfer.push(copy.buffer);
  return copy;
}

function decoded(value: unknown, buffers: Uint8Array[]): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = decoded(value[i], buffers);
    return value;
  }
  const record = value as Record<string, unknown>;
  const marked = record[MARK] as Marked | undefined;
  if (marked !== undefined) return unmarked(marked, buffers);
  for (const key in record) record[key] = decoded(record[key], buffers);
  return record;
}

function unmarked(marked: Marked, buffers: Uint8Array[]): unknown {
  switch (marked[0]) {
    case 'b': {
      const bytes = buffers[marked[1]]!;
      return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    }
    case 'u':
      return undefined;
    case 'n':
      return Number(marked[1]);
    case 'm':
      return new Map(marked[1].map(([key, entry]) => [decoded(key, buffers), decoded(entry, buffers)]));
  }
}
