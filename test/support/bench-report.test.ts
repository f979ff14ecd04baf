/**
 * How the bench judges a target on a ratio (bench/report.ts): on the ratio of the two
 * servers' medians, with the range of the round-by-round ratios given beside it, since the
 * bench's rounds are interleaved and this machine's pace moves between them.
 */
import { describe, expect, it } from 'vitest';
import { checkPostgresTargets, checkTargets, roundRatios, type Row } from '../../bench/report.js';

function row(key: string, rounds: Row['rounds']): Row {
  return { key, label: key, unit: 'appends/s', better: 'higher', rounds };
}

/** PostgreSQL at 0.46x, 0.56x and 0.74x of SQLite round by round; 5,920 against 10,000 in the medians. */
const APPENDS = row('appends-500', {
  rill: [10_000, 12_000, 8_000],
  'rill-pg': [4_600, 6_720, 5_920],
});

function targetNamed(checks: ReturnType<typeof checkTargets>, start: string) {
  const found = checks.find((c) => c.target.startsWith(start));
  if (!found) throw new Error(`no target starts with "${start}"`);
  return found;
}

describe('the bench report', () => {
  it('pairs the rounds of two servers in order', () => {
    expect(roundRatios([APPENDS], { key: 'appends-500', target: 'rill-pg' }, { key: 'appends-500', target: 'rill' })).toEqual([0.46, 0.56, 0.74]);
  });

  it('judges a target on the ratio of medians and gives the rounds\' range beside it', () => {
    const check = targetNamed(checkPostgresTargets([APPENDS], 500), 'PostgreSQL, 1 node: appends/s at 500 streams >= 0.6x');
    // Medians 5,920 over 10,000: unmet, though one round reached 0.74x.
    expect(check.met).toBe(false);
    expect(check.detail).toBe('ratio = 0.59 (needs >= 0.6); round by round 0.46-0.74');
  });

  it('pairs rounds across rows measured in the same rounds: readers away from the writer on two PostgreSQL nodes against SQLite', () => {
    const rows = [
      row('sse-away-p99', { 'rill-pg-2': [30, 50, 40] }),
      row('sse-p99', { rill: [10, 10, 5] }),
    ];
    const check = targetNamed(checkPostgresTargets(rows, 500), 'PostgreSQL, 2 nodes: SSE p99, all subscribers away from the writer, <= 5x');
    // Medians 40 over 10: met, though one round was 8x.
    expect(check.met).toBe(true);
    expect(check.detail).toBe('ratio = 4.00 (needs <= 5); round by round 3.00-8.00');
  });

  it('judges issue 41\'s producer appends against the reference in memory', () => {
    const producers = row('producers-500', { rill: [9_000, 12_000, 13_000], 'ref-memory': [10_000, 12_000, 10_000] });
    const check = targetNamed(checkTargets([producers], 500, NaN, 100_000, 500), 'producer appends/s at 500 streams >= reference in-memory');
    expect(check.met).toBe(true);
    expect(check.detail).toBe('ratio = 1.20 (needs >= 1); round by round 0.90-1.30');
  });

  it('gives no range when the two servers did not run the same rounds', () => {
    const uneven = row('appends-500', { rill: [10_000, 12_000], 'rill-pg': [6_500, 6_700, 6_600] });
    const check = targetNamed(checkPostgresTargets([uneven], 500), 'PostgreSQL, 1 node: appends/s at 500 streams >= 0.6x');
    expect(check.met).toBe(true);
    expect(check.detail).toBe('ratio = 0.60 (needs >= 0.6)');
  });

  it('says a target is not measured when one server is missing', () => {
    const check = targetNamed(checkTargets([APPENDS], 500, NaN, 100_000, 500), 'appends/s at 500 streams >= 0.7x bare floor');
    expect(check).toMatchObject({ met: false, detail: 'not measured in this run' });
  });
});
