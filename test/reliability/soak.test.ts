/**
 * The crash soak, short: mixed load on the real server (SQLite), SIGKILLed and restarted
 * every 0.3-1.5 s until it has been killed 12 times and answered 1,500 writes (about 30 s
 * here), with the checker run after every restart and at the end. Each run draws a new history from the file's seed (test/helpers/seed.ts), printed when
 * the test fails and replayed by RILL_TEST_SEED. `npm run soak -- --minutes N` runs the same
 * soak for longer.
 */
import { describe, expect, it } from 'vitest';
import { testSeed } from '../helpers/seed.js';
import { formatReport, runSoak } from './soak/run.js';

describe('crash soak (short)', () => {
  it('loses no acknowledged write and applies none twice across SIGKILL restarts', async () => {
    const report = await runSoak({ end: { restarts: 12, acknowledged: 1_500 }, seed: testSeed(), killGapMs: [300, 1_500] });
    console.log(formatReport(report));
    expect(report.violationSamples).toEqual([]);
    expect(report.lost).toBe(0);
    expect(report.duplicated).toBe(0);
    expect(report.violations).toBe(0);
    // A last kill at rest follows the 12 under load.
    expect(report.restarts).toBeGreaterThanOrEqual(13);
    expect(report.acknowledged).toBeGreaterThanOrEqual(1_500);
    // Every kind of write was acknowledged at least once, and readers followed along.
    for (const kind of ['plain append', 'producer write', 'outbox write', 'Stream-Seq commit', 'JSON batch', 'closing write']) {
      expect(report.ackedByKind[kind] ?? 0).toBeGreaterThan(0);
    }
    expect(report.readerBytes).toBeGreaterThan(0);
  }, 120_000);
});
