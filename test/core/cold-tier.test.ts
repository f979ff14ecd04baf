/**
 * The cold tier's rules as pure functions (core/cold-tier.ts), and its segment format
 * (storage/cold/segment.ts): which bytes are sealed by bytes and by age, what the next
 * upload holds, what an object is named, when writes are refused, and that a segment
 * refuses to decode when it is corrupt or another range's. Random cases come from the
 * file's seed.
 */
import { describe, expect, it } from 'vitest';
import {
  coldBacklogRefusal,
  coldEnd,
  coldRangeOf,
  nextMarks,
  nextSegment,
  sealCeiling,
  sealLimit,
  segmentKey,
  segmentUnreachable,
  uploadBackoffMs,
  uploadLag,
  type HotView,
} from '../../src/core/cold-tier.js';
import { decodeSegment, encodeSegment, SegmentInvalid } from '../../src/storage/cold/segment.js';
import { seededRandom } from '../helpers/seed.js';

const rng = seededRandom();

/** Rows of the given sizes from `start`, the last one the stream's last. */
function view(start: number, sizes: number[], movableEnd?: number): HotView {
  const rowEnds: number[] = [];
  let at = start;
  for (const size of sizes) rowEnds.push((at += size));
  const lastStart = rowEnds.length > 1 ? rowEnds[rowEnds.length - 2]! : start;
  return { tail: at, hotStart: start, rowEnds, movableEnd: movableEnd ?? lastStart };
}

describe('sealLimit', () => {
  it('keeps the last window bytes hot when age keeps nothing', () => {
    expect(sealLimit(1000, { bytes: 300, ageMs: 0 }, [], 0)).toBe(700);
    expect(sealLimit(200, { bytes: 300, ageMs: 0 }, [], 0)).toBe(0);
  });

  it('with an age, seals only up to the newest mark that old, and never into the byte window', () => {
    const window = { bytes: 100, ageMs: 1000 };
    const marks = [
      { offset: 400, atMs: 0 },
      { offset: 800, atMs: 500 },
      { offset: 1000, atMs: 1500 },
    ];
    expect(sealLimit(1000, window, marks, 900)).toBe(0);
    expect(sealLimit(1000, window, marks, 1000)).toBe(400);
    expect(sealLimit(1000, window, marks, 1600)).toBe(800);
    expect(sealLimit(1000, window, marks, 5000)).toBe(900);
  });

  it('nextMarks keeps one mark per tail and only the newest mark past the age', () => {
    const window = { bytes: 0, ageMs: 100 };
    let marks = nextMarks([], 10, 0, window);
    marks = nextMarks(marks, 10, 50, window);
    expect(marks).toEqual([{ offset: 10, atMs: 0 }]);
    marks = nextMarks(marks, 20, 60, window);
    marks = nextMarks(marks, 30, 200, window);
    expect(marks).toEqual([
      { offset: 20, atMs: 60 },
      { offset: 30, atMs: 200 },
    ]);
    expect(sealLimit(30, window, marks, 200)).toBe(20);
  });
});

describe('nextSegment', () => {
  it('takes whole rows from the first hot one up to the segment size', () => {
    expect(nextSegment(view(0, [10, 10, 10, 10, 10]), 1000, 20)).toEqual({ start: 0, end: 20 });
    expect(nextSegment(view(50, [10, 5, 10, 10]), 1000, 20)).toEqual({ start: 50, end: 65 });
  });

  it('waits while less than a segment is sealed, and never passes the ceiling', () => {
    expect(nextSegment(view(0, [10, 5, 10]), 1000, 20)).toBeNull();
    expect(nextSegment(view(0, [10, 10, 10, 10]), 15, 20)).toBeNull();
    expect(nextSegment(view(0, [10, 10, 10, 10]), 25, 20)).toEqual({ start: 0, end: 20 });
  });

  it('takes one row larger than a segment alone, and stops before a row that would pass the size', () => {
    expect(nextSegment(view(0, [100, 10, 10]), 1000, 20)).toEqual({ start: 0, end: 100 });
    expect(nextSegment(view(0, [10, 100, 10]), 1000, 20)).toEqual({ start: 0, end: 10 });
  });

  it('never moves the last row nor bytes past the movable end', () => {
    expect(nextSegment(view(0, [30]), 1000, 20)).toBeNull();
    expect(nextSegment(view(0, [10, 10, 10, 10], 15), 1000, 20)).toBeNull();
  });

  it('random rows: a segment is whole rows, within the ceiling, at least the size or cut by a row past it', () => {
    for (let round = 0; round < 500; round++) {
      const sizes = Array.from({ length: rng.int(1, 30) }, () => rng.int(1, 40));
      const v = view(rng.int(0, 1000), sizes);
      const limit = v.hotStart + rng.int(0, 800);
      const size = rng.int(1, 120);
      const segment = nextSegment(v, limit, size);
      if (segment === null) continue;
      expect(segment.start).toBe(v.hotStart);
      expect(v.rowEnds).toContain(segment.end);
      expect(segment.end).toBeLessThanOrEqual(sealCeiling(v, limit));
      const next = v.rowEnds[v.rowEnds.indexOf(segment.end) + 1];
      const full = segment.end - segment.start >= size || (next !== undefined && next - segment.start > size);
      expect(full).toBe(true);
    }
  });
});

