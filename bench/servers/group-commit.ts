/**
 * The group commit the durable floors share: every POST body that ends in one turn of the
 * event loop is written as one batch, then the written file is flushed with `fdatasync`
 * from libuv's thread pool, and each request is answered 204 only once a flush that began
 * after its batch was written has ended. Up to two flushes are in flight, as rill's WAL
 * has. An SSE read is held (held-readers.ts), and a POST to its path is sent to it once
 * that flush has ended, after the 204: the least a durable fan-out costs here, since a
 * reader must not see what a power cut could take back. Any other request is answered 204
 * at once.
 */
import { fdatasync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import { answerNoContent, whenBodyRead } from './bare.js';
import { destroyHeld, fanOut, holdSseReader, isSseRead, pathOf } from './held-readers.js';

const MAX_SYNCS_IN_FLIGHT = 2;

export interface Log {
  /** Writes a batch of bodies (not yet durable), synchronously, on the event loop. */
  write(bodies: Buffer[]): void;
  /** The file whose flush makes written batches durable. */
  fd(): number;
}

/** A POST waiting for its answer: its response, and the path and body its readers are sent. */
interface Pending {
  res: ServerResponse;
  path: string;
  body: Buffer;
}

export function serveGroupCommit(port: number, log: Log): void {
  let unwritten: Pending[] = [];
  /** Written, waiting for a flush that begins after them. */
  let unflushed: Pending[] = [];
  let syncsInFlight = 0;

  const flushIfIdle = (): void => {
    if (syncsInFlight >= MAX_SYNCS_IN_FLIGHT || unflushed.length === 0) return;
    const covered = unflushed;
    unflushed = [];
    syncsInFlight++;
    fdatasync(log.fd(), (error) => {
      syncsInFlight--;
      if (error) throw error;
      for (const { res, path, body } of covered) {
        answerNoContent(res);
        fanOut(path, body);
      }
      flushIfIdle();
    });
  };

  const writeBatch = (): void => {
    log.write(unwritten.map((pending) => pending.body));
    for (const pending of unwritten) unflushed.push(pending);
    unwritten = [];
    flushIfIdle();
  };

  const server = createServer({ keepAliveTimeout: 5_000 }, (req, res) => {
    const url = req.url ?? '/';
    if (isSseRead(req.method, url)) return holdSseReader(pathOf(url), res);
    if (req.method !== 'POST') return answerNoContent(res);
    whenBodyRead(req, (body) => {
      unwritten.push({ res, path: pathOf(url), body });
      if (unwritten.length === 1) setImmediate(writeBatch);
    });
  });
  server.listen(port, '127.0.0.1', () => process.stdout.write('ready\n'));
  process.on('SIGTERM', () => {
    destroyHeld();
    server.close(() => process.exit(0));
  });
}
