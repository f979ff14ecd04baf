/**
 * The first page: the server's buckets (`GET /`, a page at a time, each with its stream
 * count and the bytes its streams hold), and the /v1/stream family. A token that may not
 * list buckets sees why, and the buckets opened or created in this tab instead; any
 * other opens by its id.
 */
import { useEffect, useMemo, useState } from 'preact/hooks';
import { failureOf, knownBuckets, rememberBucket, useClient, type Failure } from './api.js';
import { ConfirmButton, DataTable, ErrorBox, useAction } from './common.js';
import { CreateStreamForm } from './create-stream.js';
import { Overview } from './overview.js';
import { SubscriptionsTable } from './subscriptions.js';
import { go, hrefOf } from './routes.js';

/** Buckets per page of the listing. */
export const BUCKETS_PER_PAGE = 50;

type Row = { id: string; streamCount: number | null; retainedBytes: number | null; failure: Failure | null };

/** A page of the listing: where it starts (undefined: the first), and the cursors of the pages before it. */
interface Position {
  after: string | undefined;
  before: Array<string | undefined>;
}

interface Listing {
  /**
   * The page these rows are: the caption and the paging buttons follow the page shown, not
   * the one asked for, which may still be loading.
   */
  position: Position;
  rows: Row[];
  next: string | null;
  /** The server's listing was refused: `rows` are this tab's buckets. */
  refused: Failure | null;
}

function BucketRow({ row, onDeleted }: { row: Row; onDeleted: () => void }) {
  const client = useClient();
  const { failure, run } = useAction();
  return (
    <tr>
      <td>
        <a href={hrefOf({ page: 'bucket', bucket: row.id })}>{row.id}</a>
      </td>
      <td class="num">{row.streamCount ?? '—'}</td>
      <td class="num">{row.retainedBytes ?? '—'}</td>
      <td>
        <ErrorBox failure={row.failure ?? failure} />
        <ConfirmButton
          label="Delete"
          question={`Delete bucket ${row.id}?`}
          onConfirm={() => void run(() => client.bucket(row.id).delete()).then((ok) => ok && onDeleted())}
        />
      </td>
    </tr>
  );
}

/** Each bucket's own view, for the bytes its streams hold (the listing gives counts only). */
async function withBytes(client: ReturnType<typeof useClient>, ids: Array<{ id: string; streamCount: number | null }>): Promise<Row[]> {
  return Promise.all(
    ids.map(async ({ id, streamCount }): Promise<Row> => {
      try {
        const info = await client.bucket(id).info();
        return { id, streamCount: info.streamCount, retainedBytes: info.retainedBytes ?? null, failure: null };
      } catch (error) {
        return { id, streamCount, retainedBytes: null, failure: failureOf(error) };
      }
    }),
  );
}

function useBuckets(position: Position, version: number): Listing | null {
  const client = useClient();
  const [listing, setListing] = useState<Listing | null>(null);
  useEffect(() => {
    let live = true;
    const load = async (): Promise<Listing> => {
      try {
        const page = await client.listBuckets({ limit: BUCKETS_PER_PAGE, ...(position.after === undefined ? {} : { after: position.after }) });
        return { position, rows: await withBytes(client, page.buckets), next: page.next, refused: null };
      } catch (error) {
        const known = knownBuckets().map((id) => ({ id, streamCount: null }));
        return { position, rows: await withBytes(client, known), next: null, refused: failureOf(error) };
      }
    };
    void load().then((next) => live && setListing(next));
    return () => {
      live = false;
    };
  }, [client, position, version]);
  return listing;
}

function OpenOrCreateBucket() {
  const client = useClient();
  const [id, setId] = useState('');
  const { failure, busy, run } = useAction();
  const create = async () => {
    const ok = await run(async () => {
      await client.bucket(id).create();
    });
    if (ok) {
      rememberBucket(id, true);
      go({ page: 'bucket', bucket: id });
    }
  };
  return (
    <form
      class="row"
      aria-label="Open or create a bucket"
      onSubmit={(e) => {
        e.preventDefault();
        rememberBucket(id, true);
        go({ page: 'bucket', bucket: id });
      }}
    >
      <label for="bucket-id">Bucket id</label>
      <input id="bucket-id" required pattern="[a-z0-9_\-]{4,64}" title="4 to 64 characters of a-z, 0-9, _ and -" value={id} onInput={(e) => setId(e.currentTarget.value)} />
      <button type="submit">Open bucket</button>
      <button type="button" disabled={busy || id === ''} onClick={() => void create()}>
        Create bucket
      </button>
      <ErrorBox failure={failure} />
    </form>
  );
}

function OpenV1Stream() {
  const [name, setName] = useState('');
  return (
    <form
      class="row"
      aria-label="Open a /v1/stream stream"
      onSubmit={(e) => {
        e.preventDefault();
        go({ page: 'stream', path: `v1/stream/${name}` });
      }}
    >
      <label for="v1-name">Stream name</label>
      <input id="v1-name" required value={name} onInput={(e) => setName(e.currentTarget.value)} />
      <button type="submit">Open stream</button>
    </form>
  );
}

function BucketPaging({ listing, moveTo }: { listing: Listing; moveTo: (position: Position) => void }) {
  const shown = listing.position;
  return (
    <div class="row">
      <button type="button" disabled={shown.before.length === 0} onClick={() => moveTo({ after: shown.before.at(-1), before: shown.before.slice(0, -1) })}>
        Previous buckets
      </button>
      <button type="button" disabled={listing.next === null} onClick={() => moveTo({ after: listing.next ?? undefined, before: [...shown.before, shown.after] })}>
        Next buckets
      </button>
    </div>
  );
}

export function BucketsPage() {
  const client = useClient();
  const v1Subscriptions = useMemo(() => client.subscriptions(), [client]);
  const [position, setPosition] = useState<Position>({ after: undefined, before: [] });
  const [version, setVersion] = useState(0);
  const listing = useBuckets(position, version);
  return (
    <>
      <Overview />
      <h2>Buckets</h2>
      <OpenOrCreateBucket />
      {listing?.refused && (
        <>
          <p class="hint">The server did not list its buckets for this token: below are the ones opened or created in this tab. Open any other by its id.</p>
          <ErrorBox failure={listing.refused} />
        </>
      )}
      {listing && listing.rows.length > 0 && (
        <DataTable caption={listing.refused ? 'Buckets of this tab' : `Buckets, page ${listing.position.before.length + 1}`} columns={['Bucket', 'Streams', 'Bytes', 'Actions']}>
          {listing.rows.map((row) => (
            <BucketRow
              key={row.id}
              row={row}
              onDeleted={() => {
                rememberBucket(row.id, false);
                setVersion((v) => v + 1);
              }}
            />
          ))}
        </DataTable>
      )}
      {listing && listing.rows.length === 0 && !listing.refused && <p>No buckets yet.</p>}
      {listing && !listing.refused && <BucketPaging listing={listing} moveTo={setPosition} />}
      <h2>The /v1/stream family</h2>
      <p class="hint">Streams without a bucket, as unmodified Durable Streams clients use them. The server does not list them: open one by name.</p>
      <OpenV1Stream />
      <CreateStreamForm parent="v1/stream" idLabel="New stream name" />
      <SubscriptionsTable subscriptions={v1Subscriptions} />
    </>
  );
}
