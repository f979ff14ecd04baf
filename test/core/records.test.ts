/**
 * The rules of record coordinates (core/records.ts) as pure functions: counting newlines
 * forward and backward across any split of the bytes into windows finds the same
 * boundary as counting over the whole, the ordinal at a boundary is the same counted from
 * either end, record starts resolve against F and N, and a read's record parameters are
 * accepted only in the combinations the extension allows. Streams without records number
 * their appends with the same F and N (stats' message count).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  appendOrdinalFromCount,
  countMessagesIn,
  cutRecords,
  messageNextAfterWrite,
  messagesHeld,
  parseRecordQuery,
  recordCountAt,
  recordFromCount,
  recordSearchFrom,
  resolveRecordStart,
  skipRecordsBackward,
  skipRecordsForward,
} from '../../src/core/records.js';
import { testSeed } from '../helpers/seed.js';
import { streamState } from './states.js';

/** Stored JSON: each message its compact text and one newline. */
const storedMessages = fc.array(fc.string({ unit: fc.constantFrom('a', '1', '"', '{', '}', ' ', 'é'), maxLength: 6 }).map((s) => `${JSON.stringify(s)}\n`), { minLength: 1, maxLength: 30 });

/** Where each message starts, and the end. */
function boundariesOf(messages: string[]): number[] {
  const starts = [0];
  for (const m of messages) starts.push(starts[starts.length - 1]! + Buffer.byteLength(m));
  return starts;
}

/** Forward scan over windows of `size` bytes from the start, as live/records.ts reads. */
function scanForward(data: Buffer, skip: number, size: number): number | null {
  let position = 0;
  let left = skip;
  while (position <= data.length) {
    const window = data.subarray(position, position + size);
    const found = skipRecordsForward(window, left);
    if ('at' in found) return position + found.at;
    if (window.length === 0) return null;
    left -= found.seen;
    position += window.length;
  }
  return null;
}

/** Backward scan over windows of `size` bytes from the end down to 0. */
function scanBackward(data: Buffer, skip: number, size: number): number | null {
  let end = data.length;
  let left = skip;
  for (;;) {
    const start = Math.max(0, end - size);
    const found = skipRecordsBackward(data.subarray(start, end), left);
    if ('at' in found) return start + found.at;
    if (start === 0) return found.seen === left ? 0 : null;
    left -= found.seen;
    end = start;
  }
}

describe('finding a record by counting newlines', () => {
  it('forward and backward scans over any windows land on the boundary of the record', () => {
    fc.assert(
      fc.property(storedMessages, fc.nat(), fc.integer({ min: 1, max: 40 }), (messages, pick, size) => {
        const data = Buffer.from(messages.join(''));
        const starts = boundariesOf(messages);
        const record = pick % (messages.length + 1);
        expect(scanForward(data, record, size)).toBe(starts[record]);
        expect(scanBackward(data, messages.length - record, size)).toBe(starts[record]);
      }),
      { seed: testSeed(), numRuns: 300 },
    );
  });

  it('the ordinal at a boundary is the same counted up from F or down from N', () => {
    fc.assert(
      fc.property(storedMessages, fc.nat(), fc.nat({ max: 1000 }), (messages, pick, first) => {
        const starts = boundariesOf(messages);
        const data = Buffer.from(messages.join(''));
        const stream = streamState({ config: { contentType: 'application/json', ttlSeconds: null, expiresAtMs: null }, tail: data.length, recordFirst: first, recordNext: first + messages.length });
        const record = pick % (messages.length + 1);
        const count = recordCountAt(stream, starts[record]!);
        const newlines = data.subarray(count.from, count.to).filter((b) => b === 0x0a).length;
        expect(recordFromCount(count, newlines)).toBe(first + record);
        expect(count.to - count.from).toBeLessThanOrEqual(Math.ceil(data.length / 2) + 1);
      }),
      { seed: testSeed(), numRuns: 300 },
    );
  });

  it('starts from the nearest known place on each side, ignoring places no longer retained', () => {
    const stream = streamState({ config: { contentType: 'application/json', ttlSeconds: null, expiresAtMs: null }, tail: 1000, earliestOffset: 100, recordFirst: 10, recordNext: 200 });
    const marks = [
      { record: 5, offset: 50 },
      { record: 40, offset: 300 },
      { record: 90, offset: 500 },
      { record: 120, offset: 700 },
    ];
    expect(recordSearchFrom(stream, 100, marks)).toEqual({ below: { record: 90, offset: 500 }, above: { record: 120, offset: 700 } });
    expect(recordSearchFrom(stream, 20, marks)).toEqual({ below: { record: 10, offset: 100 }, above: { record: 40, offset: 300 } });
    expect(recordSearchFrom(stream, 150, [])).toEqual({ below: { record: 10, offset: 100 }, above: { record: 200, offset: 1000 } });
  });

  it('cuts a window of whole records at max_records', () => {
    const data = Buffer.from('1\n22\n333\n');
    expect(cutRecords(data, 2)).toEqual({ data: Buffer.from('1\n22\n'), records: 2 });
    expect(cutRecords(data, 9)).toEqual({ data, records: 3 });
    expect(cutRecords(data, null)).toEqual({ data, records: 3 });
  });
});

