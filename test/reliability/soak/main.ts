/**
 * `npm run soak -- --minutes N [--seed S] [--kill-min-ms A] [--kill-max-ms B]`: the crash
 * soak for as long as asked. Prints restarts, writes acknowledged, lost and duplicated;
 * exits 1 if anything was lost, duplicated or otherwise wrong.
 */
import { parseArgs } from 'node:util';
import { formatReport, runSoak } from './run.js';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '5' },
    seed: { type: 'string', default: String(Date.now() % 1_000_000) },
    'kill-min-ms': { type: 'string', default: '300' },
    'kill-max-ms': { type: 'string', default: '3000' },
  },
});

const minutes = Number(values.minutes);
const seed = Number(values.seed);
const gap: [number, number] = [Number(values['kill-min-ms']), Number(values['kill-max-ms'])];
if (!(minutes > 0) || !Number.isSafeInteger(seed) || !(gap[0] > 0 && gap[1] >= gap[0])) {
  console.error('usage: npm run soak -- --minutes N [--seed S] [--kill-min-ms A] [--kill-max-ms B]');
  process.exit(2);
}

console.log(`rill crash soak: ${minutes} min, seed ${seed}, a SIGKILL every ${gap[0]}-${gap[1]} ms`);
const result = await runSoak({ end: { durationMs: minutes * 60_000 }, seed, killGapMs: gap, log: (line) => console.log(line) });
console.log(formatReport(result));
process.exit(result.lost === 0 && result.duplicated === 0 && result.violations === 0 ? 0 : 1);
