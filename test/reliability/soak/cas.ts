/**
 * Prefix-count compare-and-set writers (seed 001): each reads the JSON stream to its
 * tail, counts the events, and commits with Stream-Seq = that count. On a 409 with
 * Stream-Last-Seq it reads on and retries; on an unknown outcome it reads on and looks
 * for its commit's key before retrying, as the seed recommends.
 */
import { jsonLine, parseLine, receiptOf, type WriteRecord } from './ledger.js';
import type { StreamSpec } from './ledger.js';
import { call, maybeLose, pad20, sleep, type Rng } from './support.js';
import type { SoakContext } from './writers.js';

/** What one writer has read of the stream so far. */
interface View {
  offset: number;
  count: number;
}

const MAX_ATTEMPTS = 500;

/** Reads from the view's offset to the tail; true if a line of `key` went by. */
async function readOn(ctx: SoakContext, rng: Rng, spec: StreamSpec, view: View, key: string): Promise<boolean> {
  let seen = false;
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const out = await call(`${ctx.nextBase()}${spec.path}?offset=${pad20(view.offset)}`, { headers: { accept: 'application/x-ndjson' } });
    if (out.kind === 'unknown') {
      // pacing: a retry's back-off, not a wait for an outcome
      await sleep(rng.int(30, 200));
      continue;
    }
    if (out.res.status !== 200) {
      ctx.ledger.violation(`CAS read of ${spec.name} at ${view.offset} answered ${out.res.status}`);
      return seen;
    }
    const next = Number(out.res.headers.get('stream-next-offset'));
    if (next - view.offset !== out.body.length) ctx.ledger.violation(`CAS read of ${spec.name}: ${out.body.length} bytes from ${view.offset} to ${next}`);
    for (const line of out.body.toString('utf8').split('\n')) {
      if (line === '') continue;
      view.count += 1;
      if (parseLine(line, true)?.key === key) seen = true;
    }
    view.offset = next;
    if (out.res.headers.get('stream-up-to-date') === 'true') return seen;
  }
  ctx.ledger.violation(`CAS reader of ${spec.name} never reached the tail`);
  return seen;
}

type Attempt = 'acked' | 'conflict' | 'unknown' | 'refused';

async function commitOnce(ctx: SoakContext, rng: Rng, spec: StreamSpec, record: WriteRecord, count: number): Promise<Attempt> {
  record.seqCandidates!.push(count);
  const headers = { 'content-type': 'application/json', 'stream-seq': pad20(count) };
  const out = await call(ctx.nextBase() + spec.path, { method: 'POST', headers, body: `[${record.lines.join(',')}]` }, maybeLose(rng));
  if (out.kind === 'unknown') {
    ctx.ledger.unknown(out.reason);
    return 'unknown';
  }
  if (out.res.status === 204) {
    ctx.ledger.ack(record, 'Stream-Seq commit', receiptOf(out.res));
    return 'acked';
  }
  const code = out.res.status === 409 ? (JSON.parse(out.body.toString()) as { code?: string }).code : undefined;
  if (code === 'STREAM_SEQ_CONFLICT' && out.res.headers.get('stream-last-seq') !== null) return 'conflict';
  ctx.ledger.violation(`Stream-Seq commit ${record.key} answered ${out.res.status} ${out.body.toString().slice(0, 100)}`);
  return 'refused';
}

/** Commits one record, retrying with fresh counts; stops early only when refused. */
async function commit(ctx: SoakContext, rng: Rng, spec: StreamSpec, view: View, record: WriteRecord): Promise<void> {
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    if (await readOn(ctx, rng, spec, view, record.key)) {
      // An earlier attempt whose answer was lost (or a 409 to a retry) did apply.
      ctx.ledger.ack(record, 'Stream-Seq commit');
      return;
    }
    const result = await commitOnce(ctx, rng, spec, record, view.count);
    if (result === 'acked') return;
    if (result === 'refused') {
      record.state = 'maybe';
      return;
    }
    // pacing: a retry's back-off, not a wait for an outcome
    if (result === 'unknown') await sleep(rng.int(30, 200));
  }
  record.state = 'maybe';
  ctx.ledger.violation(`Stream-Seq commit ${record.key} never went through`);
}

export async function casWriter(ctx: SoakContext, rng: Rng, spec: StreamSpec, id: string): Promise<void> {
  const view: View = { offset: 0, count: 0 };
  for (let n = 0; !ctx.stopping(); n++) {
    const key = `S.${id}.${n}`;
    const lines = Array.from({ length: rng.int(1, 3) }, (_, i) => jsonLine(key, i, rng.pad(0, 40)));
    const record = ctx.ledger.sent({ key, stream: spec.name, lines, seqCandidates: [] });
    await commit(ctx, rng, spec, view, record);
    // pacing: the load's think time, not a wait for an outcome
    await sleep(rng.int(0, 30));
  }
}
