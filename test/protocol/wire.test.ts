/**
 * The wire vocabulary's pure pieces: offsets, content types, JSON framing, read windows
 * and cursors. Properties run with fast-check; examples pin what users rely on.
 */
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { nextCursor, CURSOR_EPOCH_MS, CURSOR_INTERVAL_MS } from '../../src/core/cursor.js';
import { usableLength, utf8SafeLength, windowEnd } from '../../src/core/window.js';
import { contentTypesMatch, isJsonContentType, isTextualContentType, normalizeContentType } from '../../src/protocol/content-type.js';
import { frameJsonBody, JsonFramer, MAX_JSON_DEPTH, ndjsonToArray, splitStoredJson, type JsonFrameResult } from '../../src/protocol/json.js';
import { encodeOffset, parseOffsetToken } from '../../src/protocol/offset.js';
import { parseCanonicalUint, repeatedHeaderError } from '../../src/protocol/parse.js';
import { testSeed } from '../helpers/seed.js';

describe('offsets', () => {
  test('encode as 20 digits whose bytewise order is numeric order', () => {
    fc.assert(
      fc.property(fc.nat({ max: Number.MAX_SAFE_INTEGER }), fc.nat({ max: Number.MAX_SAFE_INTEGER }), (a, b) => {
        const [x, y] = [encodeOffset(a), encodeOffset(b)];
        expect(x).toHaveLength(20);
        expect(x < y).toBe(a < b);
        expect(parseOffsetToken(x)).toEqual({ kind: 'at', position: a });
      }),
      { seed: testSeed() },
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

  test('match: a charset of UTF-8 (any case, quoted or not) is no charset; other parameters in any order, values exact', () => {
    const match = (a: string, b: string) => contentTypesMatch(normalizeContentType(a)!, normalizeContentType(b)!);
    for (const [a, b] of [
      ['application/json; charset=utf-8', 'application/json'],
      ['text/plain;charset=UTF-8', 'text/plain'],
      ['text/plain; charset="UTF-8"', 'text/plain; charset=utf-8'],
      ['text/csv; header=present; charset=utf-8', 'text/csv; header=present'],
      ['text/plain; a=1; b=2', 'text/plain; b=2; a=1'],
      ['text/plain; a="x y"', 'text/plain; a="x y"'],
      ['text/plain; a="1"', 'text/plain; a=1'],
      ['text/plain; charset=ISO-8859-1', 'text/plain; charset=iso-8859-1'],
    ]) {
      expect(match(a!, b!), `${a} ~ ${b}`).toBe(true);
      expect(match(b!, a!), `${b} ~ ${a}`).toBe(true);
    }
    for (const [a, b] of [
      ['text/plain; charset=iso-8859-1', 'text/plain'],
      ['text/plain; charset=utf-16', 'text/plain; charset=utf-8'],
      ['text/plain; charset=utf8', 'text/plain'],
      ['text/plain; a=1', 'text/plain'],
      ['text/plain; a=X', 'text/plain; a=x'],
      ['text/html; charset=utf-8', 'text/plain'],
    ]) {
      expect(match(a!, b!), `${a} !~ ${b}`).toBe(false);
      expect(match(b!, a!), `${b} !~ ${a}`).toBe(false);
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


describe('JSON framing', () => {
  const MANY = 1_000_000;
  const frameText = (text: string, flatten = true) => frameJsonBody(Buffer.from(text), flatten, MANY);
  const dataOf = (result: JsonFrameResult) => (result.ok ? result.data.toString() : result.reason);
  /** Frames `body` in slices of `sliceBytes`, as the server does for large bodies. */
  const frameSliced = (body: Buffer, flatten: boolean, sliceBytes: number, maxMessages = MANY) => {
    const framer = new JsonFramer(body, flatten, maxMessages);
    while (!framer.step(sliceBytes));
    return framer.result();
  };

  test('flattens exactly one level and keeps every token as written', () => {
    const framed = frameText('[ {"b": 1.50e3, "a" : [1, 2]} , 12345678901234567890, "x\\n y", [[3]] ]');
    expect(dataOf(framed)).toBe('{"b":1.50e3,"a":[1,2]}\n12345678901234567890\n"x\\n y"\n[[3]]\n');
    expect(framed.ok && framed.messageCount).toBe(4);
    expect(dataOf(frameText(' {"k" : "v w"} '))).toBe('{"k":"v w"}\n');
    expect(dataOf(frameText('[1, [2]]', false))).toBe('[1,[2]]\n');
  });

  test('refuses invalid JSON, invalid UTF-8 and (when flattening) empty arrays', () => {
    for (const bad of ['{ invalid }', '[1]  x', '[1,]', '{"a":1,}', '01', '1.', '-', '.5', '1e', '"\\x"', '"a\tb"', '[1 2]', '{"a" 1}', 'tru', 'nul', '[}', '']) {
      expect(frameText(bad), bad).toMatchObject({ ok: false, reason: 'invalid' });
    }
    expect(frameJsonBody(Buffer.from([0x22, 0xff, 0x22]), true, MANY)).toMatchObject({ ok: false, reason: 'invalid' });
    expect(frameText('[ ]')).toMatchObject({ ok: false, reason: 'empty-array' });
    expect(dataOf(frameText('[ ]', false))).toBe('[]\n');
  });

  test('a flattened array may carry at most maxMessages elements; nesting is bounded', () => {
    expect(frameJsonBody(Buffer.from('[1,2,3]'), true, 3).ok).toBe(true);
    expect(frameJsonBody(Buffer.from('[1,2,3,4]'), true, 3)).toMatchObject({ ok: false, reason: 'too-many-messages' });
    expect(frameJsonBody(Buffer.from('[[1,2,3,4]]'), true, 3).ok).toBe(true);
    const deep = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
    expect(frameText(deep(MAX_JSON_DEPTH), false).ok).toBe(true);
    expect(frameText(deep(MAX_JSON_DEPTH + 1), false)).toMatchObject({ ok: false, reason: 'too-deep' });
  });

  test('accepts exactly what JSON.parse accepts (up to the depth bound), whole or in any slices', () => {
    const jsonish = fc.oneof(
      fc.jsonValue().map((v) => JSON.stringify(v, null, 1)),
      fc.jsonValue().map((v) => JSON.stringify(v)).chain((t) => fc.nat({ max: Math.max(0, t.length - 1) }).map((cut) => t.slice(0, cut) + t.slice(cut + 1))),
      fc.string({ unit: fc.constantFrom(...'[]{}",:0123456789-+.eEtrufalsn \\\n'.split('')), maxLength: 24 }),
      fc.string({ unit: 'binary', maxLength: 12 }).map((t) => JSON.stringify(t)),
    );
    fc.assert(
      fc.property(jsonish, fc.boolean(), fc.integer({ min: 1, max: 7 }), (text, flatten, sliceBytes) => {
        let parsed: unknown;
        let valid = true;
        try {
          parsed = JSON.parse(text);
        } catch {
          valid = false;
        }
        const body = Buffer.from(text);
        const whole = frameJsonBody(body, flatten, MANY);
        expect(frameSliced(body, flatten, sliceBytes)).toEqual(whole);
        if (!valid) {
          expect(whole.ok, text).toBe(false);
          return;
        }
        if (flatten && Array.isArray(parsed) && parsed.length === 0) {
          expect(whole).toMatchObject({ reason: 'empty-array' });
          return;
        }
        if (!whole.ok) throw new Error(`valid JSON refused: ${text}`);
        const messages = splitStoredJson(whole.data).map((m) => JSON.parse(m.toString()));
        expect(messages).toEqual(flatten && Array.isArray(parsed) ? parsed : [parsed]);
        expect(whole.messageCount).toBe(messages.length);
      }),
      { seed: testSeed(), numRuns: 3000 },
    );
  });

  test('accepts exactly the well-formed UTF-8 in strings that a fatal TextDecoder accepts, whole or in any slices', () => {
    const decoder = new TextDecoder('utf-8', { fatal: true });
    // The bytes at UTF-8's edges (overlong leads, the surrogate and U+10FFFF limits, the
    // ranges of second bytes), so that sequences near every rule come up often.
    const edges = [0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xec, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xff];
    const interesting = fc.oneof(fc.constantFrom(...edges), fc.integer({ min: 0x20, max: 0xff }));
    fc.assert(
      fc.property(fc.array(interesting, { maxLength: 8 }), fc.integer({ min: 1, max: 5 }), (content, sliceBytes) => {
        const inside = Buffer.from(content.filter((b) => b !== 0x22 && b !== 0x5c));
        const body = Buffer.concat([Buffer.from('["'), inside, Buffer.from('"]')]);
        let wellFormed = true;
        try {
          decoder.decode(inside);
        } catch {
          wellFormed = false;
        }
        const whole = frameJsonBody(body, true, MANY);
        expect(whole.ok).toBe(wellFormed);
        expect(frameSliced(body, true, sliceBytes)).toEqual(whole);
        if (whole.ok) expect(whole.data).toEqual(Buffer.concat([Buffer.from('"'), inside, Buffer.from('"\n')]));
      }),
      { seed: testSeed(), numRuns: 5000 },
    );
  });

  test('any JSON array round-trips through storage to the same values', () => {
    fc.assert(
      fc.property(fc.array(fc.jsonValue(), { minLength: 1, maxLength: 20 }), (values) => {
        const pretty = JSON.stringify(values, null, 2);
        const framed = frameText(pretty);
        if (!framed.ok) throw new Error('valid JSON refused');
        const stored = framed.data;
        expect(splitStoredJson(stored)).toHaveLength(values.length);
        expect(JSON.parse(ndjsonToArray(stored).toString())).toEqual(JSON.parse(JSON.stringify(values)));
        expect(stored.includes(Buffer.from('\n\n'))).toBe(false);
      }),
      { seed: testSeed() },
    );
  });
});

describe('read windows', () => {
  test('a window ends at its limit or at the tail, whichever comes first', () => {
    expect(windowEnd(100, 10, 50)).toBe(60);
    expect(windowEnd(100, 60, 50)).toBe(100);
    expect(windowEnd(100, 100, 50)).toBe(100);
  });

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
      { seed: testSeed() },
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
      { seed: testSeed() },
    );
  });
});

describe('header values', () => {
  const CANONICAL = /^(0|[1-9][0-9]*)$/;

  test('an unsigned integer is 0 or digits without a leading zero, at most 16 of them, up to the bound', () => {
    const digits = fc.stringMatching(/^[0-9]{0,18}$/);
    const anything = fc.string({ maxLength: 18 });
    fc.assert(
      fc.property(fc.oneof(digits, anything), fc.constantFrom(Number.MAX_SAFE_INTEGER, 1000, 0), (raw, max) => {
        const value = Number(raw);
        const expected = CANONICAL.test(raw) && raw.length <= 16 && Number.isSafeInteger(value) && value <= max ? value : undefined;
        expect(parseCanonicalUint(raw, max)).toBe(expected);
      }),
      { seed: testSeed() },
    );
    for (const [raw, value] of [['0', 0], ['9007199254740991', 2 ** 53 - 1], ['9007199254740992', undefined], ['9999999999999999', undefined], ['00', undefined], ['+1', undefined], ['1e3', undefined], [' 1', undefined]] as const) {
      expect(parseCanonicalUint(raw, Number.MAX_SAFE_INTEGER), raw).toBe(value);
    }
  });

  test('a repeated single-valued header is refused in any case; the count of distinct names answers the same', () => {
    const distinct = (raw: string[]) => new Set(raw.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase())).size;
    const cases = [
      ['Host', 'h', 'Producer-Id', 'a'],
      ['Host', 'h', 'Producer-Id', 'a', 'producer-id', 'b'],
      ['Accept', 'x', 'accept', 'y', 'Producer-Seq', '1'],
      ['Content-Type', 'text/plain', 'CONTENT-TYPE', 'text/plain'],
      [],
    ];
    for (const raw of cases) expect(repeatedHeaderError(raw, distinct(raw))).toEqual(repeatedHeaderError(raw));
    expect(repeatedHeaderError(cases[1]!, distinct(cases[1]!))?.code).toBe('INVALID_HEADER');
    expect(repeatedHeaderError(cases[2]!, distinct(cases[2]!))).toBeNull();
  });
});
