/** One bucket: what it holds, its streams (stream-table.tsx), a new stream, its subscriptions, and a delete. */
import { useEffect, useMemo, useState } from 'preact/hooks';
import type { BucketInfo } from '../../src/client/index.js';
import { failureOf, rememberBucket, useClient, type Failure } from './api.js';
import { ConfirmButton, ErrorBox, useAction } from './common.js';
import { CreateStreamForm } from './create-stream.js';
import { go } from './routes.js';
import { StreamTable, type Listing } from './stream-table.js';
import { SubscriptionsTable } from './subscriptions.js';

/** The bucket's own figures, read again with each new listing (a filter or a page). */
function useBucketInfo(bucket: string, listing: Listing) {
  const client = useClient();
  const [info, setInfo] = useState<BucketInfo | null>(null);
  const [failure, setFailure] = useState<Failure | null>(null);
  useEffect(() => {
    let live = true;
    client
      .bucket(bucket)
      .info()
      .then(
        (i) => {
          if (!live) return;
          setInfo(i);
          setFailure(null);
        },
        (error: unknown) => live && setFailure(failureOf(error)),
      );
    return () => {
      live = false;
    };
  }, [client, bucket, listing]);
  return { info, failure };
}

export function BucketPage({ bucket }: { bucket: string }) {
  const client = useClient();
  const subscriptions = useMemo(() => client.bucket(bucket).subscriptions(), [client, bucket]);
  const [listing, setListing] = useState<Listing>({ prefix: '', before: [], after: undefined });
  const [prefix, setPrefix] = useState('');
  const { info, failure } = useBucketInfo(bucket, listing);
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
      <StreamTable bucket={bucket} listing={listing} onListing={setListing} />
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
