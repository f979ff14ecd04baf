/**
 * Offsets are byte positions in a stream, written as 20-digit zero-padded decimal
 * strings. Fixed width makes them sort bytewise in the same order as numerically, so a
 * client can compare them as strings and use them directly as `Stream-Seq` values.
 */

export const OFFSET_DIGITS = 20;
const ZEROS = '0'.repeat(OFFSET_DIGITS);

/** Offsets beyond this are never issued; a larger value is treated as "past any tail". */
export const MAX_OFFSET = Number.MAX_SAFE_INTEGER;

export function encodeOffset(position: number): string {
  if (!Number.isSafeInteger(position) || position < 0) {
    throw new RangeError(`offset must be a non-negative safe integer, got ${position}`);
  }
  const digits = String(position);
  // A slice of a constant, not padStart: padStart builds its padding anew each call
  // (String.prototype.repeat), 1,100 instructions an offset under callgrind, two per append.
  return ZEROS.slice(digits.length) + digits;
}

export type OffsetParam =
  | { kind: 'start' }
  | { kind: 'now' }
  | { kind: 'at'; position: number };

const CANONICAL = /^\d{20}$/;
// The reference server's form, `{segment}_{byte}` with 16 digits each. Accepted on
// input so that clients and tests written against it (which hard-code the zero offset
// in this form) work unchanged; rill never emits it.
const REFERENCE_FORM = /^(\d{16})_(\d{16})$/;

function clampToPosition(digits: string): number {
  const value = Number(digits);
  return value > MAX_OFFSET ? MAX_OFFSET : value;
}

/** Parses an offset token; `undefined` means malformed. */
export function parseOffsetToken(raw: string): OffsetParam | undefined {
  if (raw === '-1') return { kind: 'start' };
  if (raw === 'now') return { kind: 'now' };
  if (CANONICAL.test(raw)) return { kind: 'at', position: clampToPosition(raw) };
  const ref = REFERENCE_FORM.exec(raw);
  if (ref) {
    // A non-zero segment number names a position rill never issued: past any tail.
    const position = /^0+$/.test(ref[1]!) ? clampToPosition(ref[2]!) : MAX_OFFSET;
    return { kind: 'at', position };
  }
  return undefined;
}

/** Parses an offset that must name a concrete position (no sentinels). */
export function parsePosition(raw: string): number | undefined {
  const parsed = parseOffsetToken(raw);
  if (parsed === undefined) return undefined;
  if (parsed.kind === 'start') return 0;
  if (parsed.kind === 'at') return parsed.position;
  return undefined;
}
