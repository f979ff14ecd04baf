/**
 * Seed 001's two recipes, run for real over HTTP against the rill binary on SQLite:
 * the prefix-count compare-and-set with several concurrent writers, and the outbox
 * (publishing committed facts) with a takeover by a higher epoch. The writers below
 * follow the seed's steps literally; the checks afterwards are what a user relies on.
 */
import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, JSON_TYPE, pad, readJsonToTail, type Answer } from '../helpers/conditional.js';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { extensionUrl } from '../../src/protocol/extensions.js';

let server: RunningServer;
let counter = 0;

beforeAll(async () => {
  server = await startServer();
});

afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

async function newJsonStream(label: string, headers: Record<string, string> = {}): Promise<string> {
  counter += 1;
  const url = `${server.url}/v1/stream/recipe-${label}-${counter}`;
  expect((await call(url, 'PUT', { ...JSON_TYPE, ...headers })).status).toBe(201);
  return url;
}

/** An answer the recipe does not expect: the writer stops instead of guessing. */
class UnexpectedAnswer extends Error {
  constructor(readonly status: number, readonly code: string | undefined) {
    super(`unexpected answer ${status} ${code ?? ''}`);
  }
}

// ---------------------------------------------------------------------------------
// Prefix-count compare-and-set
// ---------------------------------------------------------------------------------

interface Event {
  op: string;
  writer: number;
  /** The index this event claims in the log: n + its place in the commit. */
  pos: number;
  part: number;
  size: number;
  /** Digest of every event the writer had read when it validated this commit. */
  prefix: string;
}

function digest(events: unknown[]): string {
  return createHash('sha256').update(JSON.stringify(events)).digest('hex');
}

class PrefixCountWriter {
  /** Every event read so far, from the stream's start. */
  readonly seen: Event[] = [];
  private offset = '-1';
  conflicts = 0;
  commits = 0;

  constructor(
    private readonly url: string,
    readonly id: number,
  ) {}

  /** Step 3: read with consistency=leader, from where it stopped, until Stream-Up-To-Date. */
  async readToTail(): Promise<void> {
    const { messages, next } = await readJsonToTail(this.url, this.offset);
    this.seen.push(...(messages as Event[]));
    this.offset = next;
  }

  private commitFor(op: string, size: number): Event[] {
    const n = this.seen.length;
    const prefix = digest(this.seen); // "validate": the commit records exactly what it was checked against
    return Array.from({ length: size }, (_, part) => ({ op, writer: this.id, pos: n + part, part, size, prefix }));
  }

  private async append(events: Event[], n: number): Promise<Answer> {
    return call(this.url, 'POST', { ...JSON_TYPE, 'stream-seq': pad(n) }, JSON.stringify(events));
  }

  /**
   * Steps 4 and 5: append with the count, on a Stream-Seq 409 read on and retry. With
   * `loseFirstAnswer` the first answer is dropped unread, as if the connection failed:
   * the writer then reads on and looks for its operation id before retrying.
   */
  async commit(op: string, size: number, options: { loseFirstAnswer?: boolean; beforeAppend?: () => Promise<void> } = {}): Promise<void> {
    for (let attempt = 0; attempt < 200; attempt++) {
      await this.readToTail();
      if (this.seen.some((e) => e.op === op)) return; // the lost append did commit
      const n = this.seen.length;
      const events = this.commitFor(op, size);
      if (attempt === 0 && options.beforeAppend) await options.beforeAppend();
      const res = await this.append(events, n);
      if (attempt === 0 && options.loseFirstAnswer) continue;
      if (res.status === 204) {
        this.commits += 1;
        return;
      }
      const lastSeq = res.headers.get('stream-last-seq');
      if (res.status !== 409 || res.code !== 'STREAM_SEQ_CONFLICT' || lastSeq === null) throw new UnexpectedAnswer(res.status, res.code);
      // Another writer committed first; the stored value is the count before its commit.
      expect(Number(lastSeq)).toBeGreaterThanOrEqual(n);
      this.conflicts += 1;
      await this.readToTail();
      expect(this.seen[Number(lastSeq)]?.part).toBe(0);
    }
    throw new Error(`writer ${this.id} gave up on ${op}`);
  }
}

