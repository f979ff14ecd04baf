/**
 * The COPY messages rill reads from PostgreSQL's socket in place of pg's parser
 * (src/storage/postgres/copy-out.ts): every CopyData body handed on in order, whatever the
 * socket reads cut, messages the server may send in between passed over, and the socket
 * given back to pg exactly where the COPY's messages end. The server's own output is read
 * through it in test/storage/postgres-engine.test.ts and test/http/postgres-catch-up.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { CopyOutFrames } from '../../src/storage/postgres/copy-out.js';
import { randomBytes, seededRandom } from './fixtures.js';

/** A protocol message: its type byte, its length (counting itself), its body. */
function message(type: string, body: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

/** Reads `chunks` in order: the bodies handed on, and where pg's messages begin (chunk and offset). */
function readAll(chunks: Buffer[]): { data: Buffer; ended: boolean; rest: Buffer | null } {
  const pieces: Buffer[] = [];
  const frames = new CopyOutFrames((bytes) => pieces.push(bytes));
  for (let i = 0; i < chunks.length; i++) {
    const at = frames.read(chunks[i]!);
    if (at >= 0) return { data: Buffer.concat(pieces), ended: frames.ended, rest: Buffer.concat([chunks[i]!.subarray(at), ...chunks.slice(i + 1)]) };
  }
  return { data: Buffer.concat(pieces), ended: frames.ended, rest: null };
}

describe('reading a COPY from the socket', () => {
  const random = seededRandom(46);
  const bodies = [randomBytes(random, 19), randomBytes(random, 70_000), Buffer.alloc(0), randomBytes(random, 1), randomBytes(random, 5)];
  const pgs = Buffer.concat([message('C', Buffer.from('COPY 4\0')), message('Z', Buffer.from('I'))]);
  const output = Buffer.concat([
    message('H', Buffer.from([1, 0, 2, 0, 1, 0, 1])),
    message('d', bodies[0]),
    message('N', Buffer.from('SNOTICE\0\0')),
    message('d', bodies[1]),
    message('S', Buffer.from('application_name\0rill\0')),
    message('d', bodies[2]),
    message('A', Buffer.alloc(12)),
    message('d', bodies[3]),
    message('d', bodies[4]),
    message('c'),
  ]);
  const wire = Buffer.concat([output, pgs]);
  const all = Buffer.concat(bodies);

  it('hands on every body in order and gives pg the socket after CopyDone, the wire cut anywhere in two', () => {
    for (let cut = 0; cut <= wire.length; cut += cut < 200 || wire.length - cut < 200 ? 1 : 997) {
      const read = readAll([wire.subarray(0, cut), wire.subarray(cut)]);
      expect(read.ended).toBe(true);
      expect(read.data.equals(all)).toBe(true);
      expect(read.rest!.equals(pgs)).toBe(true);
    }
  });

  it('does the same read a byte at a time', () => {
    const read = readAll([...wire].map((byte) => Buffer.from([byte])));
    expect(read.data.equals(all)).toBe(true);
    expect(read.rest!.equals(pgs)).toBe(true);
  });

  it('gives pg an error the server sends in the middle, from its first byte, without ending the output', () => {
    const error = message('E', Buffer.from('SERROR\0C57P01\0Mterminating connection\0\0'));
    const cutShort = Buffer.concat([message('H', Buffer.from([1, 0, 0])), message('d', bodies[1]), error, message('Z', Buffer.from('I'))]);
    for (const cut of [0, 3, 6, 20, 70_010, 70_012, 70_013, 70_014]) {
      const read = readAll([cutShort.subarray(0, cut), cutShort.subarray(cut)]);
      expect(read.ended).toBe(false);
      expect(read.data.equals(bodies[1]!)).toBe(true);
      expect(read.rest!.subarray(0, 1).toString('latin1')).toBe('E');
    }
  });

  it('refuses a message whose length is shorter than the length itself', () => {
    const frames = new CopyOutFrames(() => {});
    expect(() => frames.read(Buffer.from([0x64, 0, 0, 0, 3]))).toThrow(/length 3/);
  });
});
