/**
 * The cold tier's uploader: a loop that, each pass, looks at every stream's hot rows,
 * counts the sealed bytes still hot (the upload lag the 507 limit reads), uploads the
 * segments due, and sweeps the objects no read can reach any more. An upload is: encode,
 * PUT, and only once the store acknowledged it, the engine's transaction that records the
 * segment and deletes its hot rows (host.ts). A failed PUT ends the pass; the next one
 * waits a backoff that doubles with each failure in a row. On PostgreSQL every node counts
 * the lag, and only the node holding the upload lock (host.ts, beginUploads) uploads and
 * sweeps in a pass.
 */
import { nextMarks, nextSegment, sealCeiling, sealLimit, segmentKey, uploadBackoffMs, uploadLag, type HotWindow, type TailMark } from '../../core/cold-tier.js';
import type { StreamState } from '../../core/types.js';
import type { ColdCandidate, ColdHost } from './host.js';
import type { ObjectStore } from './object-store.js';
import { encodeSegment } from './segment.js';

export interface UploaderSettings {
  window: HotWindow;
  segmentBytes: number;
  /** Between passes when the last one succeeded. */
  intervalMs: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
}

export interface UploaderCounters {
  uploads: number;
  uploadedBytes: number;
  uploadFailures: number;
  sweptObjects: number;
  /** Sealed bytes still hot, as the last pass counted them. */
  lagBytes: number;
  /** Bytes in the hot store, as the last pass counted them. */
  hotBytes: number;
}

/** Streams looked at between two turns of the event loop. */
const PAGE = 500;
/** Segments the sweep removes per pass. */
const SWEEP_BATCH = 500;

export class ColdUploader {
  readonly counters: UploaderCounters = { uploads: 0, uploadedBytes: 0, uploadFailures: 0, sweptObjects: 0, lagBytes: 0, hotBytes: 0 };
  /** Upload lag and hot bytes per stream id, as last seen: totals are their sums. */
  private readonly seenBytes = new Map<number, { lag: number; hot: number }>();
  /** Tail marks per stream id, for the hot window's age (core/cold-tier.ts). */
  private readonly marks = new Map<number, TailMark[]>();
  private failuresInRow = 0;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private closed = false;

  constructor(
    private readonly host: ColdHost,
    private readonly objects: ObjectStore,
    private readonly settings: UploaderSettings,
    private readonly nowMs: () => number,
    private readonly onError: (error: unknown) => void,
  ) {}

  start(): void {
    this.schedule(0);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }

  /** Runs one pass now (tests and the loop); resolves when it ended. */
  pass(): Promise<void> {
    this.running ??= this.runPass().finally(() => (this.running = null));
    return this.running;
  }

