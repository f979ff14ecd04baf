/**
 * Live tail over SSE. Every batch is counted as it arrives, so the counter and the last
 * offset are exact; only the last RENDERED_ITEMS are kept for display, and the display
 * is redrawn at most once per animation frame, so a fast stream costs rendering, never
 * data. Pause freezes the display while the count goes on.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import type { StreamHandle } from '../../src/client/index.js';
import { failureOf, type Failure } from './api.js';
import { ErrorBox } from './common.js';
import { MessageList, itemsOf, type Item, type Kind } from './messages.js';

export const RENDERED_ITEMS = 200;

const unit = (kind: Kind, n: number) => `${kind === 'json' ? 'message' : 'read'}${n === 1 ? '' : 's'}`;

interface Received {
  messages: number;
  bytes: number;
  lastOffset: string;
  items: Item[];
  closed: boolean;
}

export function LiveTail({ handle, kind, from }: { handle: StreamHandle; kind: Kind; from: string }) {
  const received = useRef<Received>({ messages: 0, bytes: 0, lastOffset: from, items: [], closed: false });
  const [, redraw] = useState(0);
  const [paused, setPaused] = useState<Item[] | null>(null);
  const [failure, setFailure] = useState<Failure | null>(null);
  useEffect(() => {
    const ac = new AbortController();
    const r: Received = { messages: 0, bytes: 0, lastOffset: from, items: [], closed: false };
    received.current = r;
    let frame = 0;
    const schedule = () => {
      if (frame === 0) frame = requestAnimationFrame(() => ((frame = 0), redraw((n) => n + 1)));
    };
    void (async () => {
      try {
        for await (const batch of handle.read({ offset: from, live: 'sse', signal: ac.signal })) {
          r.messages += kind === 'json' ? batch.messages.length : batch.data.length > 0 ? 1 : 0;
          r.bytes += batch.data.length;
          r.lastOffset = batch.nextOffset;
          r.closed = batch.closed;
          r.items.push(...itemsOf(batch.messages));
          if (r.items.length > RENDERED_ITEMS) r.items.splice(0, r.items.length - RENDERED_ITEMS);
          schedule();
        }
      } catch (error) {
        if (!ac.signal.aborted) setFailure(failureOf(error));
      }
    })();
    return () => {
      ac.abort();
      cancelAnimationFrame(frame);
    };
  }, [handle, kind, from]);
  const r = received.current;
  const shown = paused ?? r.items;
  return (
    <section aria-labelledby="tail-title">
      <h2 id="tail-title">Live tail</h2>
      <div class="row">
        <button type="button" aria-pressed={paused !== null} onClick={() => setPaused(paused === null ? [...r.items] : null)}>
          {paused === null ? 'Pause' : 'Resume'}
        </button>
        <span>
          Received <output data-testid="tail-count">{r.messages}</output> {unit(kind, r.messages)} ({r.bytes} bytes) since{' '}
          {from}; next offset <output data-testid="tail-offset">{r.lastOffset}</output>
          {r.closed ? '; the stream is closed' : ''}
          {paused !== null ? '; display paused' : ''}
        </span>
      </div>
      <ErrorBox failure={failure} />
      <MessageList kind={kind} items={[...shown].reverse()} label="Live messages, newest first" limitBytes={1024} />
    </section>
  );
}
