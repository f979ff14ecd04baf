/**
 * The order of strings as their UTF-8 bytes: SQLite's BINARY collation and PostgreSQL's
 * "C" order names, paths and keys this way, so every engine lists and locks alike.
 */

/**
 * Compares `a` and `b` as their UTF-8 bytes compare (a lone surrogate encoded as U+FFFD,
 * as Buffer, pg and better-sqlite3 encode it). Outside the surrogates, UTF-16 code units
 * order as code points, and so as UTF-8, do: the first unit that differs decides, with
 * nothing encoded. Where a surrogate differs (U+10000 and beyond, which UTF-16 puts below
 * U+E000-U+FFFF, or a lone one), the strings are encoded and compared.
 */
export function compareUtf8(a: string, b: string): number {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    if (!isSurrogate(x) && !isSurrogate(y)) return x - y;
    return Buffer.compare(Buffer.from(a), Buffer.from(b));
  }
  return a.length - b.length;
}

function isSurrogate(unit: number): boolean {
  return unit >= 0xd800 && unit <= 0xdfff;
}
