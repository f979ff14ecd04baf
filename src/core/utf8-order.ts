/**
 * The order of strings as their UTF-8 bytes: SQLite's BINARY collation and PostgreSQL's
 * "C" order names, paths and keys this way, so every engine lists and locks alike.
 */

/**
 * Compares `a` and `b` as their UTF-8 bytes would compare, without encoding them. UTF-8
 * bytes order as code points do. UTF-16 code units order as code points do too, except
 * that the surrogates of U+10000 and beyond (0xD800-0xDFFF) sort below U+E000-U+FFFF;
 * at the first unit that differs, both are moved so that surrogates sort above.
 */
export function compareUtf8(a: string, b: string): number {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    if (x < 0xd800 || y < 0xd800) return x - y;
    return codePointRank(x) - codePointRank(y);
  }
  return a.length - b.length;
}

/** A code unit at or above 0xD800 placed where its code point sorts: surrogates above U+FFFF. */
function codePointRank(unit: number): number {
  return unit < 0xe000 ? unit + 0x2000 : unit - 0x800;
}
