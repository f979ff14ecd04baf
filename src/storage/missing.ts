/**
 * A transaction over a networked database cannot answer every read synchronously. Its
 * Txn answers what it has loaded and throws MissingState for the rest: the executor's
 * step is undone (Txn.rewindStep), `load` fetches what it asked for, and the step runs
 * again from its start, now finding it. Steps are deterministic given what they read, so
 * the rerun asks the same questions up to that point.
 */
export class MissingState extends Error {
  constructor(readonly load: () => Promise<void>) {
    super('the transaction must load state before this step can go on');
  }
}
