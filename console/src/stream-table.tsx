/**
 * A bucket's streams, a page at a time, each with its content type, tail, bytes, messages
 * and a sparkline of its growth. The figures come from the listing itself
 * (`?details=true`): one request per page, answered from the streams' states, not a stats
 * call per stream. rill stores no last-append time, so the table shows when this page saw
 * the tail move, from its own polls (every STREAM_POLL_MS), as it draws the sparkline.
 * Sorting orders the page shown; the server pages by name.
 */
import { useEffect, useState } from 'preact/hooks';
import type { StreamDetails } from '../../src/client/index.js';
import { failureOf, useClient, type Failure } from './api.js';
import { DataTable, ErrorBox } from './common.js';
import { hrefOf } from './routes.js';

export const STREAMS_PER_PAGE = 50;
export const STREAM_POLL_MS = 2000;
/** Rates kept per stream for its sparkline: a minute at one poll each two seconds. */
const MAX_RATES = 30;

export interface Listing {
  prefix: string;
  /** The `after` cursor of each page before this one, so Previous can go back. */
  before: (string | undefined)[];
  after: string | undefined;
}

export type SortKey = 'name' | 'size' | 'activity';

/** What this page saw of one stream across its polls. */
interface Seen {
  bytes: number;
  atMs: number;
  /** Bytes per second between consecutive polls, oldest first. */
  rates: number[];
  /** When a poll first saw the tail past where the one before saw it; null until then. */
  movedAtMs: number | null;
}

/** Names the filter as well as the page, so a reader (and a test) can tell the new listing from the one it replaces. */
export const listLabelOf = (l: Listing): string => `Streams${l.prefix === '' ? '' : ` starting with "${l.prefix}"`}, page ${l.before.length + 1}`;

export const previousOf = (l: Listing): Listing => ({ ...l, before: l.before.slice(0, -1), after: l.before[l.before.length - 1] });

function observe(seen: Map<string, Seen>, streams: StreamDetails[], nowMs: number): Map<string, Seen> {
  const next = new Map<string, Seen>();
  for (const s of streams) {
    const before = seen.get(s.id);
    if (before === undefined) {
      next.set(s.id, { bytes: s.bytes, atMs: nowMs, rates: [], movedAtMs: null });
      continue;
    }
    const seconds = Math.max((nowMs - before.atMs) / 1000, 0.001);
    // Retention can shrink what is held: growth is never negative.
    const rate = Math.max(0, s.bytes - before.bytes) / seconds;
    next.set(s.id, { bytes: s.bytes, atMs: nowMs, rates: [...before.rates, rate].slice(-MAX_RATES), movedAtMs: s.bytes > before.bytes ? nowMs : before.movedAtMs });
  }
  return next;
}

/** Polls the page of the listing; `seen` restarts with each new listing. */
function usePolledPage(bucket: string, listing: Listing) {
  const client = useClient();
  const [page, setPage] = useState<{ listing: Listing; streams: StreamDetails[]; next: string | null } | null>(null);
  const [seen, setSeen] = useState<Map<string, Seen>>(new Map());
  const [failure, setFailure] = useState<Failure | null>(null);
  useEffect(() => {
    let live = true;
    const handle = client.bucket(bucket);
    const options = { prefix: listing.prefix, limit: STREAMS_PER_PAGE, ...(listing.after === undefined ? {} : { after: listing.after }) };
    let known = new Map<string, Seen>();
    const poll = () =>
      handle.listDetails(options).then(
        (p) => {
          if (!live) return;
          known = observe(known, p.streams, Date.now());
          setSeen(known);
          setPage({ listing, streams: p.streams, next: p.next });
          setFailure(null);
        },
        (error: unknown) => live && setFailure(failureOf(error)),
      );
    void poll();
    const timer = setInterval(() => void poll(), STREAM_POLL_MS);
    return () => {
      live = false;
      clearInterval(timer);
    };
  }, [client, bucket, listing]);
  return { page, seen, failure };
}

const SPARK_WIDTH = 80;
const SPARK_HEIGHT = 18;

