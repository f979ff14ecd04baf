/**
 * The WAL checkpoint thread (checkpoints.ts is the other side): a connection of its own
 * to each store's database, which copies committed WAL pages into the database file and
 * fsyncs it when asked, so that the event loop's connection never does it inside a COMMIT.
 * One thread serves every store of its process.
 */
import { parentPort } from 'node:worker_threads';
import Database from 'better-sqlite3';

export type ToCheckpoints = { kind: 'open'; store: number; dbPath: string } | { kind: 'checkpoint'; store: number } | { kind: 'close'; store: number };
export type FromCheckpoints =
  | { kind: 'done'; store: number; walPages: number; copiedPages: number }
  | { kind: 'failed'; store: number; message: string }
  | { kind: 'closed'; store: number };

/**
 * Passes of one checkpoint at most. The event loop's connection goes on committing while a
 * pass copies, so one pass rarely copies everything; the WAL starts over from its beginning
 * only after a pass that did, so each pass takes what was committed during the one before.
 */
const MAX_PASSES = 8;

interface Pass {
  busy: number;
  /** Pages in the WAL, and those copied into the database so far. */
  log: number;
  checkpointed: number;
}

const port = parentPort!;
const connections = new Map<number, Database.Database>();

function connection(store: number, dbPath?: string): Database.Database {
  let db = connections.get(store);
  if (db === undefined) {
    if (dbPath === undefined) throw new Error(`invariant: store ${store} has no checkpoint connection`);
    db = new Database(dbPath, { fileMustExist: true });
    connections.set(store, db);
  }
  return db;
}

/** Checkpoints until one pass copies everything, or MAX_PASSES. */
function checkpoint(db: Database.Database): Pass | undefined {
  let pass: Pass | undefined;
  for (let i = 0; i < MAX_PASSES; i++) {
    // PASSIVE: copies what no reader still needs, waiting for no reader or writer.
    [pass] = db.pragma('wal_checkpoint(PASSIVE)') as Pass[];
    if (pass === undefined || pass.busy !== 0 || pass.checkpointed >= pass.log) break;
  }
  return pass;
}

/** A failure is reported, never ends the thread (the next nudge tries again; other stores go on). */
function serve(message: ToCheckpoints): FromCheckpoints | null {
  const { store } = message;
  try {
    if (message.kind === 'open') {
      connection(store, message.dbPath);
      return null;
    }
    if (message.kind === 'close') {
      const db = connections.get(store);
      connections.delete(store);
      db?.close();
      return { kind: 'closed', store };
    }
    const pass = checkpoint(connection(store));
    return { kind: 'done', store, walPages: pass?.log ?? 0, copiedPages: pass?.checkpointed ?? 0 };
  } catch (error) {
    if (message.kind === 'close') return { kind: 'closed', store };
    return { kind: 'failed', store, message: error instanceof Error ? error.message : String(error) };
  }
}

port.on('message', (message: ToCheckpoints) => {
  const answer = serve(message);
  if (answer !== null) port.postMessage(answer);
});