function barrier(parties: number): () => Promise<void> {
  let arrived = 0;
  let release: () => void = () => {};
  const all = new Promise<void>((r) => (release = r));
  return async () => {
    arrived += 1;
    if (arrived === parties) release();
    await all;
  };
}

/** Every accepted commit was validated against the whole log before it. */
function checkPrefixCountLog(log: Event[], expectedOps: Map<string, number>): void {
  const seenOps = new Set<string>();
  let p = 0;
  while (p < log.length) {
    const first = log[p]!;
    expect(first.part).toBe(0);
    expect(seenOps.has(first.op)).toBe(false);
    seenOps.add(first.op);
    expect(first.size).toBe(expectedOps.get(first.op));
    // The writer counted exactly the events before its commit, and had read exactly them.
    expect(first.pos).toBe(p);
    expect(first.prefix).toBe(digest(log.slice(0, p)));
    for (let part = 0; part < first.size; part++) {
      const event = log[p + part]!;
      expect([event.op, event.part, event.pos]).toEqual([first.op, part, p + part]);
    }
    p += first.size;
  }
  expect([...seenOps].sort()).toEqual([...expectedOps.keys()].sort());
}

describe('Prefix-count compare-and-set', () => {
  it('several concurrent writers extend one log, and each accepted commit was validated against the whole log before it', async () => {
    const url = await newJsonStream('prefix');
    const writers = 4;
    const commitsEach = 6;
    const expectedOps = new Map<string, number>();
    const atStart = barrier(writers);
    const run = async (id: number): Promise<PrefixCountWriter> => {
      const writer = new PrefixCountWriter(url, id);
      for (let c = 0; c < commitsEach; c++) {
        const op = `w${id}-c${c}`;
        const size = 1 + ((id + c) % 3);
        expectedOps.set(op, size);
        // The first commit of every writer is sent at once after all have read the empty
        // stream: one wins, the others must get a Stream-Seq 409.
        await writer.commit(op, size, { loseFirstAnswer: c % 3 === 2, beforeAppend: c === 0 ? atStart : undefined });
      }
      return writer;
    };
    const done = await Promise.all(Array.from({ length: writers }, (_, id) => run(id)));
    const totalConflicts = done.reduce((sum, w) => sum + w.conflicts, 0);
    expect(totalConflicts).toBeGreaterThanOrEqual(writers - 1);

    const log = (await readJsonToTail(url)).messages as Event[];
    checkPrefixCountLog(log, expectedOps);
    // The stored value is the event count before the latest commit.
    const last = log[log.length - 1]!;
    const head = await call(url, 'HEAD');
    expect(head.headers.get('stream-last-seq')).toBe(pad(log.length - last.size));
  });

  it('the seed\'s curl example: after reading 3 events, append 2 with Stream-Seq 3', async () => {
    const url = await newJsonStream('example');
    expect((await call(url, 'POST', { ...JSON_TYPE, 'stream-seq': pad(0) }, '[{"type":"step","n":1},{"type":"step","n":2},{"type":"step","n":3}]')).status).toBe(204);
    const { messages } = await readJsonToTail(url);
    expect(messages).toHaveLength(3);
    const res = await call(url, 'POST', { ...JSON_TYPE, 'stream-seq': '00000000000000000003' }, '[{"type":"step","n":4},{"type":"step","n":5}]');
    expect(res.status).toBe(204);
    expect((await readJsonToTail(url)).messages).toHaveLength(5);
  });

  it('when two writers send the same count, one wins and the other gets 409', async () => {
    const url = await newJsonStream('same-count');
    const [a, b] = await Promise.all([
      call(url, 'POST', { ...JSON_TYPE, 'stream-seq': pad(0) }, '[{"by":"a"}]'),
      call(url, 'POST', { ...JSON_TYPE, 'stream-seq': pad(0) }, '[{"by":"b"}]'),
    ]);
    expect([a.status, b.status].sort()).toEqual([204, 409]);
    const loser = a.status === 409 ? a : b;
    expect(loser.code).toBe('STREAM_SEQ_CONFLICT');
    expect(loser.headers.get('stream-last-seq')).toBe(pad(0));
    expect((await readJsonToTail(url)).messages).toHaveLength(1);
  });

  it('a PUT that seeds a value (or any value above the true count) makes every honest retry answer 409', async () => {
    const url = await newJsonStream('seeded', { 'stream-seq': pad(5) });
    const writer = new PrefixCountWriter(url, 0);
    await writer.readToTail();
    for (let retry = 0; retry < 5; retry++) {
      const res = await call(url, 'POST', { ...JSON_TYPE, 'stream-seq': pad(writer.seen.length) }, '[{"op":"x"}]');
      expect([res.status, res.headers.get('stream-last-seq')]).toEqual([409, pad(5)]);
    }
    // A PUT without Stream-Seq stores nothing, so the first commit's 0 is accepted.
    const unseeded = await newJsonStream('unseeded');
    expect((await call(unseeded, 'POST', { ...JSON_TYPE, 'stream-seq': pad(0) }, '[{"op":"x"}]')).status).toBe(204);
  });

  it('every writer, every append: an append without Stream-Seq lets a writer that read only part of the log win', async () => {
    const url = await newJsonStream('every-append');
    expect((await call(url, 'POST', { ...JSON_TYPE, 'stream-seq': pad(0) }, '[1,2]')).status).toBe(204);
    // A writer that read 2 events appends without Stream-Seq: not checked, value unchanged.
    expect((await call(url, 'POST', JSON_TYPE, '[3]')).status).toBe(204);
    // Another writer that also read only those 2 events now wins the compare-and-set.
    expect((await call(url, 'POST', { ...JSON_TYPE, 'stream-seq': pad(2) }, '[4]')).status).toBe(204);
  });

  it('do not send the count after your own commit: that is not a compare-and-set', async () => {
    const url = await newJsonStream('after-count');
    expect((await call(url, 'POST', { ...JSON_TYPE, 'stream-seq': pad(0) }, '[1,2,3]')).status).toBe(204);
    // Both saw 3 events. A appends 1 event with 4, B appends 2 events with 5: both accepted.
    expect((await call(url, 'POST', { ...JSON_TYPE, 'stream-seq': pad(4) }, '[{"by":"A"}]')).status).toBe(204);
    expect((await call(url, 'POST', { ...JSON_TYPE, 'stream-seq': pad(5) }, '[{"by":"B"},{"by":"B"}]')).status).toBe(204);
    // With the prefix count, B (which saw 3) is refused once A committed.
    const right = await newJsonStream('prefix-count');
    expect((await call(right, 'POST', { ...JSON_TYPE, 'stream-seq': pad(0) }, '[1,2,3]')).status).toBe(204);
    expect((await call(right, 'POST', { ...JSON_TYPE, 'stream-seq': pad(3) }, '[{"by":"A"}]')).status).toBe(204);
    expect((await call(right, 'POST', { ...JSON_TYPE, 'stream-seq': pad(3) }, '[{"by":"B"},{"by":"B"}]')).status).toBe(409);
  });

  it('the read must end at the tail: a read shortened by max_bytes stops inside a commit without Stream-Up-To-Date', async () => {
    const url = await newJsonStream('short-read');
    expect((await call(url, 'POST', { ...JSON_TYPE, 'stream-seq': pad(0) }, '[{"e":1},{"e":2},{"e":3}]')).status).toBe(204);
    const short = await fetch(`${url}?offset=-1&consistency=leader&max_bytes=8`);
    expect(JSON.parse(await short.text())).toEqual([{ e: 1 }]);
    expect(short.headers.get('stream-up-to-date')).toBeNull();
    // The server cannot tell: a count taken there (1) beats the stored value (0).
    expect((await call(url, 'POST', { ...JSON_TYPE, 'stream-seq': pad(1) }, '[{"e":"blind"}]')).status).toBe(204);
  });

  it('after retention trimmed the start, a read from -1 answers 410; the count kept in the snapshot carries on', async () => {
    const url = await newJsonStream('retained');
    expect((await call(url, 'POST', { ...JSON_TYPE, 'stream-seq': pad(0) }, '[{"e":1},{"e":2},{"e":3}]')).status).toBe(204);
    const second = await call(url, 'POST', { ...JSON_TYPE, 'stream-seq': pad(3) }, '[{"e":4},{"e":5}]');
    expect(second.status).toBe(204);
    const covered = second.headers.get('stream-next-offset')!;
    // Fold the log into a snapshot that keeps the event count, then trim the history before it.
    expect((await call(extensionUrl(url, `snapshot/${covered}`), 'PUT', JSON_TYPE, '{"count":5,"sum":15}')).status).toBe(204);
    expect((await call(extensionUrl(url, `retention/${covered}`), 'PUT')).status).toBe(204);
    const fromStart = await call(`${url}?offset=-1&consistency=leader`, 'GET');
    expect([fromStart.status, fromStart.code, fromStart.headers.get('stream-next-offset')]).toEqual([410, 'OFFSET_TRIMMED', covered]);

    // A writer joining now starts from the snapshot's count and counts on from its offset.
    const snapshot = await fetch(extensionUrl(url, 'snapshot'));
    const base = (JSON.parse(await snapshot.text()) as { count: number }).count;
    const { messages } = await readJsonToTail(url, snapshot.headers.get('stream-next-offset')!);
    const n = base + messages.length;
    expect(n).toBe(5);
    // Counting only what is still readable would be too small and is refused.
    const blind = await call(url, 'POST', { ...JSON_TYPE, 'stream-seq': pad(messages.length) }, '[{"e":"blind"}]');
    expect([blind.status, blind.headers.get('stream-last-seq')]).toEqual([409, pad(3)]);
    expect((await call(url, 'POST', { ...JSON_TYPE, 'stream-seq': pad(n) }, '[{"e":6}]')).status).toBe(204);
  });

  it('never append an empty commit: [] is refused', async () => {
    const url = await newJsonStream('empty-commit');
    const res = await call(url, 'POST', { ...JSON_TYPE, 'stream-seq': pad(0) }, '[]');
    expect([res.status, res.code]).toEqual([400, 'EMPTY_JSON_ARRAY']);
    expect((await call(url, 'HEAD')).headers.get('stream-last-seq')).toBeNull();
  });
});

