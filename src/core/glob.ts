/**
 * Subscription patterns: globs over `/`-separated stream paths. A segment `*` matches
 * exactly one segment, `**` zero or more; every other segment matches itself.
 */

/** Bounds the matcher's backtracking: each `**` can multiply the work by the path's length. */
export const MAX_DOUBLE_STARS = 4;

export type PatternCheck = { ok: true } | { ok: false; reason: string };

export function checkPattern(pattern: string, maxBytes: number, maxSegments: number): PatternCheck {
  if (pattern.length === 0) return { ok: false, reason: 'the pattern is empty' };
  // TextEncoder rather than Buffer: the console's pages match patterns with this module too.
  if (new TextEncoder().encode(pattern).length > maxBytes) return { ok: false, reason: `the pattern is longer than ${maxBytes} bytes` };
  const segments = pattern.split('/');
  if (segments.length > maxSegments) return { ok: false, reason: `the pattern has more than ${maxSegments} segments` };
  if (segments.some((s) => s.length === 0)) return { ok: false, reason: 'the pattern has an empty segment' };
  if (segments.some((s) => s !== '*' && s !== '**' && s.includes('*'))) {
    return { ok: false, reason: '"*" and "**" must be whole segments' };
  }
  if (segments.filter((s) => s === '**').length > MAX_DOUBLE_STARS) return { ok: false, reason: `the pattern has more than ${MAX_DOUBLE_STARS} "**"` };
  return { ok: true };
}

export function globMatch(pattern: string, path: string): boolean {
  return matchFrom(pattern.split('/'), 0, path.split('/'), 0);
}

function matchFrom(pattern: string[], p: number, path: string[], s: number): boolean {
  while (p < pattern.length) {
    const segment = pattern[p]!;
    if (segment === '**') {
      for (let skip = s; skip <= path.length; skip++) if (matchFrom(pattern, p + 1, path, skip)) return true;
      return false;
    }
    if (s >= path.length || (segment !== '*' && segment !== path[s])) return false;
    p++;
    s++;
  }
  return s === path.length;
}

/**
 * A prefix every matching path starts with (the segments before the first wildcard), so a
 * store scans only candidate streams. No trailing `/`: `a/**` also matches `a` itself.
 */
export function literalPrefix(pattern: string): string {
  const literal: string[] = [];
  for (const segment of pattern.split('/')) {
    if (segment === '*' || segment === '**') break;
    literal.push(segment);
  }
  return literal.join('/');
}
