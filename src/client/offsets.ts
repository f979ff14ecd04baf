/**
 * Offsets and Stream-Seq values as the client handles them: opaque strings on the wire,
 * 20-digit zero-padded decimals on rill, so that comparing them as strings (bytewise)
 * orders them like numbers.
 */
import { OFFSET_DIGITS, encodeOffset, parsePosition } from '../protocol/offset.js';

export { encodeOffset, OFFSET_DIGITS };

/** The start of a stream, as a read offset. */
export const START = '-1';
/** The current tail, as a read offset. */
export const NOW = 'now';

/** A position from a canonical offset string; undefined for sentinels or other forms. */
export function positionOf(offset: string): number | undefined {
  return /^\d{20}$/.test(offset) ? parsePosition(offset) : undefined;
}

/**
 * A commit number as a fixed-width Stream-Seq value. Accepts numbers, bigints and
 * decimal strings; refuses values that do not fit the width, since a wider value would
 * sort wrongly against the others.
 */
export function formatSeq(value: number | bigint | string, width: number = OFFSET_DIGITS): string {
  const digits = typeof value === 'string' ? value : value.toString();
  if (!/^\d+$/.test(digits)) throw new RangeError(`a commit number must be a non-negative integer, got ${digits}`);
  if (digits.length > width) throw new RangeError(`commit number ${digits} is wider than ${width} digits`);
  return digits.padStart(width, '0');
}

/** Bytewise comparison, the order Stream-Seq uses: negative, zero or positive. */
export function compareSeq(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