  private schedule(delayMs: number): void {
    if (this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.pass().then(() => this.schedule(this.failuresInRow === 0 ? this.settings.intervalMs : uploadBackoffMs(this.failuresInRow, this.settings.backoffBaseMs, this.settings.backoffMaxMs)));
    }, delayMs);
    this.timer.unref();
  }

  /** Never rejects: a failure (the store unreachable, the engine failing) is counted, told, and retried after a backoff. */
  private async runPass(): Promise<void> {
    try {
      const due = await this.scan();
      if (this.host.beginUploads === undefined || (await this.host.beginUploads())) {
        try {
          for (const candidate of due) {
            if (this.closed) return;
            await this.uploadDue(candidate);
          }
          await this.sweep();
        } finally {
          await this.host.endUploads?.();
        }
      }
      this.failuresInRow = 0;
    } catch (error) {
      this.failuresInRow++;
      this.counters.uploadFailures++;
      this.onError(error);
    }
  }

  /** Every stream's hot rows: their lag and hot bytes are noted, and the streams with a segment due are answered. */
  private async scan(): Promise<ColdCandidate[]> {
    const due: ColdCandidate[] = [];
    const seen = new Set<number>();
    for (let afterId: number | null = 0; afterId !== null; ) {
      const page = await this.host.coldCandidates(afterId, PAGE, this.settings.segmentBytes, this.settings.window.bytes);
      for (const candidate of page.candidates) {
        seen.add(candidate.stream.id);
        if ((await this.note(candidate, this.limitOf(candidate.stream))) !== null) due.push(candidate);
      }
      afterId = page.nextAfterId;
      if (afterId !== null) await new Promise((resolve) => setImmediate(resolve));
    }
    for (const id of this.marks.keys()) if (!seen.has(id)) this.marks.delete(id);
    for (const id of this.seenBytes.keys()) if (!seen.has(id)) this.seenBytes.delete(id);
    this.sumSeen();
    return due;
  }

  /** Notes a stream's lag and hot bytes; answers its next segment, if one is due. */
  private async note(candidate: ColdCandidate, limit: number): Promise<{ start: number; end: number } | null> {
    const movable = await this.host.wholeRowsEnd(candidate.stream.id, sealCeiling(candidate.view, limit));
    this.seenBytes.set(candidate.stream.id, { lag: uploadLag(candidate.view, movable), hot: candidate.view.tail - candidate.view.hotStart });
    return nextSegment(candidate.view, limit, this.settings.segmentBytes);
  }

  private sumSeen(): void {
    let lag = 0;
    let hot = 0;
    for (const seen of this.seenBytes.values()) {
      lag += seen.lag;
      hot += seen.hot;
    }
    this.counters.lagBytes = lag;
    this.counters.hotBytes = hot;
  }

  /** Records the stream's tail and answers its seal limit now. */
  private limitOf(stream: StreamState): number {
    const now = this.nowMs();
    const marks = nextMarks(this.marks.get(stream.id) ?? [], stream.tail, now, this.settings.window);
    this.marks.set(stream.id, marks);
    return sealLimit(stream.tail, this.settings.window, marks, now);
  }

  /** Uploads the stream's due segments one after another, each seen afresh after the one before commits. */
  private async uploadDue(candidate: ColdCandidate): Promise<void> {
    const id = candidate.stream.id;
    // With several nodes on one database, another may have moved the rows since the scan: seen afresh under the lock.
    let current: ColdCandidate | undefined = this.host.beginUploads === undefined ? candidate : await this.host.coldCandidate(id, this.settings.segmentBytes);
    if (current === undefined) return;
    let segment = await this.note(current, this.limitOf(current.stream));
    while (current !== undefined && segment !== null && !this.closed) {
      if ((await this.upload(current.stream, segment)) === 0) return;
      current = await this.host.coldCandidate(id, this.settings.segmentBytes);
      segment = current === undefined ? null : await this.note(current, this.limitOf(current.stream));
      if (current === undefined) this.seenBytes.delete(id);
      this.sumSeen();
    }
  }

  /** One segment: PUT, then the engine's transaction; answers the bytes moved (0: the rows changed meanwhile). */
  private async upload(stream: StreamState, range: { start: number; end: number }): Promise<number> {
    const appends = await this.host.hotAppends(stream.id, range.start, range.end);
    // The rows changed since they were seen (a trim, or another node's upload): nothing to put.
    const last = appends.at(-1);
    if (appends[0]?.start !== range.start || last === undefined || last.start + last.data.length !== range.end) return 0;
    const { body, sha256 } = encodeSegment(stream.id, stream.incarnation, appends);
    const key = segmentKey(this.objects.prefix, stream.id, stream.incarnation, range.start, range.end);
    await this.objects.put(key, body, sha256);
    const committed = await this.host.commitSegment({ streamId: stream.id, start: range.start, end: range.end, key, sha256, bytes: body.length });
    if (!committed) {
      // A trim or a drop came first: nothing names the object.
      await this.objects.delete([key]).catch(() => undefined);
      return 0;
    }
    this.counters.uploads++;
    this.counters.uploadedBytes += range.end - range.start;
    return range.end - range.start;
  }

  /** Objects of dropped streams and of history below a stream's earliest offset: deleted, then their rows. */
  private async sweep(): Promise<void> {
    const unreachable = await this.host.unreachableSegments(SWEEP_BATCH);
    if (unreachable.length === 0) return;
    await this.objects.delete(unreachable.map((s) => s.key));
    await this.host.forgetSegments(unreachable);
    this.counters.sweptObjects += unreachable.length;
  }
}
