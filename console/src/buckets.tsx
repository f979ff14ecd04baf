/**
 * The first page: buckets and the /v1/stream family. The server has no route that lists
 * buckets, so the page lists the buckets opened or created in this session, each with
 * its stream count, and lets any other be opened by name.
 */
import { useEffect, useState } from 'preact/hooks';
import { failureOf, knownBuckets, rememberBucket, useClient, type Failure } from './api.js';
import { ConfirmButton, ErrorBox, useAction } from './common.js';
import { CreateStreamForm } from './create-stream.js';
import { go, hrefOf } from './routes.js';

type Row = { id: string; streamCount: number | null; failure: Failure | null };

function BucketRow({ row, onDeleted }: { row: Row; onDeleted: () => void }) {
  const client = useClient();
  const { failure, run } = useAction();
  return (
    <tr>
      <td>
        <a href={hrefOf({ page: 'bucket', bucket: row.id })}>{row.id}</a>
      </td>
      <td class="num">{row.streamCount ?? '—'}</td>
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

function useBucketRows(): [Row[], () => void] {
  const client = useClient();
  const [rows, setRows] = useState<Row[]>([]);
  const [version, setVersion] = useState(0);
  useEffect(() => {
    let live = true;
    const ids = knownBuckets();
    void Promise.all(
      ids.map(async (id): Promise<Row> => {
        try {
          return { id, streamCount: (await client.bucket(id).info()).streamCount, failure: null };
        } catch (error) {
          return { id, streamCount: null, failure: failureOf(error) };
        }
      }),
    ).then((next) => live && setRows(next));
    return () => {
      live = false;
    };
  }, [client, version]);
  return [rows, () => setVersion((v) => v + 1)];
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

export function BucketsPage() {
  const [rows, reload] = useBucketRows();
  return (
    <>
      <h1>Buckets</h1>
      <p class="hint">The server does not list buckets: this page lists the ones opened or created in this tab. Open any other by its id.</p>
      <OpenOrCreateBucket />
      {rows.length > 0 && (
        <table>
          <caption>Buckets of this session</caption>
          <thead>
            <tr>
              <th scope="col">Bucket</th>
              <th scope="col">Streams</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((row) => (
              <BucketRow
                key={row.id}
                row={row}
                onDeleted={() => {
                  rememberBucket(row.id, false);
                  reload();
                }}
              />
            ))}
          </tbody>
        </table>
      )}
      <h2>The /v1/stream family</h2>
      <p class="hint">Streams without a bucket, as unmodified Durable Streams clients use them. The server does not list them: open one by name.</p>
      <OpenV1Stream />
      <CreateStreamForm parent="v1/stream" idLabel="New stream name" />
    </>
  );
}
