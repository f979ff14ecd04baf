import { describe, expect, it } from 'vitest';
import { compareUtf8 } from '../../src/core/utf8-order.js';
import { byBytes } from '../helpers/order.js';
import { seededRandom } from '../helpers/seed.js';

/**
 * Characters at the edges where UTF-16 and UTF-8 orders part: ASCII, 2- and 3-byte forms,
 * U+E000 and above, pairs, and lone surrogates (which encode as U+FFFD, and which two
 * neighbours can pair).
 */
const ALPHABET = ['a', 'b', '/', '\u007f', '\u0080', '\u07ff', '\u0800', '\ud7ff', '\ue000', '\uff21', '\ufffd', '\uffff', '\u{10000}', '\u{1f600}', '\u{10ffff}', '\ud83d', '\ude00', '\udbff'];

describe('compareUtf8', () => {
  it('orders as UTF-8 bytes where UTF-16 code units do not', () => {
    expect(compareUtf8('\u{1f600}', '\uffff')).toBeGreaterThan(0);
    expect('\u{1f600}' < '\uffff').toBe(true);
    expect(compareUtf8('\ue000', '\u{10000}')).toBeLessThan(0);
    expect(compareUtf8('ab', 'a')).toBeGreaterThan(0);
    expect(compareUtf8('a', 'a')).toBe(0);
    // A lone surrogate is stored as U+FFFD: the same bytes.
    expect(compareUtf8('\ud83dA', '\ufffdA')).toBe(0);
  });

  it('agrees in sign with the bytes for random strings of edge characters', () => {
    const rng = seededRandom();
    const word = () => Array.from({ length: rng.int(0, 4) }, () => rng.pick(ALPHABET)).join('');
    for (let i = 0; i < 20_000; i++) {
      const a = word();
      const b = rng.int(0, 3) === 0 ? a + word() : word();
      expect(Math.sign(compareUtf8(a, b)), `${JSON.stringify(a)} vs ${JSON.stringify(b)}`).toBe(byBytes(a, b));
    }
  });

  it('sorts a list as the bytes do', () => {
    const rng = seededRandom();
    const words = Array.from({ length: 500 }, () => Array.from({ length: rng.int(1, 3) }, () => rng.pick(ALPHABET)).join(''));
    expect([...words].sort(compareUtf8)).toEqual([...words].sort(byBytes));
  });
});