describe('appends counted on a stream without records (what stats answers)', () => {
  /** Appends of 1 to 5 bytes laid end to end: each one's start, and the end. */
  const appendLengths = fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 1, maxLength: 30 });

  it('the ordinal at any position, inside an append too, is the appends starting before it, counted up from F or down from N', () => {
    fc.assert(
      fc.property(appendLengths, fc.nat(), fc.nat({ max: 1000 }), (lengths, pick, first) => {
        const starts = [0];
        for (const length of lengths) starts.push(starts[starts.length - 1]! + length);
        const tail = starts[lengths.length]!;
        const stream = streamState({ tail, recordFirst: first, recordNext: first + lengths.length });
        const position = pick % (tail + 1);
        const count = recordCountAt(stream, position);
        // The pieces a chain read of [from, to) gives: each append there, the first cut at `from`.
        const pieces = lengths
          .map((length, i) => ({ start: starts[i]!, end: starts[i]! + length }))
          .filter((a) => a.end > count.from && a.start < count.to)
          .map((a) => ({ data: Buffer.alloc(Math.min(a.end, count.to) - Math.max(a.start, count.from)) }));
        const startsAppend = starts.includes(position);
        const below = starts.slice(0, lengths.length).filter((start) => start < position).length;
        expect(appendOrdinalFromCount(count, countMessagesIn(stream, pieces), startsAppend)).toBe(first + below);
      }),
      { seed: testSeed(), numRuns: 300 },
    );
  });

  it('an append is one message whatever its bytes, an empty one none; on a JSON stream a message is a line', () => {
    const bytes = streamState({ recordFirst: 2, recordNext: 5 });
    expect(messageNextAfterWrite(bytes, Buffer.from('a\nb\n'))).toBe(6);
    expect(messageNextAfterWrite(bytes, Buffer.alloc(0))).toBe(5);
    expect(messagesHeld(bytes)).toBe(3);
    const json = streamState({ config: { contentType: 'application/json', ttlSeconds: null, expiresAtMs: null }, recordNext: 5 });
    expect(messageNextAfterWrite(json, Buffer.from('1\n2\n'))).toBe(7);
    expect(countMessagesIn(json, [{ data: Buffer.from('1\n2\n') }, { data: Buffer.from('3\n') }])).toBe(3);
    expect(countMessagesIn(bytes, [{ data: Buffer.from('1\n2\n') }, { data: Buffer.from('3\n') }])).toBe(2);
  });
});

describe('record starts', () => {
  const stream = streamState({ config: { contentType: 'application/json', ttlSeconds: null, expiresAtMs: null }, recordFirst: 5, recordNext: 12 });

  it('resolves record=<n>, now and tail_records against F and N', () => {
    expect(resolveRecordStart(stream, { kind: 'record', record: 5 })).toEqual({ ok: true, record: 5 });
    expect(resolveRecordStart(stream, { kind: 'record', record: 12 })).toEqual({ ok: true, record: 12 });
    expect(resolveRecordStart(stream, { kind: 'now' })).toEqual({ ok: true, record: 12 });
    expect(resolveRecordStart(stream, { kind: 'tail', count: 3 })).toEqual({ ok: true, record: 9 });
    expect(resolveRecordStart(stream, { kind: 'tail', count: 30 })).toEqual({ ok: true, record: 5 });
  });

  it('refuses below F with 410 and past N with 400, both naming F and N; a stream without records with 400', () => {
    expect(resolveRecordStart(stream, { kind: 'record', record: 4 })).toMatchObject({ ok: false, error: { code: 'RECORD_TRIMMED', fields: { recordFirst: 5, recordNext: 12 } } });
    expect(resolveRecordStart(stream, { kind: 'record', record: 13 })).toMatchObject({ ok: false, error: { code: 'RECORD_BEYOND_TAIL', fields: { recordFirst: 5, recordNext: 12 } } });
    expect(resolveRecordStart(streamState(), { kind: 'now' })).toMatchObject({ ok: false, error: { code: 'RECORDS_NOT_ACTIVE' } });
  });
});

describe("a read's record parameters", () => {
  const parse = (params: Record<string, string>, offset = false) => parseRecordQuery({ ...params, offset });

  it('are absent from an offset read, and shape a record read', () => {
    expect(parse({})).toEqual({ ok: true, query: null });
    expect(parse({ record: '7', maxRecords: '3' })).toEqual({ ok: true, query: { start: { kind: 'record', record: 7 }, maxRecords: 3, envelope: false } });
    expect(parse({ record: 'now', recordView: 'envelope' })).toEqual({ ok: true, query: { start: { kind: 'now' }, maxRecords: null, envelope: true } });
    expect(parse({ tailRecords: '0' })).toEqual({ ok: true, query: { start: { kind: 'now' }, maxRecords: null, envelope: false } });
    expect(parse({ tailRecords: '4' })).toMatchObject({ ok: true, query: { start: { kind: 'tail', count: 4 } } });
  });

  it('refuse every combination the extension forbids and every malformed value', () => {
    const refused = [
      [{ record: '1' }, true],
      [{ tailRecords: '1' }, true],
      [{ record: '1', tailRecords: '1' }, false],
      [{ maxRecords: '1' }, false],
      [{ recordView: 'envelope' }, false],
      [{ record: '1', recordView: 'json' }, false],
      [{ record: '1', maxRecords: '0' }, false],
      [{ record: '-1' }, false],
      [{ record: '1.5' }, false],
      [{ record: '007' }, false],
      [{ tailRecords: 'now' }, false],
      [{ record: '99999999999999999999' }, false],
    ] as const;
    for (const [params, offset] of refused) expect(parse(params, offset), JSON.stringify(params)).toMatchObject({ ok: false, error: { code: 'INVALID_QUERY' } });
  });
});
