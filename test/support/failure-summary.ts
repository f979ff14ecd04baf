/**
 * A vitest reporter that ends the run with what failed: each failing test by file and name
 * with its first error line and where in the test it was raised, then one count line. It
 * comes after the default reporter, so a failed CI run can be read from its last lines alone
 * (the default reporter's own summary comes first, with every stack in full above it).
 */
import { relative } from 'node:path';
import type { Reporter, TestModule } from 'vitest/node';

interface SerializedFailure {
  message?: string;
  name?: string;
  stack?: string;
}

const ROOT = process.cwd();

/** The error's first line and the first stack frame inside test/ (where the test raised it). */
function describeError(error: SerializedFailure | undefined): string[] {
  if (!error) return ['(no error recorded)'];
  const first = `${error.name && !error.message?.startsWith(error.name) ? `${error.name}: ` : ''}${(error.message ?? '').split('\n')[0]}`;
  const frame = (error.stack ?? '').split('\n').find((line) => line.includes('/test/') && !line.includes('node_modules'));
  const where = frame?.trim().replace(ROOT + '/', '');
  return where ? [first, where] : [first];
}

function failuresOf(module: TestModule): string[] {
  const file = relative(ROOT, module.moduleId);
  const lines: string[] = [];
  for (const test of module.children.allTests()) {
    const result = test.result();
    if (result.state !== 'failed') continue;
    lines.push(`FAIL ${file} > ${test.fullName}`, ...describeError(result.errors?.[0] as SerializedFailure | undefined).map((l) => `     ${l}`));
  }
  // A file that failed outside any test: its import, a hook, or a leaked error.
  for (const error of module.errors()) lines.push(`FAIL ${file} (the file itself)`, ...describeError(error as SerializedFailure).map((l) => `     ${l}`));
  return lines;
}

export default class FailureSummary implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    const lines: string[] = [];
    for (const module of modules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed += 1;
        else if (state === 'failed') failed += 1;
        else skipped += 1;
      }
      lines.push(...failuresOf(module));
    }
    for (const error of unhandledErrors) lines.push('FAIL an unhandled error', ...describeError(error as SerializedFailure).map((l) => `     ${l}`));
    const projects = new Set(modules.map((m) => m.project.name));
    const out = ['', `rill test summary (${modules.length} files; projects: ${[...projects].join(', ')})`];
    if (lines.length > 0) out.push(`Failing (${failed} tests${modules.some((m) => m.errors().length > 0) || unhandledErrors.length > 0 ? ', and errors outside tests' : ''}):`, ...lines);
    const failures = failed + (lines.length > 0 && failed === 0 ? 1 : 0);
    out.push(`${passed} passed, ${failures} failed${skipped > 0 ? `, ${skipped} skipped` : ''}`);
    process.stdout.write(out.join('\n') + '\n');
  }
}
