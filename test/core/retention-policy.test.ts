/**
 * Retention policies as pure rules: what a policy may be, which one is in force, where it
 * cuts a stream given its appends, that a long backlog is cut over several appends, and
 * when stored bytes are deleted. The engines' part is test/storage/retention-policy-contract.ts.
 */
import { describe, expect, it } from 'vitest';
import {
  MAX_TRIM_WALK_APPENDS,
  parseRetentionHeader,
  parseRetentionPolicy,
  physicalTrimDue,
  policyInForce,
  policyTrimPoint,
  retentionFromStored,
  retentionToStored,
  trimmedByPolicy,
  markedAfterAppend,
  markIntervalMs,
  MAX_TIME_MARKS,
  type AppendAt,
} from '../../src/core/retention-policy.js';
import { streamState } from './states.js';

/** Appends of the given sizes from 0, found as an engine's chunkAt finds them. */
function appendsOf(sizes: number[], fill = 0x61): AppendAt {
  const appends: Array<{ start: number; data: Buffer }> = [];
  let start = 0;
  for (const size of sizes) {
    appends.push({ start, data: Buffer.alloc(size, fill) });
    start += size;
  }
  return (position) => appends.find((a) => a.start <= position && position < a.start + a.data.length) ?? null;
}

describe('parsing', () => {
  it('takes null or an object of maxBytes and maxMessages, each null or an integer from 1; a policy limiting nothing is none', () => {
    expect(parseRetentionPolicy({ maxBytes: 10 })).toEqual({ ok: true, policy: { maxBytes: 10, maxMessages: null, maxAgeMs: null } });
    expect(parseRetentionPolicy({ maxBytes: null, maxMessages: 2 ** 50, maxAgeMs: null })).toEqual({ ok: true, policy: { maxBytes: null, maxMessages: 2 ** 50, maxAgeMs: null } });
    expect(parseRetentionPolicy({})).toEqual({ ok: true, policy: null });
    expect(parseRetentionPolicy(null)).toEqual({ ok: true, policy: null });
    for (const bad of [{ maxBytes: 0 }, { maxMessages: -1 }, { maxBytes: 2 ** 50 + 1 }, { maxBytes: '10' }, { maxAgeMs: 0 }, { maxAge: 5 }, [], 'x', 3]) {
      expect(parseRetentionPolicy(bad).ok).toBe(false);
    }
    expect(parseRetentionHeader('{"maxMessages":3}')).toEqual({ ok: true, policy: { maxBytes: null, maxMessages: 3, maxAgeMs: null } });
    expect(parseRetentionHeader('{maxMessages:3}')).toMatchObject({ ok: false, error: { code: 'INVALID_RETENTION_POLICY' } });
  });

  it('round-trips through its stored form; what this rill did not write reads as none', () => {
    const policy = { maxBytes: 5, maxMessages: null, maxAgeMs: null };
    expect(retentionFromStored(retentionToStored(policy))).toEqual(policy);
    expect(retentionToStored(undefined)).toBeNull();
    for (const stored of [null, 'garbage', '{"maxBytes":0}', '{}']) expect(retentionFromStored(stored)).toBeUndefined();
  });
});

describe('where a policy cuts', () => {
  const own = { maxBytes: 100, maxMessages: null, maxAgeMs: null };
  const bucket = { maxBytes: null, maxMessages: 1, maxAgeMs: null };

  it("the stream's own policy replaces its bucket's default whole", () => {
    expect(policyInForce(streamState({ config: { contentType: 'text/plain', ttlSeconds: null, expiresAtMs: null, retention: own } }), bucket)).toBe(own);
    expect(policyInForce(streamState(), bucket)).toBe(bucket);
    expect(policyInForce(streamState(), undefined)).toBeUndefined();
  });

  it('by bytes: at the end of the append holding the first byte to drop; nothing when within the policy', () => {
    const stream = streamState({ tail: 12, recordNext: 3 });
    const appendAt = appendsOf([4, 4, 4]);
    expect(policyTrimPoint(stream, { maxBytes: 8, maxMessages: null, maxAgeMs: null }, appendAt, 0)).toEqual({ offset: 4, recordFirst: null });
    expect(policyTrimPoint(stream, { maxBytes: 7, maxMessages: null, maxAgeMs: null }, appendAt, 0)).toEqual({ offset: 8, recordFirst: null });
    expect(policyTrimPoint(stream, { maxBytes: 12, maxMessages: null, maxAgeMs: null }, appendAt, 0)).toBeNull();
    expect(policyTrimPoint(stream, { maxBytes: 3, maxMessages: null, maxAgeMs: null }, appendAt, 0)).toEqual({ offset: 12, recordFirst: 3 });
    expect(policyTrimPoint({ ...stream, deleted: true }, { maxBytes: 3, maxMessages: null, maxAgeMs: null }, appendAt, 0)).toBeNull();
  });

  it('by count on a JSON stream: after the newline of the last message dropped, with its ordinal', () => {
    const data = Buffer.from('1\n22\n333\n');
    const stream = streamState({ config: { contentType: 'application/json', ttlSeconds: null, expiresAtMs: null }, tail: data.length, recordFirst: 0, recordNext: 3 });
    const appendAt: AppendAt = (position) => (position < data.length ? { start: 0, data } : null);
    expect(policyTrimPoint(stream, { maxBytes: null, maxMessages: 1, maxAgeMs: null }, appendAt, 0)).toEqual({ offset: 5, recordFirst: 2 });
    // Both limits: the higher cut wins.
    expect(policyTrimPoint(stream, { maxBytes: 6, maxMessages: 3, maxAgeMs: null }, appendAt, 0)).toEqual({ offset: 5, recordFirst: null });
  });

  it('walks at most MAX_TRIM_WALK_APPENDS appends per cut, so a long backlog is cut over several appends', () => {
    const count = MAX_TRIM_WALK_APPENDS * 2 + 10;
    const appendAt = appendsOf(Array.from({ length: count }, () => 1));
    let stream = streamState({ tail: count, recordNext: count });
    const policy = { maxBytes: null, maxMessages: 5, maxAgeMs: null };
    const first = policyTrimPoint(stream, policy, appendAt, 0)!;
    expect(first).toEqual({ offset: MAX_TRIM_WALK_APPENDS, recordFirst: MAX_TRIM_WALK_APPENDS });
    stream = trimmedByPolicy(stream, first.offset, first.recordFirst!);
    const second = policyTrimPoint(stream, policy, appendAt, 0)!;
    stream = trimmedByPolicy(stream, second.offset, second.recordFirst!);
    const third = policyTrimPoint(stream, policy, appendAt, 0)!;
    expect(third).toEqual({ offset: count - 5, recordFirst: count - 5 });
  });
});

