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
    expect(parseRetentionPolicy({ maxBytes: 10 })).toEqual({ ok: true, policy: { maxBytes: 10, maxMessages: null } });
    expect(parseRetentionPolicy({ maxBytes: null, maxMessages: 2 ** 50 })).toEqual({ ok: true, policy: { maxBytes: null, maxMessages: 2 ** 50 } });
    expect(parseRetentionPolicy({})).toEqual({ ok: true, policy: null });
    expect(parseRetentionPolicy(null)).toEqual({ ok: true, policy: null });
    for (const bad of [{ maxBytes: 0 }, { maxMessages: -1 }, { maxBytes: 2 ** 50 + 1 }, { maxBytes: '10' }, { maxAgeMs: 5 }, [], 'x', 3]) {
      expect(parseRetentionPolicy(bad).ok).toBe(false);
    }
    expect(parseRetentionHeader('{"maxMessages":3}')).toEqual({ ok: true, policy: { maxBytes: null, maxMessages: 3 } });
    expect(parseRetentionHeader('{maxMessages:3}')).toMatchObject({ ok: false, error: { code: 'INVALID_RETENTION_POLICY' } });
  });

  it('round-trips through its stored form; what this rill did not write reads as none', () => {
    const policy = { maxBytes: 5, maxMessages: null };
    expect(retentionFromStored(retentionToStored(policy))).toEqual(policy);
    expect(retentionToStored(undefined)).toBeNull();
    for (const stored of [null, 'garbage', '{"maxBytes":0}', '{}']) expect(retentionFromStored(stored)).toBeUndefined();
  });
});

describe('where a policy cuts', () => {
  const own = { maxBytes: 100, maxMessages: null };
  const bucket = { maxBytes: null, maxMessages: 1 };

  it("the stream's own policy replaces its bucket's default whole", () => {
    expect(policyInForce(streamState({ config: { contentType: 'text/plain', ttlSeconds: null, expiresAtMs: null, retention: own } }), bucket)).toBe(own);
    expect(policyInForce(streamState(), bucket)).toBe(bucket);
    expect(policyInForce(streamState(), undefined)).toBeUndefined();
  });

  it('by bytes: at the end of the append holding the first byte to drop; nothing when within the policy', () => {
    const stream = streamState({ tail: 12, recordNext: 3 });
    const appendAt = appendsOf([4, 4, 4]);
    expect(policyTrimPoint(stream, { maxBytes: 8, maxMessages: null }, appendAt)).toEqual({ offset: 4, recordFirst: null });
    expect(policyTrimPoint(stream, { maxBytes: 7, maxMessages: null }, appendAt)).toEqual({ offset: 8, recordFirst: null });
    expect(policyTrimPoint(stream, { maxBytes: 12, maxMessages: null }, appendAt)).toBeNull();
    expect(policyTrimPoint(stream, { maxBytes: 3, maxMessages: null }, appendAt)).toEqual({ offset: 12, recordFirst: 3 });
    expect(policyTrimPoint({ ...stream, deleted: true }, { maxBytes: 3, maxMessages: null }, appendAt)).toBeNull();
  });

  it('by count on a JSON stream: after the newline of the last message dropped, with its ordinal', () => {
    const data = Buffer.from('1\n22\n333\n');
    const stream = streamState({ config: { contentType: 'application/json', ttlSeconds: null, expiresAtMs: null }, tail: data.length, recordFirst: 0, recordNext: 3 });
    const appendAt: AppendAt = (position) => (position < data.length ? { start: 0, data } : null);
    expect(policyTrimPoint(stream, { maxBytes: null, maxMessages: 1 }, appendAt)).toEqual({ offset: 5, recordFirst: 2 });
    // Both limits: the higher cut wins.
    expect(policyTrimPoint(stream, { maxBytes: 6, maxMessages: 3 }, appendAt)).toEqual({ offset: 5, recordFirst: null });
  });

  it('walks at most MAX_TRIM_WALK_APPENDS appends per cut, so a long backlog is cut over several appends', () => {
    const count = MAX_TRIM_WALK_APPENDS * 2 + 10;
    const appendAt = appendsOf(Array.from({ length: count }, () => 1));
    let stream = streamState({ tail: count, recordNext: count });
    const policy = { maxBytes: null, maxMessages: 5 };
    const first = policyTrimPoint(stream, policy, appendAt)!;
    expect(first).toEqual({ offset: MAX_TRIM_WALK_APPENDS, recordFirst: MAX_TRIM_WALK_APPENDS });
    stream = trimmedByPolicy(stream, first.offset, first.recordFirst!);
    const second = policyTrimPoint(stream, policy, appendAt)!;
    stream = trimmedByPolicy(stream, second.offset, second.recordFirst!);
    const third = policyTrimPoint(stream, policy, appendAt)!;
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
