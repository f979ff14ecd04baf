/**
 * A cold segment object (docs/decisions.md, "Cold tier on object storage"):
 *
 *   "RILLSEG1" | u32 LE header length | header JSON | u32 LE length of each append | bytes | SHA-256 of all before it
 *
 * The header names the stream, its incarnation and the range, so an object fetched for a
 * range is checked to be that range, and the digest (also kept in the segment's row) that
 * it is whole. Appends keep their boundaries: reads hand out the same appends as the hot
 * store did.
 */
import { createHash } from 'node:crypto';
import type { StoredChunk } from '../chain.js';

const MAGIC = Buffer.from('RILLSEG1');
const DIGEST_BYTES = 32;

export interface SegmentHeader {
  stream: number;
  incarnation: string;
  start: number;
  end: number;
  appends: number;
}

export interface EncodedSegment {
  body: Buffer;
  /** SHA-256 of the whole object, lowercase hex. */
  sha256: string;
}

/** Why a fetched object is not the segment it should be. */
export class SegmentInvalid extends Error {}

export function sha256Hex(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Encodes contiguous appends `[start, end)` of one stream incarnation. */
export function encodeSegment(stream: number, incarnation: string, appends: readonly StoredChunk[]): EncodedSegment {
  if (appends.length === 0) throw new Error('invariant: a segment holds at least one append');
  const start = appends[0]!.start;
  const last = appends[appends.length - 1]!;
  const header = Buffer.from(JSON.stringify({ stream, incarnation, start, end: last.start + last.data.length, appends: appends.length } satisfies SegmentHeader));
  const lengths = Buffer.allocUnsafe(4 * appends.length);
  let at = start;
  appends.forEach((a, i) => {
    if (a.start !== at) throw new Error(`invariant: segment appends are not contiguous at ${a.start} (expected ${at})`);
    lengths.writeUInt32LE(a.data.length, 4 * i);
    at += a.data.length;
  });
  const headerLength = Buffer.allocUnsafe(4);
  headerLength.writeUInt32LE(header.length);
  const content = Buffer.concat([MAGIC, headerLength, header, lengths, ...appends.map((a) => a.data)]);
  const digest = createHash('sha256').update(content).digest();
  const body = Buffer.concat([content, digest]);
  return { body, sha256: sha256Hex(body) };
}

/**
 * The appends an object holds, after checking it is the segment expected: its digest
 * as its row recorded, its own trailing digest, and the stream and range its header names.
 */
export function decodeSegment(body: Buffer, expected: { sha256: string; stream: number; incarnation: string; start: number; end: number }): StoredChunk[] {
  if (sha256Hex(body) !== expected.sha256) throw new SegmentInvalid('its SHA-256 does not match the one recorded at upload');
  if (body.length < MAGIC.length + 4 + DIGEST_BYTES || !body.subarray(0, MAGIC.length).equals(MAGIC)) throw new SegmentInvalid('it is not a rill segment');
  const content = body.subarray(0, body.length - DIGEST_BYTES);
  if (!createHash('sha256').update(content).digest().equals(body.subarray(body.length - DIGEST_BYTES))) throw new SegmentInvalid('its trailing SHA-256 does not match its bytes');
  const headerLength = content.readUInt32LE(MAGIC.length);
  const headerStart = MAGIC.length + 4;
  const header = JSON.parse(content.subarray(headerStart, headerStart + headerLength).toString('utf8')) as SegmentHeader;
  const same = header.stream === expected.stream && header.incarnation === expected.incarnation && header.start === expected.start && header.end === expected.end;
  if (!same) throw new SegmentInvalid(`it holds stream ${header.stream} range ${header.start}-${header.end}`);
  let at = headerStart + headerLength + 4 * header.appends;
  let position = header.start;
  const appends: StoredChunk[] = [];
  for (let i = 0; i < header.appends; i++) {
    const length = content.readUInt32LE(headerStart + headerLength + 4 * i);
    appends.push({ start: position, data: content.subarray(at, at + length) });
    at += length;
    position += length;
  }
  if (position !== header.end || at !== content.length) throw new SegmentInvalid('its append lengths do not add up to its range');
  return appends;
}