describe('what a cut changes', () => {
  it('withdraws a snapshot below the new earliest offset, keeps one at or past it', () => {
    const snapshot = { offset: 4, contentType: 'text/plain', digest: 'd' };
    const stream = streamState({ tail: 12, recordNext: 3, snapshot });
    expect(trimmedByPolicy(stream, 4, 1)).toMatchObject({ earliestOffset: 4, recordFirst: 1, snapshot });
    expect(trimmedByPolicy(stream, 8, 2)).toMatchObject({ earliestOffset: 8, recordFirst: 2, snapshot: null });
  });

  it('deletes stored bytes each time the earliest offset crosses a MiB', () => {
    const MiB = 1024 * 1024;
    expect(physicalTrimDue(0, MiB - 1)).toBe(false);
    expect(physicalTrimDue(MiB - 1, MiB)).toBe(true);
    expect(physicalTrimDue(MiB, 2 * MiB - 1)).toBe(false);
    expect(physicalTrimDue(10, 5 * MiB + 3)).toBe(true);
  });
});

describe('time marks of an age limit', () => {
  const age = { maxBytes: null, maxMessages: null, maxAgeMs: 64_000 };

  it('one per interval: a later append in the same interval moves the newest mark, one in the next adds a mark', () => {
    expect(markIntervalMs(64_000)).toBe(2_000);
    expect(markIntervalMs(1_000)).toBe(1_000);
    let s = markedAfterAppend(streamState({ tail: 2, recordNext: 1 }), age, 10_000);
    s = markedAfterAppend({ ...s, tail: 4, recordNext: 2 }, age, 11_999);
    expect(s.timeMarks).toEqual([{ offset: 4, record: 2, atMs: 11_999 }]);
    s = markedAfterAppend({ ...s, tail: 6, recordNext: 3 }, age, 12_000);
    expect(s.timeMarks).toEqual([{ offset: 4, record: 2, atMs: 11_999 }, { offset: 6, record: 3, atMs: 12_000 }]);
    expect(s.ageDueMs).toBe(11_999 + 64_000 + 1);
    // Without an age limit, none (and a stream that never had any is left as it is).
    expect(markedAfterAppend(s, { ...age, maxAgeMs: null }, 13_000).timeMarks).toBeUndefined();
    const plain = streamState({ tail: 2 });
    expect(markedAfterAppend(plain, undefined, 0)).toBe(plain);
  });

  it('keeps at most MAX_TIME_MARKS, the newest', () => {
    let s = streamState();
    for (let i = 1; i <= MAX_TIME_MARKS + 5; i++) s = markedAfterAppend({ ...s, tail: i, recordNext: i }, age, i * 2_000);
    expect(s.timeMarks).toHaveLength(MAX_TIME_MARKS);
    expect(s.timeMarks![0]!.offset).toBe(6);
  });

  it('cuts at the newest mark strictly older than the limit', () => {
    const marks = [{ offset: 2, record: 1, atMs: 1_000 }, { offset: 4, record: 2, atMs: 5_000 }];
    const stream = streamState({ tail: 6, recordNext: 3, timeMarks: marks, ageDueMs: 1_000 + 64_000 + 1 });
    const appendAt = appendsOf([2, 2, 2]);
    expect(policyTrimPoint(stream, age, appendAt, 65_000)).toBeNull();
    expect(policyTrimPoint(stream, age, appendAt, 65_001)).toEqual({ offset: 2, recordFirst: 1 });
    expect(policyTrimPoint(stream, age, appendAt, 70_000)).toEqual({ offset: 4, recordFirst: 2 });
  });
});
