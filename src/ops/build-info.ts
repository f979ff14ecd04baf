/**
 * What runs: the package's version and the commit it was built from. The commit is written
 * at build time into dist/build-info.json (scripts/build-info.mjs); run from the sources,
 * or built outside a git checkout, it is "unknown".
 */
import { readFileSync } from 'node:fs';

export interface BuildInfo {
  version: string;
  commit: string;
}

let cached: BuildInfo | undefined;

export function buildInfo(): BuildInfo {
  cached ??= {
    // From dist/ops/ (or src/ops/): the package root is two levels up, the build's output one.
    version: stringField(readJson('../../package.json'), 'version'),
    commit: stringField(readJson('../build-info.json'), 'commit'),
  };
  return cached;
}

function readJson(relative: string): unknown {
  try {
    return JSON.parse(readFileSync(new URL(relative, import.meta.url), 'utf8'));
  } catch {
    return undefined;
  }
}

function stringField(value: unknown, key: string): string {
  const field = typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined;
  return typeof field === 'string' && field.length > 0 ? field : 'unknown';
}
