/** One bucket: its streams, filtered by prefix and paged with the listing's `after` cursor. */
import { useEffect, useMemo, useState } from 'preact/hooks';
import type { BucketInfo, StreamListing } from '../../src/client/index.js';
import { failureOf, rememberBucket, useClient, type Failure } from './api.js';
import { ConfirmButton, ErrorBox, useAction } from './common.js';
import { CreateStreamForm } from './create-stream.js';
import { go, hrefOf } from './routes.js';
import { SubscriptionsTable } from './subscriptions.js';

export const STREAMS_PER_PAGE = 50;

interface Listing {
  prefix: string;
  /** The `after` cursor of each page before this one, so Previous can go back. */
  before: (string | undefined)[];
  after: string | undefined;
}

/** Names the filter as well as the page, so a reader (and a test) can tell the new listing from the one it replaces. */
const listLabelOf = (l: Listing): string =>
  `Streams${l.prefix === '' ? '' : ` starting with "${l.prefix}"`}, page ${l.before.length + 1}`;

const previousOf = (l: Listing): Listing => ({ ...l, before: l.before.slice(0, -1), after: l.before[l.before.length - 1] });

function useListing(bucket: string, listing: Listing) {
  const client = useClient();
  /** The page shown, with the listing it answers (the next one may still be loading). */
  const [page, setPage] = useState<{ listing: Listing; streams: StreamListing } | null>(null);
  const [info, setInfo] = useState<BucketInfo | null>(null);
  const [failure, setFailure] = useState<Failure | null>(null);
  useEffect(() => {
    let live = true;
    const handle = client.bucket(bucket);
    const options = { prefix: listing.prefix, limit: STREAMS_PER_PAGE, ...(listing.after === undefined ? {} : { after: listing.after }) };
    Promise.all([handle.info(), handle.list(options)]).then(
      ([i, p]) => {
        if (!live) return;
        setInfo(i);
        setPage({ listing, streams: p });
        setFailure(null);
      },
      (error: unknown) => live && setFailure(failureOf(error)),
    );
    return () => {
      live = false;
    };
  }, [client, bucket, listing]);
  return { page, info, failure };
}

export function BucketPage({ bucket }: { bucket: string }) {
  const client = useClient();
  const subscriptions = useMemo(() => client.bucket(bucket).subscriptions(), [client, bucket]);
  const [listing, setListing] = useState<Listing>({ prefix: '', before: [], after: undefined });
  const [prefix, setPrefix] = useState('');
  const { page, info, failure } = useListing(bucket, listing);
  const deletion = useAction();
  return (
    <>
      <nav aria-label="Breadcrumb">
        <a href="#/">Buckets</a> / <span>{bucket}</span>
      </nav>
      <h1>Bucket {bucket}</h1>
      <ErrorBox failure={failure} />
      {info && (
        <p>
          <span data-testid="stream-count">{info.streamCount}</span> streams, created {info.createdAt}
        </p>
      )}
      <form
        class="row"
        role="search"
        aria-label="Filter streams"
        onSubmit={(e) => {
          e.preventDefault();
          setListing({ prefix, before: [], after: undefined });
        }}
      >
        <label for="prefix">Stream id prefix</label>
        <input id="prefix" value={prefix} onInput={(e) => setPrefix(e.currentTarget.value)} />
        <button type="submit">Filter</button>
      </form>
      {page && (
        <>
          <ul class="streams" aria-label={listLabelOf(page.listing)}>
            {page.streams.streams.map((id) => (
              <li key={id}>
                <a href={hrefOf({ page: 'stream', path: `${bucket}/${id}` })}>{id}</a>
              </li>
            ))}
          </ul>
          {page.streams.streams.length === 0 && (
            <p class="hint">No streams{page.listing.prefix === '' ? '' : ` starting with "${page.listing.prefix}"`}.</p>
          )}
          <div class="row" role="group" aria-label="Pages of streams">
            <button type="button" disabled={page.listing.before.length === 0} onClick={() => setListing(previousOf(page.listing))}>
              Previous page
            </button>
            <span>Page {page.listing.before.length + 1}</span>
            <button
              type="button"
              disabled={page.streams.next === null}
              onClick={() => setListing({ ...page.listing, before: [...page.listing.before, page.listing.after], after: page.streams.next ?? undefined })}
            >
              Next page
            </button>
          </div>
        </>
      )}
      <h2>New stream</h2>
      <CreateStreamForm parent={bucket} idLabel="New stream id" />
      <SubscriptionsTable subscriptions={subscriptions} />
      <h2>Bucket</h2>
      <ErrorBox failure={deletion.failure} />
      <ConfirmButton
        label="Delete bucket"
        question={`Delete bucket ${bucket}? The server refuses while it holds streams.`}
        onConfirm={() =>
          void deletion.run(() => client.bucket(bucket).delete()).then((ok) => {
            if (!ok) return;
            rememberBucket(bucket, false);
            go({ page: 'buckets' });
          })
        }
      />
    </>
  );
}
