/**
 * Runs test code as steps of a real batch, inside the engine's own transaction, after
 * the batch's commands: the Txn methods no command calls yet can be driven as the
 * executor will drive them, including MissingState, rewinds and reruns on engines that
 * load state mid-batch. Test code only: it wraps the engine's protected transaction
 * hook on the one store it is given.
 */
import type { Txn } from '../../src/storage/executor.js';
import { MissingState } from '../../src/storage/missing.js';
import type { Command, Store } from '../../src/storage/store.js';

type Step = (txn: Txn) => unknown;
type Body = (txn: Txn) => void;
type AsyncBody = (txn: Txn) => Promise<void>;

/** The hooks of BatchedStore this wraps (protected there). */
interface Hooks {
  transact(body: Body): void;
  transactAsync?: (commands: readonly Command[], streamIds: Iterable<number>, body: AsyncBody) => Promise<void>;
}

const queued = new WeakMap<Store, Step[][]>();

/** One step, run again from its start after each load it asks for, as BatchedStore runs a command (begun once: answers loaded for it last the step). */
async function runStep(txn: Txn, step: Step): Promise<unknown> {
  txn.beginStep?.();
  for (;;) {
    try {
      return step(txn);
    } catch (error) {
      if (!(error instanceof MissingState)) throw error;
      txn.rewindStep?.();
      await error.load();
    }
  }
}

/** The groups queued when a transaction starts run in it; they stay queued only if it fails (a rerun takes them). */
async function taking<T>(queue: Step[][], run: (groups: Step[][]) => T | Promise<T>): Promise<T> {
  const groups = queue.splice(0);
  try {
    return await run(groups);
  } catch (error) {
    queue.unshift(...groups);
    throw error;
  }
}

function install(store: Store): Step[][] {
  let queue = queued.get(store);
  if (queue) return queue;
  const steps: Step[][] = [];
  queue = steps;
  queued.set(store, queue);
  const hooks = store as unknown as Hooks;
  if (hooks.transactAsync) {
    const original = hooks.transactAsync;
    hooks.transactAsync = (commands, ids, body) =>
      taking(steps, (groups) =>
        original(commands, ids, async (txn) => {
          await body(txn);
          for (const group of groups) for (const step of group) await runStep(txn, step);
        }),
      );
  } else {
    const original = hooks.transact.bind(hooks);
    hooks.transact = (body) => {
      const groups = steps.splice(0);
      try {
        original((txn) => {
          body(txn);
          for (const group of groups) for (const step of group) step(txn);
        });
      } catch (error) {
        steps.unshift(...groups);
        throw error;
      }
    };
  }
  return queue;
}

/**
 * Runs `steps` (each a step of its own) in the batch that also runs `commands`, after
 * them, and answers each step's result as of the committed run.
 */
export async function inBatch(store: Store, steps: Step[], commands: Array<() => Promise<unknown>> = []): Promise<unknown[]> {
  const queue = install(store);
  const results: unknown[] = [];
  const group = steps.map((step, i) => (txn: Txn) => (results[i] = step(txn)));
  queue.push(group);
  try {
    // Queued in one turn: one batch runs them all, and the steps after them.
    const answers = commands.length > 0 ? commands.map((command) => command()) : [store.run('expireStreams', { limit: 0 })];
    await Promise.all(answers);
  } finally {
    if (queue.includes(group)) queue.splice(queue.indexOf(group), 1);
  }
  return results;
}

/** One step in a batch of its own. */
export async function inTxn<T>(store: Store, step: (txn: Txn) => T): Promise<T> {
  return (await inBatch(store, [step]))[0] as T;
}
