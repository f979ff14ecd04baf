/**
 * One read per commit for live readers at the same place. SSE readers of a stream that
 * stand at the same position of the same committed state need the same bytes and the
 * same rendered event: the first one reads and renders, the others reuse its result.
 * An entry is keyed by the state it was read from (incarnation and tail), so it is never
 * stale. A stream's entries are dropped when it commits again; large events and entries
 * past a count are not kept, so memory stays bounded.
 */
import type { StreamState } from '../core/types.js';

export interface SharedEvent {
  /** The rendered event, ready to write. */
  event: Buffer;
  /** Stream bytes the event carries. */
  bytes: number;
  /** Position after them. */
  next: number;
  /** JSON records the event carries (0 on other streams). */
  records: number;
  /**
   * The event followed by a control event, by what that control event depends on beyond
   * the shared state (the reader's cursor): readers alike write one shared buffer.
   */
  withControl?: Map<string, Buffer>;
}

/** Control-event variants kept per event; readers' cursors rarely differ. */
const MAX_CONTROL_VARIANTS = 8;

/** `shared.event` and the control event `render()` makes for `variant`, made once per variant. */
export function eventWithControl(shared: SharedEvent, variant: string, render: () => string): Buffer {
  const known = shared.withControl?.get(variant);
  if (known) return known;
  const framed = Buffer.concat([shared.event, Buffer.from(render())]);
  shared.withControl ??= new Map();
  if (shared.withControl.size < MAX_CONTROL_VARIANTS) shared.withControl.set(variant, framed);
  return framed;
}

/** Entries kept at once, across streams. */
const MAX_ENTRIES = 1024;
/** Events larger than this (a reader catching up a long backlog) are not kept. */
const MAX_KEPT_EVENT_BYTES = 64 * 1024;

export class SharedEvents {
  private readonly byStream = new Map<string, Map<string, Promise<SharedEvent>>>();
  private entries = 0;

  /** The event for `stream` read from `position`, produced once for all readers asking alike. */
  get(name: string, stream: StreamState, position: number, variant: string, produce: () => Promise<SharedEvent>): Promise<SharedEvent> {
    const key = `${stream.incarnation}:${stream.tail}:${position}:${variant}`;
    const known = this.byStream.get(name)?.get(key);
    if (known) return known;
    const made = produce();
    if (this.entries >= MAX_ENTRIES) return made;
    let kept = this.byStream.get(name);
    if (!kept) {
      kept = new Map();
      this.byStream.set(name, kept);
    }
    kept.set(key, made);
    this.entries++;
    const entries = kept;
    made.then(
      (shared) => {
        if (shared.event.length > MAX_KEPT_EVENT_BYTES) this.forget(name, entries, key, made);
      },
      () => this.forget(name, entries, key, made),
    );
    return made;
  }

  /** The stream committed again: what was read from its earlier states is not needed. */
  drop(name: string): void {
    const entries = this.byStream.get(name);
    if (!entries) return;
    this.byStream.delete(name);
    this.entries -= entries.size;
    entries.clear();
  }

  private forget(name: string, entries: Map<string, Promise<SharedEvent>>, key: string, made: Promise<SharedEvent>): void {
    if (entries.get(key) !== made) return;
    entries.delete(key);
    this.entries--;
    if (entries.size === 0 && this.byStream.get(name) === entries) this.byStream.delete(name);
  }
}
