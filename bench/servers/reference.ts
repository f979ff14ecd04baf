/**
 * The Durable Streams reference server (@durable-streams/server), in its own process
 * like rill. In-memory without a data directory, file-backed with one.
 * Usage: node reference.js PORT [DATA_DIR]
 */
import { DurableStreamTestServer } from '@durable-streams/server';

const port = Number(process.argv[2]);
const dataDir = process.argv[3];
const server = new DurableStreamTestServer(dataDir ? { port, host: '127.0.0.1', dataDir } : { port, host: '127.0.0.1' });
// Its recovery log lines go to the console; keep the bench output to our own progress.
console.info = () => {};
console.log = () => {};
await server.start();
process.stdout.write('ready\n');
process.on('SIGTERM', () => {
  server.stop().then(
    () => process.exit(0),
    () => process.exit(1),
  );
});
