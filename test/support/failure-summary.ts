/**
 * A vitest reporter that ends the run with what failed: each failing test by file and name,
 * with its first error line, where in the test it was raised, and the seed that replays it
 * when the file was random; then one count line. It comes after the default reporter, whose
 * full stacks come first, so that a failed CI run can be read from its last lines alone.
 */
import { relative } from 'node:path';
import type { Reporter, TestCase, TestModule } from 'vitest/node';

interface SerializedFailure {
  message?: string;
  name?: string;
  stack?: string;
}

const ROOT = process.cwd();

/** The error's first line, and the first stack frame in the project's tests (where the test raised it). */
function describeError(error: SerializedFailure | undefined): string[] {
  if (!error) return ['(no error recorded)'];
  const message = (error.message ?? '').split('\n')[0]!;
  const first = error.name && !message.startsWith(error.name) ? `${error.name}: ${message}` : message;
  const frame = (error.stack ?? '').split('\n').find((line) => line.includes(`${ROOT}/test/`) || line.includes(`${ROOT}/bench/`));
  return frame ? [first, frame.trim().replace(`${ROOT}/`, '')] : [first];
}

function failedTest(file: string, test: TestCase): string[] {
  const lines = [`FAIL ${file} > ${test.fullName}`, ...describeError(test.result().errors?.[0] as SerializedFailure | undefined)];
  const seed = test.meta().seed;
  if (seed !== undefined) lines.push(`seed ${seed}: RILL_TEST_SEED=${seed} npm test -- ${file}`);
  return lines.map((line, i) => (i === 0 ? line : `     ${line}`));
}

/** Failures outside any test (an import, a hook, an error the file leaked) count as one each. */
function failedFile(file: string, error: unknown): string[] {
  return [`FAIL ${file} (outside its tests)`, ...describeError(error as SerializedFailure).map((line) => `     ${line}`)];
}

/** Per project: files, tests, and the seconds its files took (tests and hooks), which the note of a change can quote. */
function tiers(modules: ReadonlyArray<TestModule>): string {
  const byProject = new Map<string, { files: number; tests: number; ms: number }>();
  for (const module of modules) {
    const tier = byProject.get(module.project.name) ?? { files: 0, tests: 0, ms: 0 };
    tier.files += 1;
    tier.tests += [...module.children.allTests()].length;
    tier.ms += module.diagnostic().duration;
    byProject.set(module.project.name, tier);
  }
  return [...byProject].map(([name, t]) => `${name}: ${t.files} files, ${t.tests} tests, ${Math.round(t.ms / 1000)} s`).join('; ');
}

export default class FailureSummary implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    const counts = { passed: 0, failed: 0, skipped: 0 };
    const lines: string[] = [];
    for (const module of modules) {
      const file = relative(ROOT, module.moduleId);
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'failed') {
          counts.failed += 1;
          lines.push(...failedTest(file, test));
        } else if (state === 'passed') counts.passed += 1;
        else counts.skipped += 1;
      }
      for (const error of module.errors()) {
        counts.failed += 1;
        lines.push(...failedFile(file, error));
      }
    }
    for (const error of unhandledErrors) {
      counts.failed += 1;
      lines.push(...failedFile('(the run)', error));
    }
    const out = ['', `rill test summary: ${modules.length} files; ${tiers(modules)}`];
    if (lines.length > 0) out.push(...lines);
    out.push(`${counts.passed} passed, ${counts.failed} failed${counts.skipped > 0 ? `, ${counts.skipped} skipped` : ''}`);
    process.stdout.write(`${out.join('\n')}\n`);
  }
}
