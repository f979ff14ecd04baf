/**
 * The WAL checkpointer's thread (checkpoints.ts is the other side): its own connection to
 * the store's database, which copies committed WAL pages into the database file and
 * fsyncs it when asked, so that the event loop's connection never does it inside a COMMIT.
 */
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

const port = parentPort!;
const db = new Database((workerData as { dbPath: string }).dbPath, { fileMustExist: true });

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

/** Answers with how the checkpoint went; a failure is reported, never ends the thread (the next nudge tries again). */
function checkpoint(): void {
  try {
    let pass: Pass | undefined;
    for (let i = 0; i < MAX_PASSES; i++) {
      // PASSIVE: copies what no reader still needs, waiting for no reader or writer.
      [pass] = db.pragma('wal_checkpoint(PASSIVE)') as Pass[];
      if (pass === undefined || pass.busy !== 0 || pass.checkpointed >= pass.log) break;
    }
    port.postMessage({ kind: 'done', walPages: pass?.log ?? 0, copiedPages: pass?.checkpointed ?? 0 });
  } catch (error) {
    port.postMessage({ kind: 'failed', message: error instanceof Error ? error.message : String(error) });
  }
}

port.on('message', (message: { kind: 'checkpoint' | 'close' }) => {
  if (message.kind === 'checkpoint') return checkpoint();
  db.close();
  port.close();
});
