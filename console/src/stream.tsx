/** One stream: what HEAD tells, its attributes, who writes and follows it, its messages, a live tail and the writes. */
import { useEffect, useMemo, useState } from 'preact/hooks';
import type { StreamHandle, StreamInfo, StreamStats } from '../../src/client/index.js';
import { failureOf, useClient, type Failure } from './api.js';
import { ConfirmButton, ErrorBox, useAction } from './common.js';
import { kindOf, type Kind } from './messages.js';
import { MessagePager } from './pager.js';
import { go, hrefOf } from './routes.js';
import { FollowersTable, ProducersTable } from './stream-people.js';
import { LiveTail } from './tail.js';

/**
 * Where the stream's history lies when the server has a cold tier: the offsets in object
 * storage (as byte positions) and the hot ones after them, up to the tail. None without one.
 */
export function tierRows(stats: StreamStats): [string, string][] {
  const cold = stats.cold;
  if (cold === undefined) return [];
  const [start, end, tail] = [cold.start, cold.end, stats.tail].map(Number);
  const held = cold.segments === 0 ? 'none yet' : `${start} – ${end} (${cold.segments} ${cold.segments === 1 ? 'segment' : 'segments'}, ${cold.bytes.toLocaleString('en')} bytes)`;
  return [
    ['Cold (object storage)', held],
    ['Hot', `${end} – ${tail}`],
  ];
}

/** What HEAD tells, and the stream's figures (`{stream}/stats`) when the token may read them. */
function InfoTable({ info, stats }: { info: StreamInfo; stats: StreamStats | null }) {
  const figures: [string, string][] = stats
    ? [
        ['Bytes held', stats.bytes.toLocaleString('en')],
        ['Messages held', stats.messages.toLocaleString('en')],
        ['Producers', String(stats.producers)],
        ['Live readers now', String(stats.liveReaders)],
        ...tierRows(stats),
      ]
    : [];
  const rows: [string, string][] = [
    ['Content type', info.contentType],
    ['Tail offset', info.nextOffset],
    ['Closed', info.closed ? 'yes' : 'no'],
    ['TTL', info.ttlSeconds === undefined ? 'none' : `${info.ttlSeconds} s`],
    ['Expires at', info.expiresAt ?? 'never'],
    ['Incarnation', info.incarnation ?? '—'],
    ['Stream-Last-Seq', info.lastSeq ?? 'none'],
    ['Snapshot offset', info.snapshotOffset ?? 'none'],
    ['Retained from (earliest offset)', info.earliestOffset ?? 'the start'],
    ...figures,
  ];
  return (
    <dl class="info">
      {rows.map(([name, value]) => (
        <div key={name}>
          <dt>{name}</dt>
          <dd>{value}</dd>
        </div>
      ))}
    </dl>
  );
}

function AttrsEditor({ handle }: { handle: StreamHandle }) {
  const [title, setTitle] = useState('');
  const [metadata, setMetadata] = useState('');
  const [saved, setSaved] = useState('');
  // The fields stay read-only until the stored attributes arrive, so their arrival cannot
  // overwrite what someone has begun to type.
  const [loaded, setLoaded] = useState(false);
  const { failure, setFailure, busy, run } = useAction();
  useEffect(() => {
    setLoaded(false);
    void run(async () => {
      const attrs = await handle.attrs();
      setTitle(attrs.title ?? '');
      setMetadata(attrs.metadata === undefined ? '' : JSON.stringify(attrs.metadata, null, 2));
      setLoaded(true);
    });
  }, [handle]);
  const save = async (e: Event) => {
    e.preventDefault();
    setSaved('');
    let parsed: unknown;
    try {
      parsed = metadata.trim() === '' ? undefined : JSON.parse(metadata);
    } catch (error) {
      return setFailure({ code: 'INVALID_JSON', status: undefined, message: `the metadata is not valid JSON: ${(error as Error).message}` });
    }
    if (parsed !== undefined && (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))) {
      return setFailure({ code: 'INVALID_JSON', status: undefined, message: 'the metadata must be a JSON object' });
    }
    const attrs = { ...(title === '' ? {} : { title }), ...(parsed === undefined ? {} : { metadata: parsed as Record<string, unknown> }) };
    if (await run(() => handle.setAttrs(attrs))) setSaved('Saved.');
  };
  return (
    <form onSubmit={save} aria-labelledby="attrs-title">
      <h2 id="attrs-title">Attributes</h2>
      <div class="field">
        <label for="attr-title">Title</label>
        <input id="attr-title" value={title} disabled={!loaded} onInput={(e) => setTitle(e.currentTarget.value)} />
      </div>
      <div class="field">
        <label for="attr-metadata">Metadata (a JSON object)</label>
        <textarea id="attr-metadata" rows={4} value={metadata} disabled={!loaded} onInput={(e) => setMetadata(e.currentTarget.value)} />
      </div>
      <button type="submit" disabled={busy || !loaded}>
        Save attributes
      </button>{' '}
      <span role="status">{saved}</span>
      <ErrorBox failure={failure} />
    </form>
  );
}

