/** Small tools the soak shares: a seeded random source, HTTP with outcomes, pacing. */
import { seededRandom, type Rng as BaseRng } from '../../helpers/seed.js';

/** The tests' seeded generator (test/helpers/seed.ts), with what the soak needs besides, so a soak's choices replay from its seed. */
export class Rng {
  private readonly source: BaseRng;

  constructor(seed: number) {
    this.source = seededRandom(seed);
  }

  next(): number {
    return this.source.next();
  }

  int(min: number, max: number): number {
    return this.source.int(min, max);
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  /** Letters and digits only: never a record separator of any stream format. */
  pad(min: number, max: number): string {
    const alphabet = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
    let out = '';
    for (let i = this.int(min, max); i > 0; i--) out += alphabet[Math.floor(this.next() * alphabet.length)];
    return out;
  }

  fork(salt: number): Rng {
    return new Rng(Math.floor(this.next() * 4_294_967_296) ^ salt);
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** How a request ended: an answer, or no answer (the outcome of a write is unknown). */
export type Outcome = { kind: 'answer'; res: Response; body: Buffer } | { kind: 'unknown'; reason: string };

/** Time allowed for one soak request; past it the outcome is unknown. */
export const REQUEST_TIMEOUT_MS = 8_000;

/**
 * One request. `loseAfterMs` makes the client give up on the answer that soon, as when
 * a network drops it: the server may or may not have applied the request.
 */
export async function call(url: string, init: RequestInit = {}, loseAfterMs?: number): Promise<Outcome> {
  const abort = new AbortController();
  const lose = loseAfterMs !== undefined;
  const timer = setTimeout(() => abort.abort(), lose ? loseAfterMs : REQUEST_TIMEOUT_MS);
  try {
    const res = await fetch(url, { ...init, signal: abort.signal });
    const body = Buffer.from(await res.arrayBuffer());
    if (res.status >= 500) return { kind: 'unknown', reason: `${res.status} ${body.toString().slice(0, 120)}` };
    return { kind: 'answer', res, body };
  } catch (error) {
    if (abort.signal.aborted) return { kind: 'unknown', reason: lose ? 'answer-dropped' : 'timeout' };
    const cause = (error as { cause?: { code?: string } }).cause;
    return { kind: 'unknown', reason: cause?.code ?? (error as Error).name };
  } finally {
    clearTimeout(timer);
  }
}

/** Share of writes whose answer the client drops on purpose. */
export const ANSWER_LOSS_CHANCE = 0.05;

/** A delay after which to drop the answer, for a random share of requests. */
export function maybeLose(rng: Rng): number | undefined {
  return rng.chance(ANSWER_LOSS_CHANCE) ? rng.int(0, 6) : undefined;
}

export const pad20 = (n: number) => String(n).padStart(20, '0');
