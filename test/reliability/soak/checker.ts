/**
 * The soak's checker. For every stream it takes the writes acknowledged so far, then
 * reads the stream's state (HEAD) and its bytes up to that tail, and verifies:
 *  - offsets are contiguous (each read continues exactly where the last one ended);
 *  - every line belongs to a write some client sent, and every write appears whole;
 *  - every acknowledged write is present exactly once, where its receipt said;
 *  - no write appears twice (acknowledged or not);
 *  - producers' writes appear in (epoch, seq) order without gaps;
 *  - Stream-Seq state: the last commit of a prefix-count stream starts at the event
 *    count HEAD reports as Stream-Last-Seq, each commit at the count it was sent with,
 *    and the outbox's Stream-Last-Seq is its last fact;
 *  - incarnations never change, closed streams stay closed and refuse appends, and no
 *    other stream is ever closed;
 *  - what each reader read is exactly the start of the stream.
 */
import { parseLine, type Ledger, type StreamSpec, type WriteRecord } from './ledger.js';
import type { Reader } from './readers.js';
import { call, pad20, sleep } from './support.js';

interface Occurrence {
  key: string;
  startByte: number;
  endByte: number;
  /** Events (lines) before it in the stream. */
  startIndex: number;
}

interface Snapshot {
  tail: number;
  incarnation: string | null;
  closed: boolean;
  lastSeq: string | null;
  content: Buffer;
}

/** Requests the checker must get an answer to (the server is up while it runs). */
async function answer(url: string, init: RequestInit = {}): Promise<Response & { bodyBytes: Buffer }> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const out = await call(url, init);
    if (out.kind === 'answer') return Object.assign(out.res, { bodyBytes: out.body });
    // pacing: a retry's back-off, not a wait for an outcome
    await sleep(50);
  }
  throw new Error(`the checker got no answer from ${url}`);
}

async function snapshot(base: string, spec: StreamSpec, ledger: Ledger): Promise<Snapshot> {
  const head = await answer(base + spec.path, { method: 'HEAD' });
  const tail = Number(head.headers.get('stream-next-offset'));
  const parts: Buffer[] = [];
  let offset = 0;
  while (offset < tail) {
    const res = await answer(`${base}${spec.path}?offset=${pad20(offset)}&max_bytes=8388608`, { headers: { accept: 'application/x-ndjson' } });
    const next = Number(res.headers.get('stream-next-offset'));
    if (res.status !== 200 || next - offset !== res.bodyBytes.length || next <= offset) {
      ledger.violation(`${spec.name}: read at ${offset} answered ${res.status}, ${res.bodyBytes.length} bytes, next ${next}`);
      break;
    }
    parts.push(res.bodyBytes);
    offset = next;
  }
  return {
    tail,
    incarnation: head.headers.get('stream-incarnation'),
    closed: head.headers.get('stream-closed') === 'true',
    lastSeq: head.headers.get('stream-last-seq'),
    content: Buffer.concat(parts).subarray(0, tail),
  };
}

/** Finds every write in the stream's lines; reports lines no write explains. */
function occurrencesIn(content: Buffer, spec: StreamSpec, ledger: Ledger): Occurrence[] {
  const json = spec.contentType === 'application/json';
  const found: Occurrence[] = [];
  let open: { record: WriteRecord; next: number; startByte: number; startIndex: number } | null = null;
  let byte = 0;
  let index = 0;
  const text = content.toString('utf8');
  if (text.length > 0 && !text.endsWith('\n')) ledger.violation(`${spec.name}: the stream ends inside a line`);
  for (const line of text.split('\n').slice(0, -1)) {
    const at = byte;
    byte += Buffer.byteLength(line) + 1;
    index += 1;
    const parsed = parseLine(line, json);
    const record = parsed ? ledger.writes.get(parsed.key) : undefined;
    if (!parsed || !record || record.stream !== spec.name || record.lines[parsed.index] !== line) {
      ledger.violation(`${spec.name}: line at byte ${at} was written by no client: ${line.slice(0, 80)}`);
      open = null;
      continue;
    }
    if (parsed.index === 0) {
      if (open) ledger.violation(`${spec.name}: write ${open.record.key} torn at byte ${at}`);
      open = { record, next: 0, startByte: at, startIndex: index - 1 };
    } else if (!open || open.record !== record || open.next !== parsed.index) {
      ledger.violation(`${spec.name}: line ${parsed.index} of ${parsed.key} out of place at byte ${at}`);
      open = null;
      continue;
    }
    open.next += 1;
    if (open.next === record.lines.length) {
      found.push({ key: record.key, startByte: open.startByte, endByte: byte, startIndex: open.startIndex });
      open = null;
    }
  }
  if (open) ledger.violation(`${spec.name}: write ${open.record.key} torn at the tail`);
  return found;
}

