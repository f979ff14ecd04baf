/**
 * The stream's messages, a page at a time: forward with the offset after the page,
 * back through the pages seen before, or from any offset typed in.
 */
import { useEffect, useState } from 'preact/hooks';
import type { StreamHandle } from '../../src/client/index.js';
import { failureOf, type Failure } from './api.js';
import { ErrorBox } from './common.js';
import { itemsOf, MessageList, type Item, type Kind } from './messages.js';

export const PAGE_SIZES = [20, 100, 1000];
/** The bytes one page's read asks for: a JSON page is cut to its message count afterwards. */
const PAGE_BYTES: Record<Kind, number> = { json: 256 * 1024, text: 16 * 1024, binary: 4 * 1024 };

export interface Page {
  offset: string;
  /** Where the next page starts. */
  next: string;
  items: Item[];
  /** Nothing after this page (yet). */
  atTail: boolean;
}

export async function readPage(handle: StreamHandle, kind: Kind, offset: string, size: number, signal: AbortSignal): Promise<Page> {
  for await (const batch of handle.read({ offset, maxBytes: PAGE_BYTES[kind], heartbeats: true, signal })) {
    const items = itemsOf(batch.messages);
    const cut = kind === 'json' && items.length > size ? batch.messages[size - 1]!.nextOffset : undefined;
    if (cut !== undefined) return { offset: batch.offset, next: cut, items: items.slice(0, size), atTail: false };
    return { offset: batch.offset, next: batch.nextOffset, items, atTail: batch.upToDate };
  }
  return { offset, next: offset, items: [], atTail: true };
}

/** An offset as typed: the 20-digit form, a plain number, or -1 for the start. */
export function normalizeOffset(text: string): string | undefined {
  const t = text.trim();
  if (t === '-1') return t;
  return /^\d{1,20}$/.test(t) ? t.padStart(20, '0') : undefined;
}

export function MessagePager({ handle, kind, start }: { handle: StreamHandle; kind: Kind; start: string }) {
  const [offset, setOffset] = useState(start);
  const [history, setHistory] = useState<string[]>([]);
  const [size, setSize] = useState(PAGE_SIZES[1]!);
  const [page, setPage] = useState<Page | null>(null);
  const [failure, setFailure] = useState<Failure | null>(null);
  const [jump, setJump] = useState('');
  const [reload, setReload] = useState(0);
  useEffect(() => {
    const ac = new AbortController();
    readPage(handle, kind, offset, size, ac.signal).then(
      (p) => {
        setPage(p);
        setFailure(null);
      },
      (error: unknown) => !ac.signal.aborted && setFailure(failureOf(error)),
    );
    return () => ac.abort();
  }, [handle, kind, offset, size, reload]);
  const moveTo = (next: string) => {
    setHistory([...history, offset]);
    setOffset(next);
  };
  return (
    <section aria-labelledby="messages-title">
      <h2 id="messages-title">Messages</h2>
      <div class="row" role="group" aria-label="Page through messages">
        <button type="button" disabled={history.length === 0} onClick={() => (setOffset(history[history.length - 1]!), setHistory(history.slice(0, -1)))}>
          Previous
        </button>
        <button type="button" disabled={page === null || page.atTail} onClick={() => page && moveTo(page.next)}>
          Next
        </button>
        <button type="button" onClick={() => setReload(reload + 1)}>
          Reload page
        </button>
        {kind === 'json' && (
          <>
            <label for="page-size">Messages per page</label>
            <select id="page-size" value={size} onChange={(e) => setSize(Number(e.currentTarget.value))}>
              {PAGE_SIZES.map((n) => (
                <option key={n} value={n}>
                  {n}
                </option>
              ))}
            </select>
          </>
        )}
      </div>
      <form
        class="row"
        aria-label="Jump to an offset"
        onSubmit={(e) => {
          e.preventDefault();
          const target = normalizeOffset(jump);
          if (target === undefined) setFailure({ code: 'INVALID_INPUT', status: undefined, message: 'an offset is -1 or a number of at most 20 digits' });
          else moveTo(target);
        }}
      >
        <label for="jump-offset">Offset</label>
        <input id="jump-offset" inputMode="numeric" value={jump} onInput={(e) => setJump(e.currentTarget.value)} />
        <button type="submit">Jump to offset</button>
      </form>
      <ErrorBox failure={failure} />
      {page && (
        <>
          <p class="hint" aria-live="polite">
            From <span data-testid="page-offset">{page.offset}</span> to <span data-testid="page-next">{page.next}</span>:{' '}
            {kind === 'json' ? `${page.items.length} messages` : `${page.items.reduce((n, item) => n + (item.value as Uint8Array).length, 0)} bytes`}
            {page.atTail ? ' (the tail)' : ''}
          </p>
          <MessageList kind={kind} items={page.items} label="Messages of this page" />
        </>
      )}
    </section>
  );
}
