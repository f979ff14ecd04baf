/**
 * The wire vocabulary's pure pieces: offsets, content types, JSON framing, read windows
 * and cursors. Properties run with fast-check; examples pin what users rely on.
 */
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { nextCursor, CURSOR_EPOCH_MS, CURSOR_INTERVAL_MS } from '../../src/core/cursor.js';
import { usableLength, utf8SafeLength } from '../../src/core/window.js';
import { isJsonContentType, isTextualContentType, normalizeContentType } from '../../src/protocol/content-type.js';
import { frameJsonBody, ndjsonToArray, splitStoredJson } from '../../src/protocol/json.js';
import { encodeOffset, parseOffsetToken } from '../../src/protocol/offset.js';

describe('offsets', () => {
  test('encode as 20 digits whose bytewise order is numeric order', () => {
    fc.assert(
      fc.property(fc.nat({ max: Number.MAX_SAFE_INTEGER }), fc.nat({ max: Number.MAX_SAFE_INTEGER }), (a, b) => {
        const [x, y] = [encodeOffset(a), encodeOffset(b)];
        expect(x).toHaveLength(20);
        expect(x < y).toBe(a < b);
        expect(parseOffsetToken(x)).toEqual({ kind: 'at', position: a });
      }),
    );
  });

  test('sentinels, the reference form, and malformed tokens', () => {
    expect(parseOffsetToken('-1')).toEqual({ kind: 'start' });
    expect(parseOffsetToken('now')).toEqual({ kind: 'now' });
    expect(parseOffsetToken('0000000000000000_0000000000000042')).toEqual({ kind: 'at', position: 42 });
    expect(parseOffsetToken('0000000000000001_0000000000000000')).toEqual({ kind: 'at', position: Number.MAX_SAFE_INTEGER });
    for (const bad of ['', '42', '-2', 'NOW', '0,1', '0 1', '../x', '00000000000000000001\n', `${'9'.repeat(21)}`]) {
      expect(parseOffsetToken(bad), bad).toBeUndefined();
    }
  });
});

describe('content types', () => {
  test('fold case of type and parameter names, keep parameters and their values', () => {
    expect(normalizeContentType('TEXT/Plain')).toBe('text/plain');
    expect(normalizeContentType('application/json ;  Charset=utf-8')).toBe('application/json; charset=utf-8');
    expect(normalizeContentType('application/json; charset=UTF-8')).not.toBe(normalizeContentType('application/json; charset=utf-8'));
    expect(normalizeContentType('application/json; charset=utf-8')).not.toBe(normalizeContentType('application/json'));
    for (const bad of ['', 'text', '/plain', 'text/', 'te xt/plain', 'text/plain; =x', 'text/plain; a']) {
      expect(normalizeContentType(bad), bad).toBeUndefined();
    }
  });

  test('repeated values, valid or not, get the same answer, also after many distinct ones', () => {
    const values = ['Text/Plain; A=1', 'not a type', 'application/json;charset=utf-8', ''];
    const first = values.map((v) => normalizeContentType(v));
    expect(first).toEqual(['text/plain; a=1', undefined, 'application/json; charset=utf-8', undefined]);
    // More distinct values than normal forms are remembered: each is still answered right.
    for (let i = 0; i < 1000; i++) expect(normalizeContentType(`x-${i}/Y-${i}`)).toBe(`x-${i}/y-${i}`);
    expect(values.map((v) => normalizeContentType(v))).toEqual(first);
    expect(values.map((v) => normalizeContentType(v))).toEqual(first);
  });

  test('JSON mode and textual SSE are decided on the media type', () => {
    expect(isJsonContentType('application/json; charset=utf-8')).toBe(true);
    expect(isJsonContentType('application/ld+json')).toBe(false);
    expect(isTextualContentType('text/csv')).toBe(true);
    expect(isTextualContentType('application/ld+json')).toBe(true);
    expect(isTextualContentType('application/octet-stream')).toBe(false);
    expect(isTextualContentType('image/png')).toBe(false);
  });
});