function Sparkline({ id, rates }: { id: string; rates: number[] }) {
  const top = Math.max(1, ...rates);
  const step = SPARK_WIDTH / Math.max(1, MAX_RATES - 1);
  // The latest rate at the right edge, as the overview's charts draw time.
  const points = rates.map((r, i) => `${(SPARK_WIDTH - (rates.length - 1 - i) * step).toFixed(1)},${(SPARK_HEIGHT - 1 - (r / top) * (SPARK_HEIGHT - 2)).toFixed(1)}`).join(' ');
  const latest = rates.at(-1) ?? 0;
  return (
    <svg width={SPARK_WIDTH} height={SPARK_HEIGHT} role="img" aria-label={`${id} grows ${Math.round(latest)} bytes/s now, up to ${Math.round(top)} in the last ${rates.length} polls`}>
      <polyline data-testid={`spark-${id}`} points={points} fill="none" stroke="#1f3a5f" stroke-width="1.5" />
    </svg>
  );
}

const activityOf = (seen: Seen | undefined): number => seen?.rates.at(-1) ?? 0;

export function sortStreams(streams: StreamDetails[], seen: Map<string, Seen>, key: SortKey): StreamDetails[] {
  if (key === 'name') return streams;
  const sorted = [...streams];
  // Ties keep the server's (name) order: Array.prototype.sort is stable.
  if (key === 'size') sorted.sort((a, b) => b.bytes - a.bytes);
  else sorted.sort((a, b) => activityOf(seen.get(b.id)) - activityOf(seen.get(a.id)) || (seen.get(b.id)?.movedAtMs ?? 0) - (seen.get(a.id)?.movedAtMs ?? 0));
  return sorted;
}

const timeOf = (ms: number | null): string => (ms === null ? 'not seen' : new Date(ms).toISOString().slice(11, 19));

function StreamRow({ bucket, stream, seen }: { bucket: string; stream: StreamDetails; seen: Seen | undefined }) {
  return (
    <tr>
      <td>
        <a href={hrefOf({ page: 'stream', path: `${bucket}/${stream.id}` })}>{stream.id}</a>
      </td>
      <td>{stream.contentType}</td>
      <td class="num mono">{stream.tail.replace(/^0+(?=\d)/, '')}</td>
      <td class="num">{stream.bytes.toLocaleString('en')}</td>
      <td class="num">{stream.messages.toLocaleString('en')}</td>
      <td>{timeOf(seen?.movedAtMs ?? null)}</td>
      <td>
        <Sparkline id={stream.id} rates={seen?.rates ?? []} />
      </td>
    </tr>
  );
}

const COLUMNS = ['Stream', 'Content type', 'Tail', 'Bytes', 'Messages', 'Tail moved (seen here, UTC)', 'Growth'];

export function StreamTable({ bucket, listing, onListing }: { bucket: string; listing: Listing; onListing: (l: Listing) => void }) {
  const { page, seen, failure } = usePolledPage(bucket, listing);
  const [sort, setSort] = useState<SortKey>('name');
  return (
    <section aria-labelledby="streams-title">
      <h2 id="streams-title">Streams</h2>
      <ErrorBox failure={failure} />
      {page && (
        <>
          <div class="row">
            <label for="stream-sort">Sort this page by</label>
            <select id="stream-sort" value={sort} onChange={(e) => setSort(e.currentTarget.value as SortKey)}>
              <option value="name">name</option>
              <option value="size">size (bytes held)</option>
              <option value="activity">activity (growth now)</option>
            </select>
          </div>
          {page.streams.length === 0 ? (
            <p class="hint">No streams{page.listing.prefix === '' ? '' : ` starting with "${page.listing.prefix}"`}.</p>
          ) : (
            <DataTable caption={listLabelOf(page.listing)} columns={COLUMNS}>
              {sortStreams(page.streams, seen, sort).map((s) => (
                <StreamRow key={s.id} bucket={bucket} stream={s} seen={seen.get(s.id)} />
              ))}
            </DataTable>
          )}
          <div class="row" role="group" aria-label="Pages of streams">
            <button type="button" disabled={page.listing.before.length === 0} onClick={() => onListing(previousOf(page.listing))}>
              Previous page
            </button>
            <span>Page {page.listing.before.length + 1}</span>
            <button
              type="button"
              disabled={page.next === null}
              onClick={() => onListing({ ...page.listing, before: [...page.listing.before, page.listing.after], after: page.next ?? undefined })}
            >
              Next page
            </button>
          </div>
        </>
      )}
    </section>
  );
}
