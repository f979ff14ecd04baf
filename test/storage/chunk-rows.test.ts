/**
 * Rows of the chunks index that hold several appends (storage/sqlite/chunk-rows.ts): which
 * appends share a row, reading each append back from its row, and trimming inside a row.
 * Then through a real store: indexed appends of many small writes take far fewer rows
 * than appends, while every append still reads back whole at its own position, before
 * and after a reopen.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_PRODUCER_SETTINGS } from '../../src/core/types.js';
import { v1StreamKey } from '../../src/protocol/ids.js';
import { appendAt, appendsOfRow, chunkRows, MAX_ROW_APPENDS, MAX_ROW_BYTES, rowFrom } from '../../src/storage/sqlite/chunk-rows.js';
import { SqliteStore } from '../../src/storage/sqlite/engine.js';
import { removeDir, tempDataDir } from '../helpers/server.js';
import { appendRequest, createRequest } from './fixtures.js';

const bytes = (text: string) => Buffer.from(text);
const append = (streamId: number, start: number, text: string) => ({ streamId, start, data: bytes(text) });
const shown = (rows: Array<{ start: number; data: Buffer }>) => rows.map((r) => `${r.start}:${r.data.toString()}`);

describe('chunk rows', () => {
  it('joins consecutive appends of one stream, and nothing else', () => {
    const rows = chunkRows([
      append(1, 0, 'aa'),
      append(1, 2, 'b'),
      append(1, 3, 'ccc'),
      append(2, 6, 'x'), // another stream, at the position stream 1 would go on from
      append(2, 7, 'yy'),
      append(2, 10, 'z'), // a gap: not contiguous with the append before it
    ]);
    expect(rows.map((r) => [r.streamId, r.start, r.data.toString()])).toEqual([
      [1, 0, 'aabccc'],
      [2, 6, 'xyy'],
      [2, 10, 'z'],
    ]);
    expect(shown(appendsOfRow(rows[0]!))).toEqual(['0:aa', '2:b', '3:ccc']);
    expect(shown(appendsOfRow(rows[1]!))).toEqual(['6:x', '7:yy']);
    // A row of one append has no bounds, as every row had before rows were shared.
    expect(rows[2]!.bounds).toBeNull();
  });

  it('keeps a row under its byte and append limits; an append larger than a row stays whole', () => {
    const half = MAX_ROW_BYTES / 2;
    const big = chunkRows([
      { streamId: 1, start: 0, data: Buffer.alloc(half) },
      { streamId: 1, start: half, data: Buffer.alloc(half) },
      { streamId: 1, start: 2 * half, data: Buffer.alloc(1) },
      { streamId: 1, start: 2 * half + 1, data: Buffer.alloc(3 * MAX_ROW_BYTES) },
    ]);
    expect(big.map((r) => [r.start, r.data.length])).toEqual([
      [0, MAX_ROW_BYTES],
      [MAX_ROW_BYTES, 1],
      [MAX_ROW_BYTES + 1, 3 * MAX_ROW_BYTES],
    ]);
    const many = chunkRows(Array.from({ length: MAX_ROW_APPENDS + 1 }, (_, i) => append(1, i, 'a')));
    expect(many.map((r) => appendsOfRow(r).length)).toEqual([MAX_ROW_APPENDS, 1]);
  });

  it('finds the append at a position inside a row', () => {
    const [row] = chunkRows([append(1, 10, 'aa'), append(1, 12, ''), append(1, 12, 'bbb'), append(1, 15, 'c')]);
    expect(shown([appendAt(row!, 10)])).toEqual(['10:aa']);
    expect(shown([appendAt(row!, 11)])).toEqual(['10:aa']);
    expect(shown([appendAt(row!, 14)])).toEqual(['12:bbb']);
    expect(shown([appendAt(row!, 15)])).toEqual(['15:c']);
    expect(shown([appendAt(row!, 99)])).toEqual(['15:c']);
  });

  it('trims inside a row: whole appends before the cut go, the one it cuts keeps its tail part', () => {
    const [row] = chunkRows([append(1, 0, 'aa'), append(1, 2, 'bbb'), append(1, 5, 'c')]);
    expect(shown(appendsOfRow(rowFrom(row!, 3)))).toEqual(['3:bb', '5:c']);
    expect(shown(appendsOfRow(rowFrom(row!, 2)))).toEqual(['2:bbb', '5:c']);
    const last = rowFrom(row!, 5);
    expect(shown(appendsOfRow(last))).toEqual(['5:c']);
    expect(last.bounds).toBeNull();
    expect(() => rowFrom(row!, 0)).toThrow(/invariant/);
    expect(() => rowFrom(row!, 6)).toThrow(/invariant/);
  });

  it('refuses a row whose bounds do not cover its bytes (a broken invariant)', () => {
    const bounds = Buffer.alloc(8);
    bounds.writeUInt32LE(2, 0);
    bounds.writeUInt32LE(2, 4);
    expect(() => appendsOfRow({ start: 0, data: bytes('abcde'), bounds })).toThrow(/invariant/);
  });
});

describe('appends sharing rows in a real store', () => {
  const dirs: string[] = [];
  afterEach(() => dirs.splice(0).forEach(removeDir));
  // Sealed every 64 appends and indexed 16 at a time, so that this test indexes often.
  const open = (dataDir: string) =>
    new SqliteStore({ dataDir, producers: DEFAULT_PRODUCER_SETTINGS, recentIndexing: { sealRows: 64, sealBytes: 1 << 20, stepRows: 16 } });

  it('stores many small appends in few rows and reads each one back whole, before and after a reopen', async () => {
    const dataDir = tempDataDir();
    dirs.push(dataDir);
    const names = ['a', 'b', 'c'].map(v1StreamKey);
    const written = new Map<string, string[]>(names.map((n) => [n, []]));
    let store = open(dataDir);
    for (const name of names) await store.run('createStream', createRequest(name));
    // 600 appends, ten at a time spread over three streams: each batch interleaves them.
    for (let round = 0; round < 60; round++) {
      await Promise.all(
        Array.from({ length: 10 }, (_, i) => {
          const name = names[i % 3]!;
          const body = `<${round}.${i}>`;
          written.get(name)!.push(body);
          return store.run('append', { name, request: appendRequest(body) });
        }),
      );
    }
    const check = async (s: SqliteStore) => {
      for (const name of names) {
        const stream = (await s.getStream(name))!;
        const bodies = written.get(name)!;
        expect((await s.readRange(stream, 0, stream.tail)).toString()).toBe(bodies.join(''));
        let at = 0;
        for (const body of bodies) {
          // The append at its start and at its last byte is the whole append.
          expect(await s.chunkAt(stream, at)).toEqual({ start: at, data: bytes(body) });
          expect(await s.chunkAt(stream, at + body.length - 1)).toEqual({ start: at, data: bytes(body) });
          at += body.length;
        }
        // A read from inside the stream hands out whole appends from there on.
        const third = bodies.slice(0, 7).join('').length;
        expect(shown(await s.readChunks(stream, third, 1000)).slice(0, 2)).toEqual([
          `${third}:${bodies[7]}`,
          `${third + bodies[7]!.length}:${bodies[8]}`,
        ]);
      }
    };
    await check(store);
    await store.close();
    const db = new Database(join(dataDir, 'rill.db'), { readonly: true });
    try {
      const { rows, appends } = db
        .prepare<[], { rows: number; appends: number }>('SELECT count(*) AS rows, sum(coalesce(length(bounds) / 4, 1)) AS appends FROM chunks')
        .get()!;
      expect(appends).toBe(600);
      // Each seal of 64 appends holds about 21 per stream: a few rows per stream per seal.
      expect(rows).toBeLessThan(100);
    } finally {
      db.close();
    }
    store = open(dataDir);
    try {
      await check(store);
    } finally {
      await store.close();
    }
  });
});