// ---------------------------------------------------------------------------------
// Publishing committed facts (outbox)
// ---------------------------------------------------------------------------------

/** The source of truth: a SQLite database whose row ids number the commits. */
class SourceOfTruth {
  private readonly db = new Database(':memory:');

  constructor() {
    this.db.exec('CREATE TABLE facts (id INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL)');
  }

  /** Commits facts in one transaction. */
  commit(...bodies: string[]): void {
    const insert = this.db.prepare('INSERT INTO facts (body) VALUES (?)');
    this.db.transaction(() => bodies.forEach((b) => insert.run(b)))();
  }

  after(id: number): Array<{ id: number; body: string }> {
    return this.db.prepare('SELECT id, body FROM facts WHERE id > ? ORDER BY id').all(id) as Array<{ id: number; body: string }>;
  }

  prune(id: number): void {
    this.db.prepare('DELETE FROM facts WHERE id = ?').run(id);
  }

  close(): void {
    this.db.close();
  }
}

interface Published {
  fact: number;
  body: string;
  epoch: number;
}

interface OwnerOptions {
  epoch: number;
  /** Publish facts after this commit number (a possibly stale checkpoint). */
  from: number;
  /** On an "already published" 409: go to the next fact, or jump past Stream-Last-Seq. */
  onPublished: 'next' | 'jump';
  /** Stop after this many accepted appends (a crash). */
  stopAfter?: number;
  /** Drop the answer of this fact's append once and retry it (a lost response). */
  loseAnswerOf?: number;
  /** The Producer-Seq to continue from: 0 for a new owner, more for one still alive. */
  nextProducerSeq?: number;
  /** Called before each append, so a test can interleave owners. */
  beforeAppend?: (fact: number) => Promise<void>;
  /** Called after each accepted append. */
  afterAccepted?: (fact: number) => void;
}

