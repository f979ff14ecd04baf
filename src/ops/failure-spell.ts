/**
 * A task that runs again and again (the subscription sweep, every 500 ms by default) and
 * fails for as long as what it needs is down, PostgreSQL say: the failure is logged once
 * when it begins, with its error, and once when it ends, with the count of failed runs,
 * instead of a stack trace per run.
 */
import type { Logger } from 'pino';

export class FailureSpell {
  private failures = 0;
  private sinceMs = 0;

  constructor(
    private readonly log: Logger,
    private readonly now: () => number,
    private readonly messages: { failing: string; recovered: string },
  ) {}

  /** A run failed: logged only when it is the first of a spell. */
  failed(error: unknown): void {
    if (this.failures++ > 0) return;
    this.sinceMs = this.now();
    this.log.warn({ err: error }, this.messages.failing);
  }

  /** A run went through: a spell of failures, if one was under way, has ended. */
  succeeded(): void {
    if (this.failures === 0) return;
    this.log.warn({ failures: this.failures, failingMs: this.now() - this.sinceMs }, this.messages.recovered);
    this.failures = 0;
  }
}
