/**
 * How messages cross between the event loop's thread and the storage thread: as one JSON
 * text and one block holding every byte array it names, both encoded into buffers of
 * their own that postMessage transfers instead of copying. Structured clone, which
 * postMessage uses otherwise, took about three times as long as JSON for the small
 * objects most messages are (a stream's state, an append's outcome), cloned a string
 * slower than its UTF-8 bytes, paid for each byte array on its own, and copied a view's
 * whole underlying buffer: a 100-byte body in Node's 8 KiB pool crossed as 8 KiB.
 *
 * What JSON cannot hold is written as an object with the one key MARK: a byte array (its
 * place in the block), undefined, a number that is not finite, a Map. No value rill
 * stores or answers has a key with a NUL character in it.
 */
const MARK = '\u0000';

export interface Packet {
  /** The JSON text, UTF-8. */
  text: Uint8Array;
  /** The byte arrays the text names, one after another. */
  bytes: Uint8Array;
}

/** A packet, and the buffers postMessage transfers with it (only the packet holds them). */
export interface Encoded {
  packet: Packet;
  transfer: ArrayBuffer[];
}

type Marked = ['b', number, number] | ['u'] | ['n', string] | ['m', Array<[unknown, unknown]>];

const utf8 = new TextEncoder();
const text = new TextDecoder();

/** Byte arrays met while encoding, and where each will start in the block. */
interface Gathered {
  views: Uint8Array[];
  length: number;
}

export function encode(value: unknown): Encoded {
  const gathered: Gathered = { views: [], length: 0 };
  const json = utf8.encode(JSON.stringify(encoded(value, gathered)));
  const bytes = new Uint8Array(gathered.length);
  let at = 0;
  for (const view of gathered.views) {
    bytes.set(view, at);
    at += view.byteLength;
  }
  return { packet: { text: json, bytes }, transfer: [json.buffer as ArrayBuffer, bytes.buffer] };
}

export function decode(packet: Packet): unknown {
  return decoded(JSON.parse(text.decode(packet.text)), packet.bytes);
}

const mark = (marked: Marked): Record<string, Marked> => ({ [MARK]: marked });

function encoded(value: unknown, gathered: Gathered): unknown {
  if (value === undefined) return mark(['u']);
  if (typeof value === 'number') return Number.isFinite(value) ? value : mark(['n', String(value)]);
  if (value === null || typeof value !== 'object') return value;
  if (value instanceof Uint8Array) {
    gathered.views.push(value);
    gathered.length += value.byteLength;
    return mark(['b', gathered.length - value.byteLength, value.byteLength]);
  }
  if (Array.isArray(value)) return value.map((entry) => encoded(entry, gathered));
  if (value instanceof Map) return mark(['m', [...value].map(([key, entry]) => [encoded(key, gathered), encoded(entry, gathered)])]);
  const object: Record<string, unknown> = {};
  for (const key in value) object[key] = encoded((value as Record<string, unknown>)[key], gathered);
  return object;
}

function decoded(value: unknown, bytes: Uint8Array): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = decoded(value[i], bytes);
    return value;
  }
  const record = value as Record<string, unknown>;
  const marked = record[MARK] as Marked | undefined;
  if (marked !== undefined) return unmarked(marked, bytes);
  for (const key in record) record[key] = decoded(record[key], bytes);
  return record;
}

function unmarked(marked: Marked, bytes: Uint8Array): unknown {
  switch (marked[0]) {
    case 'b':
      // A view into the block: the arrays of one packet share its buffer, as a batch's appends share their row.
      return Buffer.from(bytes.buffer, bytes.byteOffset + marked[1], marked[2]);
    case 'u':
      return undefined;
    case 'n':
      return Number(marked[1]);
    case 'm':
      return new Map(marked[1].map(([key, entry]) => [decoded(key, bytes), decoded(entry, bytes)]));
  }
}
