/**
 * The stored form of a stream state (storage/stream-columns.ts): sameBesideTails, the
 * SQLite engine's quick test of whether an update writes any column, and sameBesideAppend,
 * PostgreSQL's test of whether its narrow update of an append will do, must agree with
 * comparing the stored values streamColumnValues gives, for a change to any field of a
 * state, fields added to StreamState later included (they are found by walking a state).
 */
import { describe, expect, it } from 'vitest';
import type { StreamState } from '../../src/core/types.js';
import { asStored } from '../../src/storage/postgres/known-rows.js';
import { RECORD_NEXT_COLUMN, sameBesideAppend, sameBesideTails, STREAM_ROW_COLUMNS, STREAM_VALUE_COLUMNS, streamColumnValues, streamRowOfValues, TAIL_COLUMN } from '../../src/storage/stream-columns.js';

const base: StreamState = {
  id: 3,
  name: 'b/bk/s',
  bucket: 'bk',
  incarnation: 'inc',
  config: { contentType: 'text/plain', ttlSeconds: 60, expiresAtMs: 5_000_000, retention: { maxBytes: 100, maxMessages: null, maxAgeMs: 60_000 } },
  createdAtMs: 1_700_000_000_000,
  lastAccessMs: 1_700_000_000_500,
  tail: 100,
  closed: false,
  lastStreamSeq: 'a',
  epochFloor: 2,
  fork: { sourceId: 1, offset: 10, subOffset: 0 },
  earliestOffset: 0,
  deleted: false,
  forkRefs: 0,
  attrs: '{"a":1}',
  snapshot: { offset: 10, contentType: 'application/json', digest: 'd' },
  recordFirst: 0,
  recordNext: 4,
  timeMarks: [{ offset: 50, record: 2, atMs: 1_700_000_000_100 }],
  ageDueMs: 1_700_000_060_101,
};

/** The state with the leaf at `path` changed (a number moved, a string extended, a flag flipped, a null set). */
function changedAt(state: StreamState, path: string[]): StreamState {
  const copy = structuredClone(state) as unknown as Record<string, unknown>;
  let holder = copy;
  for (const key of path.slice(0, -1)) holder = holder[key] as Record<string, unknown>;
  const key = path.at(-1)!;
  const value = holder[key];
  // A null becomes what the full state holds there (a fork link, a snapshot), or a number.
  const full = path.reduce<unknown>((at, k) => (at as Record<string, unknown> | null)?.[k], base);
  const set = full !== null && typeof full === 'object' ? structuredClone(full) : 7;
  holder[key] = typeof value === 'number' ? value + 1 : typeof value === 'string' ? `${value}x` : typeof value === 'boolean' ? !value : set;
  return copy as unknown as StreamState;
}

/** Every path to a leaf of the state (a nested object is walked, null is a leaf). */
function leaves(value: unknown, path: string[] = []): string[][] {
  if (value === null || typeof value !== 'object') return [path];
  return Object.entries(value).flatMap(([key, inner]) => leaves(inner, [...path, key]));
}

/** Whether the stored values of a and b are equal but in the columns given. */
function columnsEqualBeside(a: StreamState, b: StreamState, columns: readonly number[]): boolean {
  const [x, y] = [streamColumnValues(a), streamColumnValues(b)];
  return x.every((v, i) => columns.includes(i) || v === y[i]);
}

const TAILS = [TAIL_COLUMN, RECORD_NEXT_COLUMN];
/** What an append may change: the tails, the last access and the expiry that follows from it. */
const APPENDED = [...TAILS, ...(['last_access_ms', 'expiry_ms'] as const).map((c) => STREAM_VALUE_COLUMNS.indexOf(c))];

/** The base state and its forms without nested objects, TTL or time marks. */
function variants(): StreamState[] {
  const all: StreamState[] = [base, { ...base, fork: null, snapshot: null, bucket: null, lastStreamSeq: null, epochFloor: null, attrs: null }];
  all.push({ ...base, config: { contentType: 'text/plain', ttlSeconds: null, expiresAtMs: null } });
  // Without time marks (a stream under no age limit): the fields are absent.
  const { timeMarks: _marks, ageDueMs: _due, ...unmarked } = base;
  all.push(unmarked);
  return all;
}

describe('sameBesideTails and sameBesideAppend', () => {
  it('agree with the stored values for a change to any one field, nested ones and nulls included', () => {
    for (const state of variants()) {
      expect(sameBesideTails(state, structuredClone(state))).toBe(true);
      expect(sameBesideAppend(state, structuredClone(state))).toBe(true);
      for (const path of leaves(state)) {
        if (path[0] === 'id') continue;
        const changed = changedAt(state, path);
        expect(sameBesideTails(changed, state), path.join('.')).toBe(columnsEqualBeside(changed, state, TAILS));
        expect(sameBesideTails(state, changed), path.join('.')).toBe(columnsEqualBeside(state, changed, TAILS));
        expect(sameBesideAppend(changed, state), path.join('.')).toBe(columnsEqualBeside(changed, state, APPENDED));
        expect(sameBesideAppend(state, changed), path.join('.')).toBe(columnsEqualBeside(state, changed, APPENDED));
      }
    }
  });

  it('a state that differs from a loaded one only where an append writes is as a load gives it back (PostgreSQL keeps it unconverted)', () => {
    for (const state of variants()) {
      const stored = asStored(state);
      const appended = { ...stored, tail: stored.tail + 5, recordNext: stored.recordNext + 1, lastAccessMs: stored.lastAccessMs + 1000 };
      expect(sameBesideAppend(appended, stored)).toBe(true);
      expect(asStored(appended)).toStrictEqual(appended);
    }
  });

  it('a change of the tails alone keeps every other column', () => {
    expect(sameBesideTails({ ...base, tail: 200, recordNext: 9 }, base)).toBe(true);
    expect(sameBesideTails({ ...base, closed: true }, base)).toBe(false);
  });
});

describe('a raw stream row (SQLite reads a stream by name or id as its values)', () => {
  it('takes each field from its own column of STREAM_ROW_COLUMNS', () => {
    // Each column's value is its own name: a field read from another column's place shows.
    const row = streamRowOfValues(STREAM_ROW_COLUMNS.map((column) => column)) as unknown as Record<string, unknown>;
    for (const [field, value] of Object.entries(row)) expect([field, value]).toEqual([field, field]);
    // Every column but expiry_ms (stored, derived from the config) is a field of the row.
    expect(Object.keys(row).sort()).toEqual(STREAM_ROW_COLUMNS.filter((column) => column !== 'expiry_ms').sort());
  });
});
