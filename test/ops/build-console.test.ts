/**
 * `npm run build` (and so `npm start`) builds the console only when something it is made
 * from changed (scripts/build-console.mjs): the decision, on a directory laid out like the
 * repository, with modification times set by the test.
 */
import { mkdirSync, mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { removeDir } from '../helpers/server.js';

const script = new URL('../../scripts/build-console.mjs', import.meta.url).href;
const { consoleUpToDate } = (await import(script)) as { consoleUpToDate(root: string): boolean };

const root = mkdtempSync(join(tmpdir(), 'rill-console-build-'));
afterAll(() => removeDir(root));

/** Writes `path` under the root with its modification time `atS` seconds after the epoch. */
function file(path: string, atS: number): void {
  const full = join(root, path);
  mkdirSync(dirname(full), { recursive: true });
  writeFileSync(full, path);
  utimesSync(full, atS, atS);
  // A directory's own time moves when an entry is added: keep the tree's at the epoch.
  for (let dir = dirname(full); dir.startsWith(root) && dir !== root; dir = dirname(dir)) utimesSync(dir, 0, 0);
}

describe('the console build', () => {
  it('is needed without a built console, skipped once it is newer than every source, needed again when any source is newer', () => {
    file('console/src/main.tsx', 1000);
    file('src/client/client.ts', 1000);
    file('package.json', 1000);
    expect(consoleUpToDate(root)).toBe(false);
    file('dist/console/index.html', 2000);
    expect(consoleUpToDate(root)).toBe(true);
    for (const source of ['console/src/main.tsx', 'src/client/client.ts', 'src/protocol/headers.ts', 'package-lock.json']) {
      file(source, 3000);
      expect(consoleUpToDate(root), source).toBe(false);
      file(source, 1000);
      expect(consoleUpToDate(root), source).toBe(true);
    }
  });
});