/** Acknowledged writes present once where their receipts said; nothing twice. */
function checkWrites(spec: StreamSpec, ledger: Ledger, found: Occurrence[], acked: WriteRecord[]): void {
  const byKey = new Map<string, Occurrence[]>();
  for (const o of found) byKey.set(o.key, [...(byKey.get(o.key) ?? []), o]);
  for (const [key, list] of byKey) if (list.length > 1) ledger.duplicated.add(key);
  for (const record of acked) {
    const list = byKey.get(record.key);
    if (!list) {
      ledger.lost.add(record.key);
      continue;
    }
    const r = record.receipt;
    if (r && !list.some((o) => o.startByte === r.start && o.endByte === r.next)) {
      ledger.violation(`${spec.name}: ${record.key} acknowledged at [${r.start}, ${r.next}) but stored at [${list[0]!.startByte}, ${list[0]!.endByte})`);
    }
  }
  for (const o of found) {
    const candidates = ledger.writes.get(o.key)?.seqCandidates;
    if (candidates && !candidates.includes(o.startIndex)) {
      ledger.violation(`${spec.name}: commit ${o.key} starts at event ${o.startIndex}, sent with Stream-Seq ${candidates.join('/')}`);
    }
  }
}

/** Each producer's writes in (epoch, seq) order: seq + 1 in an epoch, or seq 0 of a later one. */
function checkProducerOrder(spec: StreamSpec, ledger: Ledger, found: Occurrence[]): void {
  const last = new Map<string, { epoch: number; seq: number }>();
  for (const o of found) {
    const match = /^Q\.([^.]+)\.e(\d+)\.s(\d+)$/.exec(o.key);
    if (!match) continue;
    const [pid, epoch, seq] = [match[1]!, Number(match[2]), Number(match[3])];
    const before = last.get(pid);
    const ok = before === undefined ? seq === 0 : (epoch === before.epoch && seq === before.seq + 1) || (epoch > before.epoch && seq === 0);
    if (!ok) ledger.violation(`${spec.name}: producer ${pid} wrote e${epoch}.s${seq} after ${before ? `e${before.epoch}.s${before.seq}` : 'nothing'}`);
    last.set(pid, { epoch, seq });
  }
}

function checkStreamSeq(spec: StreamSpec, ledger: Ledger, found: Occurrence[], snap: Snapshot): void {
  const lastCommit = found[found.length - 1];
  if (spec.name === 'cas') {
    const expected = lastCommit ? pad20(lastCommit.startIndex) : null;
    if (snap.lastSeq !== expected) ledger.violation(`cas: Stream-Last-Seq ${snap.lastSeq}, the last commit starts at event ${expected}`);
  }
  if (spec.name === 'outbox') {
    const expected = found.length > 0 ? pad20(found.length - 1) : null;
    if (snap.lastSeq !== expected) ledger.violation(`outbox: Stream-Last-Seq ${snap.lastSeq}, the last fact is ${expected}`);
  }
}

async function checkClosure(base: string, spec: StreamSpec, ledger: Ledger, snap: Snapshot, closeAcked: boolean): Promise<void> {
  if (snap.incarnation !== spec.incarnation) ledger.violation(`${spec.name}: incarnation ${snap.incarnation}, created as ${spec.incarnation}`);
  if (!spec.closable && snap.closed) ledger.violation(`${spec.name}: closed, though nobody closed it`);
  if (!closeAcked) return;
  if (!snap.closed) ledger.violation(`${spec.name}: the close was acknowledged but the stream is open`);
  const probe = await answer(base + spec.path, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'late\n' });
  if (probe.status !== 409 || probe.headers.get('stream-closed') !== 'true') ledger.violation(`${spec.name}: an append to the closed stream answered ${probe.status}`);
}

function checkReaders(spec: StreamSpec, ledger: Ledger, snap: Snapshot, readers: Reader[]): void {
  for (const reader of readers.filter((r) => r.stream === spec.name)) {
    const read = Buffer.concat(reader.chunks);
    const upTo = Math.min(read.length, snap.content.length);
    if (read.length !== reader.offset) ledger.violation(`${reader.label}: holds ${read.length} bytes at offset ${reader.offset}`);
    if (!read.subarray(reader.verified, upTo).equals(snap.content.subarray(reader.verified, upTo))) {
      ledger.violation(`${reader.label}: what it read in [${reader.verified}, ${upTo}) differs from the stream`);
    }
    reader.verified = Math.max(reader.verified, upTo);
  }
}

export async function checkStream(base: string, spec: StreamSpec, ledger: Ledger, readers: Reader[]): Promise<number> {
  // Taken before the stream is read: each of these must be in what the read returns.
  const acked = (ledger.byStream.get(spec.name) ?? []).filter((w) => w.state === 'acked');
  const closeAcked = spec.closeAcked;
  const snap = await snapshot(base, spec, ledger);
  const found = occurrencesIn(snap.content, spec, ledger);
  checkWrites(spec, ledger, found, acked);
  checkProducerOrder(spec, ledger, found);
  checkStreamSeq(spec, ledger, found, snap);
  await checkClosure(base, spec, ledger, snap, closeAcked);
  checkReaders(spec, ledger, snap, readers);
  return snap.tail;
}

/** Checks every stream; answers each stream's tail. */
export async function checkAll(base: string, ledger: Ledger, readers: Reader[]): Promise<Map<string, number>> {
  const tails = new Map<string, number>();
  for (const spec of [...ledger.streams.values()]) tails.set(spec.name, await checkStream(base, spec, ledger, readers));
  return tails;
}