/** The bytes an append sends, or why the text cannot be sent. */
export function appendBody(kind: Kind, text: string): { ok: true; body: string | Uint8Array } | { ok: false; message: string } {
  if (kind === 'json') {
    try {
      JSON.parse(text);
      return { ok: true, body: text };
    } catch (error) {
      return { ok: false, message: `not valid JSON: ${(error as Error).message}` };
    }
  }
  if (kind === 'text') return text === '' ? { ok: false, message: 'the message is empty' } : { ok: true, body: text };
  const digits = text.replace(/\s+/g, '');
  if (digits === '' || !/^([0-9a-fA-F]{2})+$/.test(digits)) return { ok: false, message: 'binary messages are typed as pairs of hex digits, such as 00 ff 10' };
  return { ok: true, body: Uint8Array.from(digits.match(/../g)!, (pair) => parseInt(pair, 16)) };
}

const APPEND_HINTS: Record<Kind, string> = {
  json: 'JSON; an array appends each element as its own message',
  text: 'text',
  binary: 'hex bytes, such as 00 ff 10',
};

function AppendForm({ handle, info, kind, onDone }: { handle: StreamHandle; info: StreamInfo; kind: Kind; onDone: () => void }) {
  const [text, setText] = useState('');
  const { failure, setFailure, busy, run } = useAction();
  const submit = async (e: Event) => {
    e.preventDefault();
    const body = appendBody(kind, text);
    if (!body.ok) return setFailure({ code: 'INVALID_INPUT', status: undefined, message: body.message });
    if (await run(async () => void (await handle.append(body.body, { contentType: info.contentType })))) {
      setText('');
      onDone();
    }
  };
  return (
    <form onSubmit={submit} aria-labelledby="append-title">
      <h2 id="append-title">Append</h2>
      <div class="field">
        <label for="append-body">Message ({APPEND_HINTS[kind]})</label>
        <textarea id="append-body" rows={3} value={text} onInput={(e) => setText(e.currentTarget.value)} />
      </div>
      <button type="submit" disabled={busy || info.closed}>
        Append
      </button>
      <ErrorBox failure={failure} />
    </form>
  );
}

function Actions({ handle, path, info, onDone }: { handle: StreamHandle; path: string; info: StreamInfo; onDone: () => void }) {
  const { failure, run } = useAction();
  const bucket = path.startsWith('v1/stream/') ? null : path.split('/')[0]!;
  return (
    <section aria-labelledby="actions-title">
      <h2 id="actions-title">Close or delete</h2>
      <div class="row">
        {!info.closed && (
          <ConfirmButton label="Close stream" question="Close the stream? No append is accepted after." onConfirm={() => void run(() => handle.close().then(onDone))} />
        )}
        <ConfirmButton
          label="Delete stream"
          question={`Delete ${path} and all its messages?`}
          onConfirm={() => void run(() => handle.delete()).then((ok) => ok && go(bucket === null ? { page: 'buckets' } : { page: 'bucket', bucket }))}
        />
      </div>
      <ErrorBox failure={failure} />
    </section>
  );
}

export function StreamPage({ path }: { path: string }) {
  const client = useClient();
  const handle = useMemo(() => client.stream(path), [client, path]);
  const [info, setInfo] = useState<StreamInfo | null>(null);
  const [stats, setStats] = useState<StreamStats | null>(null);
  /** Where the tail starts: the tail when the page opened. */
  const [tailFrom, setTailFrom] = useState<string | null>(null);
  const [failure, setFailure] = useState<Failure | null>(null);
  /** Counts the refreshes: the producers and followers are read again with each (a new key remounts them). */
  const [refreshes, setRefreshes] = useState(0);
  /** Why the figures are missing, shown beside what HEAD told (the page still serves without them). */
  const [statsFailure, setStatsFailure] = useState<Failure | null>(null);
  const refresh = () =>
    Promise.all([handle.head(), client.streamStats(path).then((figures) => ({ figures, failure: null }), (error: unknown) => ({ figures: null, failure: failureOf(error) }))]).then(
      ([i, s]) => {
        setInfo(i);
        setStats(s.figures);
        setStatsFailure(s.failure);
        setTailFrom((from) => from ?? i.nextOffset);
        setFailure(null);
        setRefreshes((n) => n + 1);
      },
      (error: unknown) => setFailure(failureOf(error)),
    );
  useEffect(() => void refresh(), [handle]);
  const bucket = path.startsWith('v1/stream/') ? null : path.split('/')[0]!;
  const kind = info ? kindOf(info.contentType) : 'binary';
  return (
    <>
      <nav aria-label="Breadcrumb">
        <a href="#/">Buckets</a> / {bucket === null ? <span>v1/stream</span> : <a href={hrefOf({ page: 'bucket', bucket })}>{bucket}</a>} /{' '}
        <span>{path.split('/').pop()}</span>
      </nav>
      <h1>Stream {path}</h1>
      <ErrorBox failure={failure} />
      {info && tailFrom !== null && (
        <>
          <div class="row">
            <button type="button" onClick={() => void refresh()}>
              Refresh
            </button>
          </div>
          <div class="columns">
            <div>
              <InfoTable info={info} stats={stats} />
              <ErrorBox failure={statsFailure} />
            </div>
            <AttrsEditor handle={handle} />
          </div>
          <div class="columns" key={refreshes}>
            <ProducersTable path={path} />
            <FollowersTable path={path} />
          </div>
          <MessagePager handle={handle} kind={kind} start={info.earliestOffset ?? '00000000000000000000'} />
          <div class="columns">
            <LiveTail handle={handle} kind={kind} from={tailFrom} />
            <AppendForm handle={handle} info={info} kind={kind} onDone={() => void refresh()} />
          </div>
          <Actions handle={handle} path={path} info={info} onDone={() => void refresh()} />
        </>
      )}
    </>
  );
}
