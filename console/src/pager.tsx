/**
 * The stream's messages, a page at a time: forward with the offset after the page, back
 * through the pages seen before, from any offset typed in, from the tail, or (JSON) from
 * a record ordinal, the server's `record=` read, whose pages show each record's number.
 * A search looks through the page loaded, not the stream.
 */
import { useEffect, useState } from 'preact/hooks';
import type { StreamHandle } from '../../src/client/index.js';
import { failureOf, type Failure } from './api.js';
import { ErrorBox } from './common.js';
import { itemsOf, MessageList, searchableOf, type Item, type Kind } from './messages.js';

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

/** Where a page starts. */
export type Source = { by: 'offset'; offset: string } | { by: 'record'; record: number } | { by: 'tail' };

export async function readPage(handle: StreamHandle, kind: Kind, offset: string, size: number, signal: AbortSignal): Promise<Page> {
  for await (const batch of handle.read({ offset, maxBytes: PAGE_BYTES[kind], heartbeats: true, signal })) {
    const items = itemsOf(batch.messages);
    const cut = kind === 'json' && items.length > size ? batch.messages[size - 1]!.nextOffset : undefined;
    if (cut !== undefined) return { offset: batch.offset, next: cut, items: items.slice(0, size), atTail: false };
    return { offset: batch.offset, next: batch.nextOffset, items, atTail: batch.upToDate };
  }
  return { offset, next: offset, items: [], atTail: true };
}

const pad = (n: bigint): string => n.toString().padStart(20, '0');
const encoder = new TextEncoder();

/**
 * A page of JSON records from `record` (or the last `size`). The answer names the offset
 * after the page; each record is stored as its compact text and a newline, so the offsets
 * of the records before it follow from their lengths.
 */
async function readRecordPage(handle: StreamHandle, start: { record: number } | { tailRecords: number }, size: number, signal: AbortSignal): Promise<Page> {
  for await (const batch of handle.recordBatches({ ...start, maxRecords: size, heartbeats: true, signal })) {
    let at = BigInt(batch.nextOffset);
    const offsets = batch.records.map((r) => BigInt(encoder.encode(r.text).length + 1)).reverse().map((length) => pad((at -= length)));
    offsets.reverse();
    const items = batch.records.map((r, i) => ({ offset: offsets[i], value: r.value, record: r.record }));
    return { offset: pad(at), next: batch.nextOffset, items, atTail: batch.upToDate };
  }
  return { offset: '', next: '', items: [], atTail: true };
}

/** The tail page: the last `size` records of a JSON stream, or the last page's worth of bytes of another. */
async function readTail(handle: StreamHandle, kind: Kind, size: number, signal: AbortSignal): Promise<Page> {
  if (kind === 'json') return readRecordPage(handle, { tailRecords: size }, size, signal);
  const info = await handle.head({ signal });
  const from = BigInt(info.nextOffset) - BigInt(PAGE_BYTES[kind]);
  const earliest = BigInt(info.earliestOffset ?? '0');
  return readPage(handle, kind, pad(from > earliest ? from : earliest), size, signal);
}

function load(handle: StreamHandle, kind: Kind, source: Source, size: number, signal: AbortSignal): Promise<Page> {
  if (source.by === 'offset') return readPage(handle, kind, source.offset, size, signal);
  if (source.by === 'record') return readRecordPage(handle, { record: source.record }, size, signal);
  return readTail(handle, kind, size, signal);
}

/** An offset as typed: the 20-digit form, a plain number, or -1 for the start. */
export function normalizeOffset(text: string): string | undefined {
  const t = text.trim();
  if (t === '-1') return t;
  return /^\d{1,20}$/.test(t) ? t.padStart(20, '0') : undefined;
}