interface OwnerResult {
  ended: 'done' | 'fenced' | 'stopped';
  accepted: number[];
  skipped: number[];
  firstAcceptedProducerSeq: string | null;
}

class OutboxOwner {
  private producerSeq: number;

  constructor(
    private readonly url: string,
    private readonly source: SourceOfTruth,
    private readonly options: OwnerOptions,
  ) {
    this.producerSeq = options.nextProducerSeq ?? 0;
  }

  private send(fact: { id: number; body: string }): Promise<Answer> {
    const event: Published = { fact: fact.id, body: fact.body, epoch: this.options.epoch };
    return call(
      this.url,
      'POST',
      {
        ...JSON_TYPE,
        'producer-id': 'outbox',
        'producer-epoch': String(this.options.epoch),
        'producer-seq': String(this.producerSeq),
        'stream-seq': pad(fact.id),
      },
      JSON.stringify(event),
    );
  }

  /** A lost answer: the owner cannot tell whether the append landed, so it sends it again. */
  private async sendWithLostAnswer(fact: { id: number; body: string }): Promise<Answer> {
    const first = await this.send(fact);
    const again = await this.send(fact);
    if (first.status === 200) {
      // A retry of an accepted write is a duplicate, not 409, and names the original range.
      expect(again.status).toBe(204);
      expect(again.headers.get('stream-next-offset')).toBe(first.headers.get('stream-next-offset'));
      return first;
    }
    return again;
  }