describe('the boundary, names, the sweep and the 507', () => {
  it('uploadLag counts whole rows from the first hot one', () => {
    expect(uploadLag({ hotStart: 100 }, 160)).toBe(60);
    expect(uploadLag({ hotStart: 100 }, 100)).toBe(0);
  });

  it('coldEnd is the end of the last segment', () => {
    expect(coldEnd([])).toBe(0);
    expect(
      coldEnd([
        { start: 0, end: 10 },
        { start: 10, end: 40 },
      ]),
    ).toBe(40);
  });

  it('coldRangeOf spans the segments from the earliest offset on, clipped to it; none there is an empty range at it', () => {
    const segments = [
      { start: 0, end: 10, bytes: 30 },
      { start: 10, end: 40, bytes: 60 },
      { start: 40, end: 70, bytes: 60 },
    ];
    expect(coldRangeOf([], 0)).toEqual({ start: 0, end: 0, segments: 0, objectBytes: 0 });
    expect(coldRangeOf(segments, 0)).toEqual({ start: 0, end: 70, segments: 3, objectBytes: 150 });
    // Trimmed to 25: the first segment awaits the sweep and is not counted, the second is cut.
    expect(coldRangeOf(segments, 25)).toEqual({ start: 25, end: 70, segments: 2, objectBytes: 120 });
    expect(coldRangeOf(segments, 70)).toEqual({ start: 70, end: 70, segments: 0, objectBytes: 0 });
  });

  it('segmentKey pads offsets so that keys sort in stream order, under the prefix', () => {
    const a = segmentKey('p/q', 7, 'inc', 0, 99);
    const b = segmentKey('p/q', 7, 'inc', 99, 1000);
    expect(a).toBe('p/q/7.inc/0000000000000000-0000000000000099.rseg');
    expect([b, a].sort()).toEqual([a, b]);
    expect(segmentKey('', 1, 'x', 0, 1)).toBe('1.x/0000000000000000-0000000000000001.rseg');
  });

  it('the sweep takes segments of dropped streams, and below the earliest offset only of streams no fork reads', () => {
    expect(segmentUnreachable({ start: 0, end: 10 }, null, 0)).toBe(true);
    expect(segmentUnreachable({ start: 0, end: 10 }, 10, 0)).toBe(true);
    expect(segmentUnreachable({ start: 0, end: 10 }, 9, 0)).toBe(false);
    expect(segmentUnreachable({ start: 0, end: 10 }, 10, 1)).toBe(false);
  });

  it('refuses writes only past the backlog limit, saying how far behind', () => {
    expect(coldBacklogRefusal(100, 100)).toBeNull();
    expect(coldBacklogRefusal(10_000, 0)).toBeNull();
    const refused = coldBacklogRefusal(101, 100)!;
    expect(refused.code).toBe('COLD_STORE_BACKLOG');
    expect(refused.message).toContain('101 bytes');
    expect(refused.fields?.retryAfterSeconds).toBe(10);
  });

  it('backs off doubling, up to its most', () => {
    expect([0, 1, 2, 3, 10].map((n) => uploadBackoffMs(n, 100, 1000))).toEqual([0, 100, 200, 400, 1000]);
  });
});

describe('segment format', () => {
  function randomAppends(start: number): Array<{ start: number; data: Buffer }> {
    const appends = [];
    let at = start;
    for (let i = rng.int(1, 20); i > 0; i--) {
      const data = Buffer.from(Array.from({ length: rng.int(0, 300) }, () => rng.int(0, 255)));
      appends.push({ start: at, data });
      at += data.length;
    }
    return appends;
  }

  it('decodes to the same appends, boundaries kept', () => {
    const appends = randomAppends(1234);
    const end = appends.at(-1)!.start + appends.at(-1)!.data.length;
    const { body, sha256 } = encodeSegment(5, 'inc', appends);
    const decoded = decodeSegment(body, { sha256, stream: 5, incarnation: 'inc', start: 1234, end });
    expect(decoded.map((a) => ({ start: a.start, data: Buffer.from(a.data) }))).toEqual(appends);
  });

  it('refuses a flipped byte anywhere, a truncated object, and another range or incarnation', () => {
    const appends = randomAppends(0);
    const end = appends.at(-1)!.start + appends.at(-1)!.data.length;
    const { body, sha256 } = encodeSegment(5, 'inc', appends);
    const expected = { sha256, stream: 5, incarnation: 'inc', start: 0, end };
    const flipped = Buffer.from(body);
    flipped[rng.int(0, body.length - 1)]! ^= 0x01;
    expect(() => decodeSegment(flipped, expected)).toThrow(SegmentInvalid);
    expect(() => decodeSegment(body.subarray(0, body.length - 1), expected)).toThrow(SegmentInvalid);
    const other = encodeSegment(5, 'other', appends);
    expect(() => decodeSegment(other.body, { ...expected, sha256: other.sha256 })).toThrow(/holds stream 5/);
  });
});
