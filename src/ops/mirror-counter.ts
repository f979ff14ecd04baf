import { Counter, type Registry } from 'prom-client';

/**
 * A counter that mirrors a plain number kept elsewhere (a hot path's own tally, a store's
 * figures): each scrape moves it by what the number grew since the last, so counting costs
 * the hot path no call into prom-client.
 */
export function mirrorCounter(registers: Registry[], name: string, help: string, value: () => number): void {
  let reported = 0;
  new Counter({
    name,
    help,
    registers,
    collect() {
      const now = value();
      this.inc(now - reported);
      reported = now;
    },
  });
}
