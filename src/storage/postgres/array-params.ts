/**
 * Array parameters in PostgreSQL's text form, for the element types rill binds: numbers,
 * strings, null and bytes. Batches send their rows as arrays (writes.ts), one element
 * per column of each row. pg makes the same text, but it turns every element into a
 * string and quotes and escapes it with two regular expressions, numbers included: for a
 * producer append on PostgreSQL that was about 34,000 of its 288,000 instructions on the
 * event loop (callgrind, 50 appends in flight). An array holding anything else (booleans,
 * dates, nested arrays, objects) is left to pg, which knows how to send it.
 */

/** Backslash and double quote are escaped inside a quoted element; nothing else is. */
const NEEDS_ESCAPE = /[\\"]/;
const ESCAPED = /[\\"]/g;

/** A quoted element: any text, `NULL`, braces, commas and spaces included, stays text. */
function quoted(text: string): string {
  return `"${NEEDS_ESCAPE.test(text) ? text.replace(ESCAPED, '\\$&') : text}"`;
}

/**
 * The array literal of `values` (numbers unquoted, strings quoted, null and undefined as
 * NULL, Buffers as bytea's hex form, escaped), or `values` itself when an element is of
 * another type.
 */
export function arrayParam(values: readonly unknown[]): string | readonly unknown[] {
  let text = '{';
  for (let i = 0; i < values.length; i++) {
    if (i > 0) text += ',';
    const value = values[i];
    if (value === null || value === undefined) text += 'NULL';
    else if (typeof value === 'number') text += String(value);
    else if (typeof value === 'string') text += quoted(value);
    // `\x` and the hex digits; unquoted, the backslash itself is escaped.
    else if (Buffer.isBuffer(value)) text += `\\\\x${value.toString('hex')}`;
    else return values;
  }
  return `${text}}`;
}

/** A statement's parameters, its arrays in text form (arrayParam). */
export function withArrayParams(values: readonly unknown[]): unknown[] {
  return values.map((value) => (Array.isArray(value) ? arrayParam(value) : value));
}
