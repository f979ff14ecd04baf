/**
 * What crosses between the event loop's thread and the storage thread (src/storage/thread/
 * codec.ts) arrives as it was sent: byte arrays as Buffers holding only their own bytes,
 * undefined (an absent value of a read), numbers that are not finite, Maps, nested as
 * storage answers nest them.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decode, encode } from '../../src/storage/thread/codec.js';
import { testSeed } from '../helpers/seed.js';

/** Bytes as a Buffer of their own, or as a view into the middle of a larger one (how Node pools small buffers). */
const bytes = fc.tuple(fc.uint8Array({ maxLength: 64 }), fc.nat({ max: 16 }), fc.nat({ max: 16 })).map(([data, before, after]) => {
  const backing = Buffer.alloc(before + data.length + after, 0xee);
  backing.set(data, before);
  return backing.subarray(before, before + data.length);
});

// -0 crosses as 0 (JSON has one zero); no value rill stores tells them apart.
const leaf = fc.oneof(fc.string(), fc.double().map((x) => (x === 0 ? 0 : x)), fc.boolean(), fc.constant(null), fc.constant(undefined), fc.constantFrom(Infinity, -Infinity, NaN), bytes);
const { value } = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    leaf,
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.string({ maxLength: 6 }), tie('value'), { maxKeys: 4 }),
    fc.array(fc.tuple(fc.string({ maxLength: 4 }), tie('value')), { maxLength: 3 }).map((entries) => new Map(entries)),
  ),
}));

describe('the storage thread codec', () => {
  it('gives back every value it is given, byte arrays as Buffers', () => {
    fc.assert(
      fc.property(value, (sent) => {
        const received = decode(encode(sent).packet);
        expect(received).toStrictEqual(asBuffers(sent));
      }),
      { seed: testSeed(), numRuns: 500 },
    );
  });

  it("sends only a view's own bytes, every array of a packet in one block, and transfers what it made", () => {
    const pool = Buffer.alloc(8192, 1);
    const body = pool.subarray(100, 200);
    const whole = Buffer.alloc(50, 2);
    const { packet, transfer } = encode({ body, whole });
    expect(packet.bytes.byteLength).toBe(150);
    // The text and the block are the packet's own: transferred; the buffers given stay their owners'.
    expect(transfer).toEqual([packet.text.buffer, packet.bytes.buffer]);
    const received = decode(packet) as { body: Buffer; whole: Buffer };
    expect(Buffer.isBuffer(received.body) && received.body.equals(body)).toBe(true);
    expect(received.whole.equals(whole)).toBe(true);
  });
});

/** `value` as decode answers it: every Uint8Array a Buffer (toStrictEqual tells the two apart). */
function asBuffers(value: unknown): unknown {
  if (value instanceof Uint8Array) return Buffer.from(value);
  if (Array.isArray(value)) return value.map(asBuffers);
  if (value instanceof Map) return new Map([...value].map(([k, v]) => [k, asBuffers(v)]));
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, asBuffers(v)]));
  return value;
}
