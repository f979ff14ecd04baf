import { describe, expect, it } from 'vitest';
import { messagesWritten, NO_SUBJECT, OTHER, usagePage, usageSubject, UsageTable } from '../../src/core/usage.js';

const bytes = (s: string) => Buffer.from(s);

describe('usage counting rule', () => {
  it('counts a JSON payload by its framed messages, any other non-empty payload as one, a close as none', () => {
    expect(messagesWritten(true, bytes('{"a":1}\n{"b":2}\n3\n'))).toBe(3);
    expect(messagesWritten(false, bytes('one two three'))).toBe(1);
    expect(messagesWritten(true, bytes(''))).toBe(0);
    expect(messagesWritten(false, bytes(''))).toBe(0);
  });

  it('names a missing or empty subject "-"', () => {
    expect(usageSubject(undefined)).toBe(NO_SUBJECT);
    expect(usageSubject('')).toBe(NO_SUBJECT);
    expect(usageSubject('alice')).toBe('alice');
  });
});

describe('UsageTable', () => {
  it('keeps one row per bucket and subject', () => {
    const table = new UsageTable(10);
    table.wrote('aaaa', 'alice', 2, 10);
    table.wrote('aaaa', 'alice', 1, 5);
    table.wrote('aaaa', 'bob', 1, 1);
    table.served('bbbb', 'alice', 7);
    expect(table.rows()).toEqual([
      { bucket: 'aaaa', subject: 'alice', appends: 3, bytesIn: 15, bytesOut: 0, liveReaders: 0 },
      { bucket: 'aaaa', subject: 'bob', appends: 1, bytesIn: 1, bytesOut: 0, liveReaders: 0 },
      { bucket: 'bbbb', subject: 'alice', appends: 0, bytesIn: 0, bytesOut: 7, liveReaders: 0 },
    ]);
  });

  it('folds the least recently active key into (other) past the cap, the totals exact', () => {
    const table = new UsageTable(2);
    table.wrote('aaaa', 'alice', 1, 10);
    table.wrote('bbbb', 'bob', 2, 20);
    table.wrote('aaaa', 'alice', 1, 10); // alice is now the more recent: bob goes first
    table.wrote('cccc', 'carol', 4, 40);
    const rows = table.rows();
    expect(rows.map((r) => `${r.bucket}/${r.subject}`)).toEqual([`${OTHER}/${OTHER}`, 'aaaa/alice', 'cccc/carol']);
    expect(rows.reduce((n, r) => n + r.appends, 0)).toBe(8);
    expect(rows.reduce((n, r) => n + r.bytesIn, 0)).toBe(80);
    expect(table.keys).toBe(2);
    // bbbb had no row left: its series went to (other), the metrics' totals exact too.
    expect(Object.fromEntries(table.bucketTotals())).toEqual({
      aaaa: { appends: 2, bytesIn: 20, bytesOut: 0 },
      cccc: { appends: 4, bytesIn: 40, bytesOut: 0 },
      [OTHER]: { appends: 2, bytesIn: 20, bytesOut: 0 },
    });
    // The node's totals, what the console charts rates from, count every write once.
    table.served('dddd', 'dave', 7);
    expect(table.totals()).toEqual({ appends: 8, bytesIn: 80, bytesOut: 7 });
  });

  it('keeps a bucket series while one of its rows remains', () => {
    const table = new UsageTable(2);
    table.wrote('aaaa', 'alice', 1, 1);
    table.wrote('aaaa', 'bob', 1, 1);
    table.wrote('bbbb', 'carol', 1, 1);
    expect(Object.fromEntries(table.bucketTotals())).toEqual({ aaaa: { appends: 2, bytesIn: 2, bytesOut: 0 }, bbbb: { appends: 1, bytesIn: 1, bytesOut: 0 } });
  });

  it('releases a live reader on the row its own was folded into', () => {
    const table = new UsageTable(1);
    const hold = table.hold('aaaa', 'alice');
    expect(table.rows()[0]!.liveReaders).toBe(1);
    table.wrote('bbbb', 'bob', 1, 1);
    expect(table.rows().find((r) => r.bucket === OTHER)!.liveReaders).toBe(1);
    table.release(hold);
    expect(table.rows().some((r) => r.liveReaders > 0)).toBe(false);
  });

  it('pages rows by bucket with a cursor', () => {
    const table = new UsageTable(10);
    for (const subject of ['a', 'b c', 'd']) table.wrote('aaaa', subject, 1, 1);
    table.wrote('bbbb', 'a', 1, 1);
    const rows = table.rows();
    const first = usagePage(rows, 'aaaa', null, 2);
    expect(first.rows.map((r) => r.subject)).toEqual(['a', 'b c']);
    expect(first.next).toBe('aaaa b c');
    const second = usagePage(rows, 'aaaa', first.next, 2);
    expect(second).toEqual({ rows: [expect.objectContaining({ subject: 'd' })], next: null });
    expect(usagePage(rows, null, null, 10).rows).toHaveLength(4);
  });
});
