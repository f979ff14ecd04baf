/** The form that creates a stream: in a bucket, or in the /v1/stream family. */
import { useState } from 'preact/hooks';
import { useClient } from './api.js';
import { ErrorBox, useAction } from './common.js';
import { go } from './routes.js';

const CONTENT_TYPES = ['application/json', 'text/plain', 'application/octet-stream'];

export function CreateStreamForm({ parent, idLabel }: { parent: string; idLabel: string }) {
  const client = useClient();
  const [id, setId] = useState('');
  const [contentType, setContentType] = useState(CONTENT_TYPES[0]!);
  const [ttl, setTtl] = useState('');
  const { failure, setFailure, busy, run } = useAction();
  const prefix = parent.replace(/[^a-z0-9]+/gi, '-');
  const submit = async (e: Event) => {
    e.preventDefault();
    if (ttl !== '' && !/^\d{1,10}$/.test(ttl)) {
      setFailure({ code: 'INVALID_INPUT', status: undefined, message: 'the TTL is a whole number of seconds' });
      return;
    }
    const path = `${parent}/${id}`;
    const ok = await run(async () => {
      await client.stream(path).create({ contentType, ...(ttl === '' ? {} : { ttlSeconds: Number(ttl) }) });
    });
    if (ok) go({ page: 'stream', path });
  };
  return (
    <form class="row" onSubmit={submit} aria-label="Create a stream">
      <label for={`${prefix}-new-stream`}>{idLabel}</label>
      <input id={`${prefix}-new-stream`} required value={id} onInput={(e) => setId(e.currentTarget.value)} />
      <label for={`${prefix}-new-type`}>Content type</label>
      <select id={`${prefix}-new-type`} value={contentType} onChange={(e) => setContentType(e.currentTarget.value)}>
        {CONTENT_TYPES.map((t) => (
          <option key={t} value={t}>
            {t}
          </option>
        ))}
      </select>
      <label for={`${prefix}-new-ttl`}>TTL (seconds, optional)</label>
      <input id={`${prefix}-new-ttl`} inputMode="numeric" size={8} value={ttl} onInput={(e) => setTtl(e.currentTarget.value)} />
      <button type="submit" disabled={busy}>
        Create stream
      </button>
      <ErrorBox failure={failure} />
    </form>
  );
}
