/**
 * Live reads across nodes. Another node's commit reaches this one as a hint (the
 * engine's notification), which wakes the readers of the streams it names, as a local
 * commit does. Hints can be lost (a dropped connection, a reader that began waiting just
 * after one passed), so the streams readers wait on are also checked against their
 * committed versions every `checkMs`: a stream seen for the first time, or whose version
 * moved, wakes its readers, who look at it themselves. A wake that finds nothing new
 * costs a read; a missed one would cost a reader its data, so a reader is late at worst,
 * never wrong.
 */
import type { RemoteCommits } from '../storage/store.js';

export const DEFAULT_REMOTE_CHECK_MS = 1_000;

interface Watched {
  watchedNames(): string[];
  wakeNames(names: Iterable<string>): void;
}

export class RemoteWatch {
  /** The version each watched stream had at the last check; null when it was not stored. */
  private readonly known = new Map<string, string | null>();
  private readonly timer: NodeJS.Timeout;
  private readonly stopHints: () => void;
  private checking = false;

  constructor(
    private readonly remote: RemoteCommits,
    private readonly hub: Watched,
    checkMs: number,
  ) {
    this.stopHints = remote.onHint((names) => hub.wakeNames(names ?? hub.watchedNames()));
    this.timer = setInterval(() => void this.check(), checkMs);
    this.timer.unref();
  }

  /** Wakes the readers of every watched stream that is new to the check or changed since the last. */
  async check(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      const names = this.hub.watchedNames();
      const watched = new Set(names);
      for (const name of this.known.keys()) if (!watched.has(name)) this.known.delete(name);
      if (names.length === 0) return;
      const versions = await this.remote.versions(names);
      const changed: string[] = [];
      for (const name of names) {
        const version = versions.get(name) ?? null;
        if (this.known.get(name) === version) continue;
        this.known.set(name, version);
        changed.push(name);
      }
      this.hub.wakeNames(changed);
    } catch {
      // The database is unreachable: readers meet that on their own reads; the next check tries again.
    } finally {
      this.checking = false;
    }
  }

  close(): void {
    clearInterval(this.timer);
    this.stopHints();
  }
}
