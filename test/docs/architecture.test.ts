/**
 * docs/architecture.md stays true. Every span in backticks is one of:
 *
 *   - a path (it holds a `/` or ends in a file extension): it exists, from the repository root;
 *   - a test title (wrapped in double quotes): it occurs in a file under test/;
 *   - a code name (`name`, `name()`, `Type.member`): `name` occurs as a word in the code of
 *     src/ or test/ (comments left out) or is a table of a schema; for `Type.member`,
 *     `Type` is declared (class, interface, type, function or const) in a file whose
 *     code holds `member`;
 *   - anything else (a command, a flag, a header, a number) is text and is not checked.
 *
 * And the layer table's "may import" column holds for every import in src/, with the
 * "may not" column's checks that a search can make.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const DOC = 'docs/architecture.md';
const SCHEMAS = ['src/storage/sqlite/schema.ts', 'src/storage/postgres/schema.ts'];

function filesUnder(dir: string, extensions: string[]): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) found.push(...filesUnder(path, extensions));
    else if (extensions.some((e) => entry.name.endsWith(e))) found.push(path);
  }
  return found;
}

/** A file's code without its comments (a `//` counts only at a line's start or after a space, so URLs stay). */
function codeOf(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, ' ').replace(/(^|\s)\/\/.*$/gm, '$1');
}

interface Source {
  path: string;
  text: string;
  code: string;
}

/** This file is left out: it holds misspelled names on purpose. */
const SELF = 'test/docs/architecture.test.ts';

const SOURCES: Source[] = [...filesUnder('src', ['.ts']), ...filesUnder('test', ['.ts', '.mjs'])].filter((path) => path !== SELF).map((path) => {
  const text = readFileSync(join(ROOT, path), 'utf8');
  return { path, text, code: codeOf(text) };
});
const TEST_SOURCES = SOURCES.filter((s) => s.path.startsWith('test/'));
const TABLES = new Set(SCHEMAS.flatMap((path) => [...readFileSync(join(ROOT, path), 'utf8').matchAll(/CREATE TABLE (\w+)/g)].map((m) => m[1]!)));

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const word = (name: string) => new RegExp(`(?<![\\w$])${escape(name)}(?![\\w$])`);
const CODE_NAME = /^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)?(\(\))?$/;

/** The backticked spans of a Markdown text, outside fenced code blocks. */
function backticked(markdown: string): string[] {
  const prose = markdown.replace(/^```[\s\S]*?^```/gm, '');
  return [...prose.matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!);
}

/** Why a span names nothing that exists, or null when it does (or is plain text). */
function problemWith(span: string): string | null {
  if (span.startsWith('"') && span.endsWith('"') && span.length > 2) {
    const title = span.slice(1, -1);
    return TEST_SOURCES.some((s) => s.text.includes(title)) ? null : `no test is titled ${span}`;
  }
  if (span.includes('/') || /\.(ts|mjs|md|json)$/.test(span)) {
    return existsSync(join(ROOT, span)) ? null : `no file or folder ${span}`;
  }
  if (!CODE_NAME.test(span)) return null;
  const [owner, member] = span.replace(/\(\)$/, '').split('.') as [string, string | undefined];
  if (member === undefined) {
    if (TABLES.has(owner) || SOURCES.some((s) => word(owner).test(s.code))) return null;
    return `${owner} occurs nowhere in src/ or test/`;
  }
  const declaration = new RegExp(`\\b(class|interface|type|function|const|let)\\s+${escape(owner)}(?![\\w$])`);
  const declaring = SOURCES.filter((s) => declaration.test(s.code));
  if (declaring.length === 0) return `${owner} is declared nowhere in src/ or test/`;
  if (declaring.some((s) => word(member).test(s.code))) return null;
  return `${owner} (${declaring.map((s) => s.path).join(', ')}) has no ${member}`;
}

