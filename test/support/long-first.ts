/**
 * The order `npm test` starts its files in: the files that take longest first, so that
 * none of them starts late and runs alone at the end while the other worker idles.
 * vitest's own order groups files by project (main, then postgres, then postgres-engine)
 * and knows durations only from a cache a fresh clone (CI) does not have, which started
 * the seed-000 model (two and a half minutes) among the last files.
 */
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Files of 15 s or more on this machine, longest first (durations of a full run under load,
 * 2026-12-06; docs/testing.md). A long file left out starts in vitest's order, which puts the
 * postgres-engine project's files last: the HTTP cold-tier file (80 s) started 660 s into a
 * run and ran on alone while the other workers had nothing left.
 */
const LONG_FIRST = [
  'test/docs/console-examples.test.ts',
  'test/core/producer-model.test.ts',
  'test/client/processor-crash.test.ts',
  'test/cli/commands.test.ts',
  'test/console/console.test.ts',
  'test/http/cold-tier.test.ts',
  'test/conformance.test.ts',
  'test/reliability/soak.test.ts',
  'test/cli/records.test.ts',
  'test/docs/readme.test.ts',
  'test/conformance-postgres.test.ts',
  'test/storage/contract.test.ts',
  'test/reliability/limits.test.ts',
  'test/cli/subs.test.ts',
  'test/crash/transactions-sigkill.test.ts',
  'test/cli/serve.test.ts',
  'test/client/cli.test.ts',
  'test/console/pages.test.ts',
  'test/auth/remote-keys.test.ts',
  'test/reliability/disk-full.test.ts',
  'test/crash/cold-sigkill.test.ts',
  'test/cli/transactions.test.ts',
  'test/auth/tls-browsers.test.ts',
  'test/crash/subscriptions-sigkill.test.ts',
  'test/auth/permissions.test.ts',
  'test/reliability/fuzz.test.ts',
  'test/storage/cold-tier.test.ts',
  'test/crash/records-sigkill.test.ts',
  'test/subscriptions/scale.test.ts',
  'test/reliability/drain.test.ts',
];

export class LongFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const ordered = await super.sort(files);
    const rank = (spec: TestSpecification): number => {
      const at = LONG_FIRST.indexOf(relative(spec.project.config.root, spec.moduleId));
      return at < 0 ? LONG_FIRST.length : at;
    };
    // Stable: files of equal rank keep vitest's order; a later group (the serial files) stays later.
    return ordered.sort((a, b) => a.project.config.sequence.groupOrder - b.project.config.sequence.groupOrder || rank(a) - rank(b));
  }
}