function JumpForms({ kind, onJump, onInvalid }: { kind: Kind; onJump: (source: Source) => void; onInvalid: (message: string) => void }) {
  const [jump, setJump] = useState('');
  const [record, setRecord] = useState('');
  return (
    <>
      <form
        class="row"
        aria-label="Jump to an offset"
        onSubmit={(e) => {
          e.preventDefault();
          const target = normalizeOffset(jump);
          if (target === undefined) onInvalid('an offset is -1 or a number of at most 20 digits');
          else onJump({ by: 'offset', offset: target });
        }}
      >
        <label for="jump-offset">Offset</label>
        <input id="jump-offset" inputMode="numeric" value={jump} onInput={(e) => setJump(e.currentTarget.value)} />
        <button type="submit">Jump to offset</button>
        <button type="button" onClick={() => onJump({ by: 'tail' })}>
          Go to the tail
        </button>
      </form>
      {kind === 'json' && (
        <form
          class="row"
          aria-label="Jump to a record"
          onSubmit={(e) => {
            e.preventDefault();
            if (!/^\d{1,15}$/.test(record.trim())) onInvalid('a record is its ordinal: 0 for the first, 1 for the next');
            else onJump({ by: 'record', record: Number(record.trim()) });
          }}
        >
          <label for="jump-record">Record number</label>
          <input id="jump-record" inputMode="numeric" value={record} onInput={(e) => setRecord(e.currentTarget.value)} />
          <button type="submit">Jump to record</button>
        </form>
      )}
    </>
  );
}

function PageView({ kind, page, query }: { kind: Kind; page: Page; query: string }) {
  const needle = query.trim().toLowerCase();
  const shown = needle === '' ? page.items : page.items.filter((item) => searchableOf(kind, item).toLowerCase().includes(needle));
  return (
    <>
      <p class="hint" aria-live="polite">
        From <span data-testid="page-offset">{page.offset}</span> to <span data-testid="page-next">{page.next}</span>:{' '}
        {kind === 'json' ? `${page.items.length} messages` : `${page.items.reduce((n, item) => n + (item.value as Uint8Array).length, 0)} bytes`}
        {page.atTail ? ' (the tail)' : ''}
      </p>
      {needle !== '' && (
        <p role="status" data-testid="search-count">
          {shown.length} of {page.items.length} {kind === 'json' ? 'messages' : 'reads'} on this page contain "{query.trim()}"
        </p>
      )}
      <MessageList kind={kind} items={shown} label="Messages of this page" />
    </>
  );
}

export function MessagePager({ handle, kind, start }: { handle: StreamHandle; kind: Kind; start: string }) {
  const [source, setSource] = useState<Source>({ by: 'offset', offset: start });
  const [history, setHistory] = useState<Source[]>([]);
  const [size, setSize] = useState(PAGE_SIZES[1]!);
  const [page, setPage] = useState<Page | null>(null);
  const [failure, setFailure] = useState<Failure | null>(null);
  const [reload, setReload] = useState(0);
  const [query, setQuery] = useState('');
  useEffect(() => {
    const ac = new AbortController();
    load(handle, kind, source, size, ac.signal).then(
      (p) => {
        setPage(p);
        setFailure(null);
      },
      (error: unknown) => !ac.signal.aborted && setFailure(failureOf(error)),
    );
    return () => ac.abort();
  }, [handle, kind, source, size, reload]);
  const moveTo = (next: Source) => {
    setHistory([...history, source]);
    setSource(next);
  };
  return (
    <section aria-labelledby="messages-title">
      <h2 id="messages-title">Messages</h2>
      <div class="row" role="group" aria-label="Page through messages">
        <button type="button" disabled={history.length === 0} onClick={() => (setSource(history[history.length - 1]!), setHistory(history.slice(0, -1)))}>
          Previous
        </button>
        <button type="button" disabled={page === null || page.atTail} onClick={() => page && moveTo({ by: 'offset', offset: page.next })}>
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
      <JumpForms kind={kind} onJump={moveTo} onInvalid={(message) => setFailure({ code: 'INVALID_INPUT', status: undefined, message })} />
      <div class="row" role="search" aria-label="Search this page">
        <label for="page-search">Find on this page</label>
        <input id="page-search" type="search" value={query} onInput={(e) => setQuery(e.currentTarget.value)} />
      </div>
      <ErrorBox failure={failure} />
      {page && <PageView kind={kind} page={page} query={query} />}
    </section>
  );
}