  async run(): Promise<OwnerResult> {
    const result: OwnerResult = { ended: 'done', accepted: [], skipped: [], firstAcceptedProducerSeq: null };
    let facts = this.source.after(this.options.from);
    for (let steps = 0; steps < 1000 && facts.length > 0; steps++) {
      const fact = facts[0]!;
      await this.options.beforeAppend?.(fact.id);
      const res = fact.id === this.options.loseAnswerOf ? await this.sendWithLostAnswer(fact) : await this.send(fact);
      const lastSeq = res.headers.get('stream-last-seq');
      if (res.status === 200) {
        result.firstAcceptedProducerSeq ??= res.headers.get('producer-seq');
        result.accepted.push(fact.id);
        this.options.afterAccepted?.(fact.id);
        this.producerSeq += 1;
        facts = facts.slice(1);
        if (result.accepted.length === this.options.stopAfter) return { ...result, ended: 'stopped' };
      } else if (res.status === 409 && lastSeq !== null) {
        // "Already published": same Producer-Seq, next fact or first fact after Stream-Last-Seq.
        result.skipped.push(fact.id);
        facts = this.options.onPublished === 'next' ? facts.slice(1) : this.source.after(Number(lastSeq));
      } else if (res.status === 403) {
        return { ...result, ended: 'fenced' };
      } else {
        // Any other 409 is an error: skipping on it would lose facts.
        throw new UnexpectedAnswer(res.status, res.code);
      }
    }
    return result;
  }
}

async function publishedLog(url: string): Promise<Published[]> {
  return (await readJsonToTail(url)).messages as Published[];
}

function seedFacts(source: SourceOfTruth, count: number): void {
  for (let i = 1; i <= count; i += 2) source.commit(`fact ${i}`, ...(i + 1 <= count ? [`fact ${i + 1}`] : []));
}

