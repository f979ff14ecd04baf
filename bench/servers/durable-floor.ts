/**
 * The durable floor: a bare node:http server that does the least a durable append must
 * do, so rill's durable figures can be read against what durability itself costs here.
 * Each batch of POST bodies is one `write` to a log file, made durable by group commit
 * (group-commit.ts). Nothing else: no framing, no stream state, no index, no checksum,
 * no recovery, so no real server can be this cheap.
 *
 * The log is written in place over a preallocated file, round and round, as SQLite
 * reuses its WAL after a checkpoint: an fdatasync that need not record a new file size
 * is cheaper here (0.09-0.10 against 0.14-0.17 ms at the median, 2 KB writes).
 * Usage: node durable-floor.js PORT DATA_DIR
 */
import { fdatasyncSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { serveGroupCommit } from './group-commit.js';

const LOG_BYTES = 64 * 1024 * 1024;
const fd = openSync(join(process.argv[3]!, 'log'), 'w+');
writeSync(fd, Buffer.alloc(LOG_BYTES));
fdatasyncSync(fd);
let position = 0;

serveGroupCommit(Number(process.argv[2]), {
  write(bodies) {
    const data = Buffer.concat(bodies);
    if (data.length > LOG_BYTES) throw new Error(`a batch of ${data.length} bytes does not fit the log`);
    if (position + data.length > LOG_BYTES) position = 0;
    writeSync(fd, data, 0, data.length, position);
    position += data.length;
  },
  fd: () => fd,
});
