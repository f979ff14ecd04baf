/**
 * Who writes a stream and who follows it: its producer records (`{stream}/producers`,
 * paged) and the subscriptions of its scope that follow it, by pattern or by link.
 */
import { useEffect, useState } from 'preact/hooks';
import type { ProducerPage, Subscription, Subscriptions } from '../../src/client/index.js';
import { globMatch } from '../../src/core/glob.js';
import { failureOf, useClient, type Failure } from './api.js';
import { DataTable, ErrorBox } from './common.js';

const PRODUCERS_PER_PAGE = 20;
/** Subscriptions of the scope looked at for the ones that follow the stream. */
const SUBSCRIPTIONS_LOOKED_AT = 100;

export function ProducersTable({ path }: { path: string }) {
  const client = useClient();
  const [before, setBefore] = useState<(string | undefined)[]>([]);
  const [after, setAfter] = useState<string | undefined>(undefined);
  const [page, setPage] = useState<ProducerPage | null>(null);
  const [failure, setFailure] = useState<Failure | null>(null);
  useEffect(() => {
    let live = true;
    client.streamProducers(path, { limit: PRODUCERS_PER_PAGE, ...(after === undefined ? {} : { after }) }).then(
      (p) => {
        if (!live) return;
        setPage(p);
        setFailure(null);
      },
      (error: unknown) => live && setFailure(failureOf(error)),
    );
    return () => {
      live = false;
    };
  }, [client, path, after]);
  return (
    <section aria-labelledby="producers-title">
      <h2 id="producers-title">Producers</h2>
      <ErrorBox failure={failure} />
      {page && page.producers.length === 0 && before.length === 0 && <p class="hint">No producer has written to this stream (or its records were forgotten).</p>}
      {page && page.producers.length > 0 && (
        <DataTable caption={`Producers, page ${before.length + 1}`} columns={['Producer id', 'Epoch', 'Last seq', 'Last write (UTC)']}>
          {page.producers.map((p) => (
            <tr key={p.id}>
              <td>{p.id}</td>
              <td class="num">{p.epoch}</td>
              <td class="num">{p.lastSeq}</td>
              <td>{p.lastWriteAt}</td>
            </tr>
          ))}
        </DataTable>
      )}
      {page && (page.next !== null || before.length > 0) && (
        <div class="row" role="group" aria-label="Pages of producers">
          <button type="button" disabled={before.length === 0} onClick={() => (setAfter(before[before.length - 1]), setBefore(before.slice(0, -1)))}>
            Previous producers
          </button>
          <button type="button" disabled={page.next === null} onClick={() => (setBefore([...before, after]), setAfter(page.next ?? undefined))}>
            Next producers
          </button>
        </div>
      )}
    </section>
  );
}


interface Following {
  sub: Subscription;
  how: 'pattern' | 'link';
}

/** The scope's subscriptions (the first SUBSCRIPTIONS_LOOKED_AT) that follow `relative`, each read whole for its links. */
async function followersOf(subscriptions: Subscriptions, relative: string): Promise<{ following: Following[]; more: boolean }> {
  const listed = await subscriptions.list({ limit: SUBSCRIPTIONS_LOOKED_AT });
  const whole = await Promise.all(listed.subscriptions.map((s) => subscriptions.get(s.id)));
  const following = whole.flatMap((sub): Following[] => {
    if (sub.pattern !== undefined && globMatch(sub.pattern, relative)) return [{ sub, how: 'pattern' }];
    return sub.streams.some((l) => l.path === relative) ? [{ sub, how: 'link' }] : [];
  });
  return { following, more: listed.next !== null };
}

export function FollowersTable({ path }: { path: string }) {
  const client = useClient();
  const [found, setFound] = useState<{ following: Following[]; more: boolean } | null>(null);
  const [failure, setFailure] = useState<Failure | null>(null);
  const v1 = path.startsWith('v1/stream/');
  const relative = v1 ? path.slice('v1/stream/'.length) : path.split('/').slice(1).join('/');
  useEffect(() => {
    let live = true;
    const subscriptions = v1 ? client.subscriptions() : client.bucket(path.split('/')[0]!).subscriptions();
    followersOf(subscriptions, relative).then(
      (f) => {
        if (!live) return;
        setFound(f);
        setFailure(null);
      },
      (error: unknown) => live && setFailure(failureOf(error)),
    );
    return () => {
      live = false;
    };
  }, [client, path]);
  return (
    <section aria-labelledby="followers-title">
      <h2 id="followers-title">Subscriptions following it</h2>
      <ErrorBox failure={failure} />
      {found && found.following.length === 0 && <p class="hint">No subscription follows this stream.</p>}
      {found && found.following.length > 0 && (
        <DataTable caption="Subscriptions following this stream" columns={['Id', 'Type', 'Follows by', 'Status', 'Streams pending', 'Wakes']}>
          {found.following.map(({ sub, how }) => (
            <tr key={sub.id}>
              <td>{sub.id}</td>
              <td>{sub.type}</td>
              <td>{how === 'pattern' ? `pattern ${sub.pattern}` : 'link'}</td>
              <td>{sub.status}</td>
              <td class="num">{`${sub.streamsPending}${sub.streamsTruncated ? '+' : ''}`}</td>
              <td>{sub.wakeStream ?? sub.webhook?.url ?? '—'}</td>
            </tr>
          ))}
        </DataTable>
      )}
      {found?.more && <p class="hint">Only the first {SUBSCRIPTIONS_LOOKED_AT} subscriptions of the scope were looked at.</p>}
    </section>
  );
}
