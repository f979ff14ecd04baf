/** Live readers held now, and those whose connection dropped, by kind; read by metrics and `/stats`. */
import type { ServerResponse } from 'node:http';

export type LiveKind = 'sse' | 'long_poll';

export class LiveReaders {
  readonly held: Record<LiveKind, number> = { sse: 0, long_poll: 0 };
  /** Readers whose connection closed before the server ended their answer (the client left, or the server cut a slow one). */
  readonly dropped: Record<LiveKind, number> = { sse: 0, long_poll: 0 };

  /** A live reader starts holding `res`; it is counted until the response closes. */
  track(kind: LiveKind, res: ServerResponse): void {
    this.held[kind]++;
    res.once('close', () => {
      this.held[kind]--;
      if (!res.writableFinished) this.dropped[kind]++;
    });
  }
}
