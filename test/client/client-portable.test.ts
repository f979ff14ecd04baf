/**
 * rill/client must run in browsers: every module it loads (its own, the shared protocol
 * vocabulary, @noble/hashes) may use only web-standard APIs. This walks the import graph
 * of the built client and refuses Node built-ins, Node globals and server code.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const DIST = resolve(import.meta.dirname, '../../dist');
const IMPORT = /(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;
const NODE_GLOBALS = /\b(Buffer|process|__dirname|require)\s*[.(]/;

function importsOf(file: string): string[] {
  const source = readFileSync(file, 'utf8');
  return [...source.matchAll(IMPORT)].map((m) => m[1] ?? m[2]!);
}

/** Every module reachable from `entry`, and every package it names. */
function graph(entry: string): { files: string[]; packages: string[] } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const queue = [entry];
  while (queue.length > 0 && files.size < 500) {
    const file = queue.pop()!;
    if (files.has(file)) continue;
    files.add(file);
    for (const spec of importsOf(file)) {
      if (spec.startsWith('.')) queue.push(resolve(dirname(file), spec));
      else packages.add(spec);
    }
  }
  return { files: [...files], packages: [...packages] };
}

describe('rill/client portability', () => {
  it('loads no Node built-ins, no Node globals and no server code', () => {
    const { files, packages } = graph(resolve(DIST, 'client/index.js'));
    expect(files.length).toBeGreaterThan(10);
    expect(packages.every((p) => p.startsWith('@noble/hashes/'))).toBe(true);
    for (const file of files) {
      const relative = file.slice(DIST.length + 1);
      expect(relative, relative).toMatch(/^(client|protocol)\//);
      expect(NODE_GLOBALS.test(readFileSync(file, 'utf8')), `${relative} uses a Node global`).toBe(false);
    }
  });
});
