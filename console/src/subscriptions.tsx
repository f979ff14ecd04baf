/**
 * A bucket's subscriptions (or the /v1/stream family's): each one's type, what it follows,
 * its status and wake generation, how many of its streams hold unacknowledged data, the
 * wake in flight and, for a webhook, its delivery (attempts, next attempt, last error as
 * the token may see it), where it wakes (wake stream or webhook URL, as the token may see
 * them), and a delete that asks first; below, the rotation of the server's webhook signing
 * key (admin on `*`), which asks first too. The first 100 are shown. The server keeps no
 * time of the last delivery, so none is shown.
 */
import { useEffect, useState } from 'preact/hooks';
import type { SubscriptionSummary, Subscriptions } from '../../src/client/index.js';
import { failureOf, type Failure } from './api.js';
import { ConfirmButton, DataTable, ErrorBox, useAction } from './common.js';

const SHOWN = 100;

/** Streams with data past their ack, from the subscription read whole (the listing leaves streams out). */
function usePending(subscriptions: Subscriptions, id: string): string {
  const [pending, setPending] = useState('…');
  useEffect(() => {
    let live = true;
    subscriptions.get(id).then(
      (sub) => live && setPending(`${sub.streamsPending}${sub.streamsTruncated ? '+' : ''} of ${sub.streams.length}${sub.streamsTruncated ? '+' : ''}`),
      () => live && setPending('—'),
    );
    return () => {
      live = false;
    };
  }, [subscriptions, id]);
  return pending;
}

function wakeText(sub: SubscriptionSummary): string {
  const wake = sub.wake;
  if (wake === undefined) return 'none';
  const delivery = wake.delivery ? `, attempt ${wake.delivery.attempts}, next at ${wake.delivery.nextAttemptAt}` : '';
  return `${wake.holder === null ? 'unclaimed' : `held by ${wake.holder}`}${delivery}`;
}

function lastErrorText(sub: SubscriptionSummary): string {
  const delivery = sub.wake?.delivery;
  if (delivery === undefined) return '—';
  // A read token is not told the error (it may quote the webhook URL's secret path).
  if (delivery.lastError === undefined) return 'hidden from this token';
  return delivery.lastError ?? 'none';
}

function SubscriptionRow({ sub, subscriptions, onDeleted }: { sub: SubscriptionSummary; subscriptions: Subscriptions; onDeleted: () => void }) {
  const { failure, run } = useAction();
  const pending = usePending(subscriptions, sub.id);
  return (
    <tr>
      <td>{sub.id}</td>
      <td>{sub.type}</td>
      <td>{sub.pattern ?? '—'}</td>
      <td>{sub.status}</td>
      <td class="num">{sub.generation ?? '—'}</td>
      <td class="num" data-testid={`pending-${sub.id}`}>
        {pending}
      </td>
      <td>{wakeText(sub)}</td>
      <td>{lastErrorText(sub)}</td>
      <td>{sub.wakeStream ?? sub.webhook?.url ?? '—'}</td>
      <td>
        <ErrorBox failure={failure} />
        <ConfirmButton label="Delete" question={`Delete subscription ${sub.id}?`} onConfirm={() => void run(() => subscriptions.delete(sub.id)).then((ok) => ok && onDeleted())} />
      </td>
    </tr>
  );
}

function RotateKey({ subscriptions }: { subscriptions: Subscriptions }) {
  const { failure, run } = useAction();
  const [kid, setKid] = useState('');
  return (
    <div class="row">
      <ConfirmButton
        label="Rotate signing key"
        question="Rotate the server's webhook signing key? Receivers fetch the new key from the JWK Set; the old one still verifies what it signed."
        onConfirm={() => void run(async () => setKid((await subscriptions.rotateSigningKey()).kid))}
      />
      <span role="status">{kid === '' ? '' : `New signing key: ${kid}`}</span>
      <ErrorBox failure={failure} />
    </div>
  );
}

const COLUMNS = ['Id', 'Type', 'Pattern', 'Status', 'Generation', 'Streams pending', 'Wake in flight', 'Last delivery error', 'Wakes', 'Actions'];

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
        <DataTable caption={listed.more ? `The first ${SHOWN} subscriptions` : 'Subscriptions'} columns={COLUMNS}>
          {listed.subs.map((sub) => (
            <SubscriptionRow key={sub.id} sub={sub} subscriptions={subscriptions} onDeleted={() => setVersion((v) => v + 1)} />
          ))}
        </DataTable>
      )}
      <RotateKey subscriptions={subscriptions} />
    </section>
  );
}