describe('docs/architecture.md', () => {
  const doc = readFileSync(join(ROOT, DOC), 'utf8');

  it('names only functions, types, tables, files and tests that exist', () => {
    const spans = backticked(doc);
    expect(spans.length).toBeGreaterThan(100);
    const problems = [...new Set(spans)].map(problemWith).filter((p) => p !== null);
    expect(problems).toEqual([]);
  });

  it('catches a misspelled name of each kind', () => {
    expect(problemWith('SqliteStore.transact')).toBeNull();
    expect(problemWith('SqliteStore.transactt')).toMatch(/has no transactt/);
    expect(problemWith('SqliteStor.transact')).toMatch(/declared nowhere/);
    expect(problemWith('decideAppendd')).toMatch(/occurs nowhere/);
    expect(problemWith('recent_batches')).toBeNull();
    expect(problemWith('recent_batch')).toMatch(/occurs nowhere/);
    expect(problemWith('src/storage/sqlite/engin.ts')).toMatch(/no file/);
    expect(problemWith('"every acknowledged append survives SIGKILL at any point of sealing"')).toBeNull();
    expect(problemWith('"every acknowledged append survives SIGTERM"')).toMatch(/no test is titled/);
    expect(problemWith('kill -9')).toBeNull();
  });

  it('is linked from the README', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    expect(readme.includes('](docs/architecture.md)'), 'README.md links docs/architecture.md').toBe(true);
  });
});

/** Each layer's folder and the folders it may import, from the table's rows. */
function layerTable(markdown: string): Map<string, string[]> {
  const layers = new Map<string, string[]>();
  for (const line of markdown.split('\n')) {
    const cells = line.split('|').map((c) => c.trim());
    const folder = /^`src\/(\w+)\/`$/.exec(cells[1] ?? '')?.[1];
    if (folder === undefined || cells.length < 6) continue;
    layers.set(folder, [...(cells[3] ?? '').matchAll(/`src\/(\w+)\/`/g)].map((m) => m[1]!));
  }
  return layers;
}

function importsOf(text: string): string[] {
  const patterns = [/\bfrom\s+'([^']+)'/g, /\bimport\s*\(\s*'([^']+)'/g, /^\s*import\s+'([^']+)'/gm];
  return patterns.flatMap((p) => [...text.matchAll(p)].map((m) => m[1]!));
}

describe('the layers of docs/architecture.md', () => {
  const layers = layerTable(readFileSync(join(ROOT, DOC), 'utf8'));
  const srcFiles = SOURCES.filter((s) => s.path.startsWith('src/'));
  const layerOf = (path: string) => path.split('/')[1]!;

  it('lists every folder of src/', () => {
    const folders = readdirSync(join(ROOT, 'src'), { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
    expect([...layers.keys()].sort()).toEqual(folders.sort());
  });

  it('imports point only where the table lets them', () => {
    const wrong: string[] = [];
    for (const file of srcFiles) {
      const from = layerOf(file.path);
      for (const spec of importsOf(file.code)) {
        if (!spec.startsWith('.')) continue;
        const target = relative(ROOT, resolve(ROOT, dirname(file.path), spec)).split(sep).join('/');
        const to = layerOf(target);
        if (to !== from && !(layers.get(from) ?? []).includes(to)) wrong.push(`${file.path} imports ${spec}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('keeps core free of the clock, randomness, timers and Node modules, protocol free of Node modules, and live free of SQL', () => {
    const wrong: string[] = [];
    for (const file of srcFiles) {
      const layer = layerOf(file.path);
      const packages = importsOf(file.code).filter((spec) => !spec.startsWith('.'));
      if ((layer === 'core' || layer === 'protocol') && packages.some((p) => p.startsWith('node:'))) wrong.push(`${file.path} imports a Node module`);
      if (layer === 'core' && /\b(Date\.now|Math\.random|setTimeout|setInterval|setImmediate|performance\.now|process\.hrtime)\b/.test(file.code)) {
        wrong.push(`${file.path} reads the clock, draws randomness or sets a timer`);
      }
      if (layer === 'live' && packages.some((p) => p === 'better-sqlite3' || p === 'pg')) wrong.push(`${file.path} imports a database driver`);
    }
    expect(wrong).toEqual([]);
  });
});
