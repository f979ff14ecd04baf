/**
 * docs/errors.md stays true to `ERROR_STATUS`, the one table of codes and statuses.
 *
 * The document lists each code as a table row whose first cell is the code in backticks,
 * under a `## NNN ...` heading naming its status. So:
 *
 *   - every code of ERROR_STATUS has exactly one row, under the heading of its status
 *     (a new code without documentation fails here);
 *   - every row names a code of ERROR_STATUS, under a status heading;
 *   - every code-looking span in backticks (SCREAMING_SNAKE, or one capitalized word that is
 *     not an HTTP method) is a code of ERROR_STATUS, a code the client makes itself
 *     (CLIENT_ERROR_CODES), or a Durable Streams name the subscription routes nest
 *     (PROTOCOL_CODE in src/http/subscriptions.ts), or one of the tables named above;
 *   - the headers a row says carry facts are ones ERROR_FIELD_HEADERS renders, or
 *     `Allow` and `WWW-Authenticate`, which go with 405 and 401.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLIENT_ERROR_CODES } from '../../src/client/errors.js';
import { ERROR_FIELD_HEADERS } from '../../src/protocol/error-headers.js';
import { ERROR_STATUS } from '../../src/protocol/errors.js';

const ROOT = resolve(import.meta.dirname, '../..');
const DOC = 'docs/errors.md';
const TEXT = readFileSync(join(ROOT, DOC), 'utf8').replace(/^```[\s\S]*?^```/gm, '');

interface Row {
  code: string;
  /** The status of the heading the row is under; null under a heading without one. */
  status: number | null;
  line: number;
  headers: string;
}

const ROWS: Row[] = [];
{
  let status: number | null = null;
  TEXT.split('\n').forEach((line, i) => {
    if (line.startsWith('## ')) {
      const m = /^## (\d{3})\b/.exec(line);
      status = m ? Number(m[1]) : null;
      return;
    }
    const row = /^\|\s*`([^`]+)`[^|]*\|/.exec(line);
    if (row) ROWS.push({ code: row[1]!, status, line: i + 1, headers: line.split('|')[3] ?? '' });
  });
}

const CODES = Object.keys(ERROR_STATUS) as (keyof typeof ERROR_STATUS)[];
const PROTOCOL_NAMES = new Set(
  [...readFileSync(join(ROOT, 'src/http/subscriptions.ts'), 'utf8').matchAll(/^\s+[A-Z_]+: '([A-Z_]+)',$/gm)].map((m) => m[1]!),
);
/** The tables the document points to are named in backticks too. */
const TABLES = new Set(
  ['src/protocol/errors.ts', 'src/protocol/error-headers.ts'].flatMap((path) =>
    [...readFileSync(join(ROOT, path), 'utf8').matchAll(/^export const ([A-Z_]+)\b/gm)].map((m) => m[1]!),
  ),
);
const HTTP_METHODS = new Set(['GET', 'HEAD', 'PUT', 'POST', 'DELETE', 'PATCH', 'OPTIONS']);
const codeLooking = (span: string) => /^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$/.test(span) || (/^[A-Z]{3,}$/.test(span) && !HTTP_METHODS.has(span));

describe(DOC, () => {
  it('has a row per code of ERROR_STATUS, under the heading of its status', () => {
    expect(ROWS.length).toBeGreaterThan(0);
    const problems: string[] = [];
    for (const code of CODES) {
      const rows = ROWS.filter((r) => r.code === code);
      if (rows.length === 0) problems.push(`${code} (${ERROR_STATUS[code]}) is not documented`);
      else if (rows.length > 1) problems.push(`${code} has ${rows.length} rows (lines ${rows.map((r) => r.line).join(', ')})`);
      else if (rows[0]!.status !== ERROR_STATUS[code]) {
        problems.push(`${code} is under ${rows[0]!.status ?? 'a heading without a status'} (line ${rows[0]!.line}), its status is ${ERROR_STATUS[code]}`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('lists as codes only codes of ERROR_STATUS', () => {
    const unknown = ROWS.filter((r) => !Object.prototype.hasOwnProperty.call(ERROR_STATUS, r.code)).map((r) => `${r.code} (line ${r.line})`);
    expect(unknown).toEqual([]);
  });

  it('names in backticks no code that does not exist', () => {
    const known = new Set<string>([...CODES, ...CLIENT_ERROR_CODES, ...PROTOCOL_NAMES, ...TABLES]);
    const spans = [...TEXT.matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!).filter(codeLooking);
    expect(spans.length).toBeGreaterThan(CODES.length);
    expect([...new Set(spans.filter((s) => !known.has(s)))]).toEqual([]);
  });

  it('says facts travel only in headers rill sends with a refusal', () => {
    const sent = new Set([...Object.values(ERROR_FIELD_HEADERS).map((c) => c.header.toLowerCase()), 'allow', 'www-authenticate']);
    const named = ROWS.flatMap((r) => [...r.headers.matchAll(/`([A-Z][A-Za-z-]*)(?::[^`]*)?`/g)].map((m) => m[1]!));
    expect(named.length).toBeGreaterThan(0);
    expect([...new Set(named.filter((h) => !sent.has(h.toLowerCase())))]).toEqual([]);
  });

  it('client-only codes never collide with a code the server sends', () => {
    expect(CLIENT_ERROR_CODES.filter((c) => Object.prototype.hasOwnProperty.call(ERROR_STATUS, c))).toEqual([]);
  });
});
