/**
 * A clock a test moves forward. It runs with the wall clock, so everything that takes real
 * time still does, and advance() jumps it ahead: a producer's 2 s TTL passes at once, with
 * no sleep. The server judges time by it when started in-process with `clock`
 * (test/helpers/server.ts): producer TTLs and eviction, tokens, leases, retry schedules.
 */
export class TestClock {
  private offsetMs = 0;

  /** Now, in ms since the epoch, as the server reads it. */
  readonly now = (): number => Date.now() + this.offsetMs;

  /** Moves the clock forward by `ms`. */
  advance(ms: number): void {
    if (!(ms >= 0)) throw new Error(`a clock only moves forward (asked to move ${ms} ms)`);
    this.offsetMs += ms;
  }
}
