/**
 * A bucket's subscriptions (or the /v1/stream family's): each one's type, what it follows,
 * its status and wake generation, where it wakes (wake stream or webhook URL, as the token
 * may see them), and a delete that asks first. The first 100 are shown.
 */
import { useEffect, useState } from 'preact/hooks';
import type { SubscriptionSummary, Subscriptions } from '../../src/client/index.js';
import { failureOf, type Failure } from './api.js';
import { ConfirmButton, DataTable, ErrorBox, useAction } from './common.js';

const SHOWN = 100;

function SubscriptionRow({ sub, subscriptions, onDeleted }: { sub: SubscriptionSummary; subscriptions: Subscriptions; onDeleted: () => void }) {
  const { failure, run } = useAction();
  return (
    <tr>
      <td>{sub.id}</td>
      <td>{sub.type}</td>
      <td>{sub.pattern ?? '—'}</td>
      <td>{sub.status}</td>
      <td class="num">{sub.generation ?? '—'}</td>
      <td>{sub.wakeStream ?? sub.webhook?.url ?? '—'}</td>
      <td>
        <ErrorBox failure={failure} />
        <ConfirmButton label="Delete" question={`Delete subscription ${sub.id}?`} onConfirm={() => void run(() => subscriptions.delete(sub.id)).then((ok) => ok && onDeleted())} />
      </td>
    </tr>
  );
}

export function SubscriptionsTable({ subscriptions }: { subscriptions: Subscriptions }) {
  const [listed, setListed] = useState<{ subs: SubscriptionSummary[]; more: boolean } | null>(null);
  const [failure, setFailure] = useState<Failure | null>(null);
  const [version, setVersion] = useState(0);
  useEffect(() => {
    let live = true;
    subscriptions.list({ limit: SHOWN }).then(
      (page) => {
        if (!live) return;
        setListed({ subs: page.subscriptions, more: page.next !== null });
        setFailure(null);
      },
      (error: unknown) => live && setFailure(failureOf(error)),
    );
    return () => {
      live = false;
    };
  }, [subscriptions, version]);
  return (
    <section aria-labelledby="subscriptions-title">
      <h2 id="subscriptions-title">Subscriptions</h2>
      <ErrorBox failure={failure} />
      {listed && listed.subs.length === 0 && <p class="hint">No subscriptions.</p>}
      {listed && listed.subs.length > 0 && (
        <DataTable caption={listed.more ? `The first ${SHOWN} subscriptions` : 'Subscriptions'} columns={['Id', 'Type', 'Pattern', 'Status', 'Generation', 'Wakes', 'Actions']}>
          {listed.subs.map((sub) => (
            <SubscriptionRow key={sub.id} sub={sub} subscriptions={subscriptions} onDeleted={() => setVersion((v) => v + 1)} />
          ))}
        </DataTable>
      )}
    </section>
  );
}