const texts = (messages: Buffer[]) => messages.map((m) => m.toString());

describe('JSON framing', () => {
  test('flattens exactly one level and keeps every token as written', () => {
    const framed = frameJsonBody(Buffer.from('[ {"b": 1.50e3, "a" : [1, 2]} , 12345678901234567890, "x\\n y", [[3]] ]'), true);
    expect(framed.ok && texts(framed.messages)).toEqual(['{"b":1.50e3,"a":[1,2]}\n', '12345678901234567890\n', '"x\\n y"\n', '[[3]]\n']);
    const single = frameJsonBody(Buffer.from(' {"k" : "v w"} '), true);
    expect(single.ok && texts(single.messages)).toEqual(['{"k":"v w"}\n']);
  });

  test('refuses invalid JSON, invalid UTF-8 and (when flattening) empty arrays', () => {
    expect(frameJsonBody(Buffer.from('{ invalid }'), true)).toEqual({ ok: false, reason: 'invalid' });
    expect(frameJsonBody(Buffer.from([0x22, 0xff, 0x22]), true)).toEqual({ ok: false, reason: 'invalid' });
    expect(frameJsonBody(Buffer.from('[ ]'), true)).toEqual({ ok: false, reason: 'empty-array' });
    expect(frameJsonBody(Buffer.from('[1]  x'), true)).toEqual({ ok: false, reason: 'invalid' });
  });

  test('any JSON array round-trips through storage to the same values', () => {
    fc.assert(
      fc.property(fc.array(fc.jsonValue(), { minLength: 1, maxLength: 20 }), (values) => {
        const pretty = JSON.stringify(values, null, 2);
        const framed = frameJsonBody(Buffer.from(pretty), true);
        if (!framed.ok) throw new Error('valid JSON refused');
        const stored = Buffer.concat(framed.messages);
        expect(splitStoredJson(stored)).toHaveLength(values.length);
        expect(JSON.parse(ndjsonToArray(stored).toString())).toEqual(JSON.parse(JSON.stringify(values)));
        expect(stored.includes(Buffer.from('\n\n'))).toBe(false);
      }),
    );
  });
});

describe('read windows', () => {
  test('JSON windows end after a whole message unless they reach the tail', () => {
    const bytes = Buffer.from('{"a":1}\n{"b":2}\n{"c"');
    expect(usableLength(bytes, true, false)).toBe(16);
    expect(usableLength(bytes.subarray(0, 5), true, false)).toBe(0);
    expect(usableLength(bytes, false, false)).toBe(bytes.length);
  });

  test('text windows never split a UTF-8 character', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 40 }), fc.nat(), (text, cut) => {
        const bytes = Buffer.from(text);
        const prefix = bytes.subarray(0, cut % (bytes.length + 1));
        const safe = prefix.subarray(0, utf8SafeLength(prefix));
        expect(() => new TextDecoder('utf-8', { fatal: true }).decode(safe)).not.toThrow();
        expect(prefix.length - safe.length).toBeLessThan(4);
      }),
    );
  });
});

describe('cursors', () => {
  test('are the interval number, and strictly greater than any echoed cursor at or ahead of it', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10 ** 12 }), fc.integer({ min: -5, max: 5 }), fc.double({ min: 0, max: 0.999999, noNaN: true }), (elapsedMs, ahead, random) => {
        const now = CURSOR_EPOCH_MS + elapsedMs;
        const current = Math.floor(elapsedMs / CURSOR_INTERVAL_MS);
        expect(nextCursor(now, null, random)).toBe(String(current));
        const echoed = Math.max(0, current + ahead);
        const next = Number(nextCursor(now, String(echoed), random));
        if (echoed >= current) expect(next).toBeGreaterThan(echoed);
        else expect(next).toBe(current);
      }),
    );
  });
});
