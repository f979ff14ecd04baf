/**
 * The group commit the durable floors share: every POST body that ends in one turn of the
 * event loop is written as one batch, then the written file is flushed with `fdatasync`
 * from libuv's thread pool, and each request is answered 204 only once a flush that began
 * after its batch was written has ended. Up to two flushes are in flight, as rill's WAL
 * has. Any other request is answered 204 at once.
 */
import { fdatasync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import { answerNoContent, whenBodyRead } from './bare.js';

const MAX_SYNCS_IN_FLIGHT = 2;

export interface Log {
  /** Writes a batch of bodies (not yet durable), synchronously, on the event loop. */
  write(bodies: Buffer[]): void;
  /** The file whose flush makes written batches durable. */
  fd(): number;
}

export function serveGroupCommit(port: number, log: Log): void {
  let bodies: Buffer[] = [];
  let unwritten: ServerResponse[] = [];
  /** Written, waiting for a flush that begins after them. */
  let unflushed: ServerResponse[] = [];
  let syncsInFlight = 0;

  const flushIfIdle = (): void => {
    if (syncsInFlight >= MAX_SYNCS_IN_FLIGHT || unflushed.length === 0) return;
    const covered = unflushed;
    unflushed = [];
    syncsInFlight++;
    fdatasync(log.fd(), (error) => {
      syncsInFlight--;
      if (error) throw error;
      for (const res of covered) answerNoContent(res);
      flushIfIdle();
    });
  };

  const writeBatch = (): void => {
    log.write(bodies);
    for (const res of unwritten) unflushed.push(res);
    bodies = [];
    unwritten = [];
    flushIfIdle();
  };

  const server = createServer({ keepAliveTimeout: 5_000 }, (req, res) => {
    if (req.method !== 'POST') return answerNoContent(res);
    whenBodyRead(req, (body) => {
      bodies.push(body);
      unwritten.push(res);
      if (unwritten.length === 1) setImmediate(writeBatch);
    });
  });
  server.listen(port, '127.0.0.1', () => process.stdout.write('ready\n'));
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
}