describe('Publishing committed facts (outbox)', () => {
  it('a takeover by a higher epoch republishes already-published facts, skips them on 409 + Stream-Last-Seq, and every fact lands once in commit order', async () => {
    const url = await newJsonStream('outbox');
    const source = new SourceOfTruth();
    try {
      seedFacts(source, 10);
      // The old owner publishes 6 facts (the answer to the 6th is lost and retried), then dies.
      const old = await new OutboxOwner(url, source, { epoch: 0, from: 0, onPublished: 'next', stopAfter: 6, loseAnswerOf: 6 }).run();
      expect(old).toMatchObject({ ended: 'stopped', accepted: [1, 2, 3, 4, 5, 6] });
      // The new owner only knows an older checkpoint (fact 2) and starts Producer-Seq at 0.
      const taker = await new OutboxOwner(url, source, { epoch: 1, from: 2, onPublished: 'next' }).run();
      expect(taker).toMatchObject({ ended: 'done', skipped: [3, 4, 5, 6], accepted: [7, 8, 9, 10] });
      // The 409s used up no Producer-Seq: its first accepted append was seq 0.
      expect(taker.firstAcceptedProducerSeq).toBe('0');
      // Once the new owner's first append is accepted, the old epoch answers 403.
      const late = await call(url, 'POST', { ...JSON_TYPE, 'producer-id': 'outbox', 'producer-epoch': '0', 'producer-seq': '6', 'stream-seq': pad(11) }, '{"fact":11}');
      expect(late.status).toBe(403);

      const log = await publishedLog(url);
      expect(log.map((e) => e.fact)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      expect(log.map((e) => e.epoch)).toEqual([0, 0, 0, 0, 0, 0, 1, 1, 1, 1]);
      expect((await call(url, 'HEAD')).headers.get('stream-last-seq')).toBe(pad(10));
    } finally {
      source.close();
    }
  });

  it('before the new owner\'s first accepted append, the old owner still publishes, each fact at most once and in order', async () => {
    const url = await newJsonStream('outbox-overlap');
    const source = new SourceOfTruth();
    try {
      seedFacts(source, 8);
      const old = new OutboxOwner(url, source, { epoch: 0, from: 0, onPublished: 'next', stopAfter: 4 });
      expect((await old.run()).accepted).toEqual([1, 2, 3, 4]);
      let oldResult: OwnerResult | undefined;
      const taker = new OutboxOwner(url, source, {
        epoch: 1,
        from: 0,
        onPublished: 'jump',
        // After its first 409 (jump to 5) and before its next append, the old owner,
        // not yet fenced, publishes fact 5 and then tries fact 6.
        beforeAppend: async (fact) => {
          if (fact === 5 && oldResult === undefined) {
            const stillOld = new OutboxOwner(url, source, { epoch: 0, from: 4, onPublished: 'next', stopAfter: 1, nextProducerSeq: 4 });
            oldResult = await stillOld.run();
          }
        },
      });
      const result = await taker.run();
      expect(oldResult).toMatchObject({ ended: 'stopped', accepted: [5] });
      expect(result).toMatchObject({ ended: 'done', skipped: [1, 5], accepted: [6, 7, 8] });
      const fenced = await call(url, 'POST', { ...JSON_TYPE, 'producer-id': 'outbox', 'producer-epoch': '0', 'producer-seq': '5', 'stream-seq': pad(9) }, '{"fact":9}');
      expect(fenced.status).toBe(403);
      expect((await publishedLog(url)).map((e) => [e.fact, e.epoch])).toEqual([
        [1, 0], [2, 0], [3, 0], [4, 0], [5, 0], [6, 1], [7, 1], [8, 1],
      ]);
    } finally {
      source.close();
    }
  });

  it('old and new owner running at the same time still publish every fact exactly once, in commit order', async () => {
    const url = await newJsonStream('outbox-race');
    const source = new SourceOfTruth();
    try {
      seedFacts(source, 30);
      let takerAccepted: () => void = () => {};
      const firstTakerAccept = new Promise<void>((r) => (takerAccepted = r));
      let taker: Promise<OwnerResult> | undefined;
      // The new owner starts (from the very first fact) once the old one reached fact 5;
      // both race freely until the old one reaches fact 10, where it pauses until the new
      // owner's first append was accepted, so that the takeover surely happens mid-way.
      const old = await new OutboxOwner(url, source, {
        epoch: 0,
        from: 0,
        onPublished: 'next',
        beforeAppend: async (fact) => {
          if (fact === 5) taker = new OutboxOwner(url, source, { epoch: 1, from: 0, onPublished: 'jump', afterAccepted: () => takerAccepted() }).run();
          if (fact === 10) await Promise.race([firstTakerAccept, new Promise((r) => setTimeout(r, 5_000))]);
        },
      }).run();
      const next = await taker!;
      expect(old.ended).toBe('fenced');
      expect(next.ended).toBe('done');
      const log = await publishedLog(url);
      expect(log.map((e) => e.fact)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
      // Epoch 0 published a prefix; from the new owner's first fact on, only epoch 1.
      const switchAt = log.findIndex((e) => e.epoch === 1);
      expect(switchAt).toBeGreaterThanOrEqual(4);
      expect(switchAt).toBeLessThanOrEqual(9);
      expect(log.slice(switchAt).every((e) => e.epoch === 1)).toBe(true);
      expect([...old.accepted, ...next.accepted].sort((x, y) => x - y)).toEqual(log.map((e) => e.fact));
    } finally {
      source.close();
    }
  });

  it('any other 409 is an error: the publisher stops instead of skipping and no fact is lost', async () => {
    const url = await newJsonStream('outbox-closed');
    const source = new SourceOfTruth();
    try {
      seedFacts(source, 4);
      expect((await new OutboxOwner(url, source, { epoch: 0, from: 0, onPublished: 'next', stopAfter: 2 }).run()).accepted).toEqual([1, 2]);
      expect((await call(url, 'POST', { 'stream-closed': 'true' })).status).toBe(204);
      const owner = new OutboxOwner(url, source, { epoch: 1, from: 2, onPublished: 'next' });
      const error = await owner.run().then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(UnexpectedAnswer);
      expect((error as UnexpectedAnswer).code).toBe('STREAM_CLOSED');
      expect((await publishedLog(url)).map((e) => e.fact)).toEqual([1, 2]);
    } finally {
      source.close();
    }
  });

  it('gaps: after a reset marker for a pruned fact, that fact can never be appended later', async () => {
    const url = await newJsonStream('outbox-gap');
    const source = new SourceOfTruth();
    try {
      seedFacts(source, 6);
      expect((await new OutboxOwner(url, source, { epoch: 0, from: 0, onPublished: 'next', stopAfter: 3 }).run()).accepted).toEqual([1, 2, 3]);
      source.prune(4);
      const marker = await call(
        url,
        'POST',
        { ...JSON_TYPE, 'producer-id': 'outbox', 'producer-epoch': '0', 'producer-seq': '3', 'stream-seq': pad(4) },
        '{"reset":true,"missing":[4]}',
      );
      expect(marker.status).toBe(200);
      const rest = await new OutboxOwner(url, source, { epoch: 1, from: 4, onPublished: 'next' }).run();
      expect(rest.accepted).toEqual([5, 6]);
      const tooLate = await call(url, 'POST', { ...JSON_TYPE, 'stream-seq': pad(4) }, '{"fact":4}');
      expect([tooLate.status, tooLate.headers.get('stream-last-seq')]).toEqual([409, pad(6)]);
      const log = (await readJsonToTail(url)).messages as Array<Record<string, unknown>>;
      expect(log.map((e) => e.fact ?? 'reset')).toEqual([1, 2, 3, 'reset', 5, 6]);
    } finally {
      source.close();
    }
  });
});
