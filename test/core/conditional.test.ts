/**
 * Properties of seed 001 (Stream-Seq compare-and-set and Stream-Incarnation), checked
 * with fast-check against the pure rules in src/core and, where producer state is
 * involved, a MemoryStore running those rules. The model each property compares with is
 * written from the seed's sentences, not from the code.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decideAppend } from '../../src/core/append.js';
import { decideCreate, type CreateRequest } from '../../src/core/create.js';
import { planHead, planLiveResume, planRead, type ReadRequest } from '../../src/core/read.js';
import { decideDelete } from '../../src/core/stream.js';
import { DEFAULT_PRODUCER_SETTINGS, type AppendOutcome, type AppendRequest, type StreamState } from '../../src/core/types.js';
import { normalizeContentType } from '../../src/protocol/content-type.js';
import type { ProtocolError } from '../../src/protocol/errors.js';
import type { OffsetParam } from '../../src/protocol/offset.js';
import { parseStreamSeq } from '../../src/protocol/parse.js';
import { MemoryStore } from '../../src/storage/memory/engine.js';
import { streamState } from './states.js';
import { testSeed } from '../helpers/seed.js';

const NOW_MS = 1_700_000_000_000;
const STREAM_TYPE = 'text/plain';
const OTHER_TYPE = 'application/octet-stream';

/** The seed's comparison: bytewise, strictly greater. */
function bytewiseGreater(value: string, stored: string): boolean {
  return Buffer.compare(Buffer.from(value, 'latin1'), Buffer.from(stored, 'latin1')) > 0;
}

const printableChar = fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c));
const printable = (maxLength: number) => fc.string({ unit: printableChar, maxLength });
/** Stream-Seq values that collide often: short strings over a small alphabet, decimal and zero-padded numbers. */
const seqValue = fc.oneof(
  fc.string({ unit: fc.constantFrom('0', '1', '9', 'a', 'B', '~', ' '), maxLength: 3 }),
  fc.nat({ max: 120 }).map(String),
  fc.nat({ max: 120 }).map((n) => String(n).padStart(20, '0')),
  printable(8),
);
const token = fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 16 });

function stream(overrides: Partial<StreamState> = {}): StreamState {
  return streamState({
    config: { contentType: STREAM_TYPE, ttlSeconds: null, expiresAtMs: null },
    createdAtMs: NOW_MS - 1000,
    lastAccessMs: NOW_MS - 1000,
    ...overrides,
  });
}

function appendRequest(overrides: Partial<AppendRequest> = {}): AppendRequest {
  return {
    contentType: STREAM_TYPE,
    data: Buffer.from('x'),
    close: false,
    streamSeq: null,
    producer: null,
    bodyDigest: null,
    incarnation: null,
    recordMatch: null,
    ...overrides,
  };
}

function plainAppend(state: StreamState | undefined, request: AppendRequest) {
  return decideAppend({ stream: state, request, producers: null, settings: DEFAULT_PRODUCER_SETTINGS, nowMs: NOW_MS });
}

function errorOf(outcome: AppendOutcome): ProtocolError | null {
  return outcome.kind === 'rejected' ? outcome.error : null;
}

// ---------------------------------------------------------------------------------
// Stream-Seq on plain appends: a model of "How Stream-Seq is checked"
// ---------------------------------------------------------------------------------

interface PlainCommand {
  bytes: number;
  close: boolean;
  seq: string | null;
  otherType: boolean;
}

/** An append with data, a close, or both (an empty append that does not close is a 400 before any rule). */
const plainCommand: fc.Arbitrary<PlainCommand> = fc
  .record({
    bytes: fc.integer({ min: 0, max: 4 }),
    close: fc.boolean(),
    seq: fc.option(seqValue, { nil: null, freq: 3 }),
    otherType: fc.boolean(),
  })
  .filter((c) => c.bytes > 0 || c.close);

interface Model {
  tail: number;
  lastSeq: string | null;
  closed: boolean;
}

type Expected = { kind: 'appended' } | { kind: 'already-closed' } | { kind: 'rejected'; code: string };

/** What the seed (and DESIGN.md's order of checks) says a plain append answers. */
function expectedPlain(model: Model, cmd: PlainCommand): Expected {
  if (model.closed) return cmd.close && cmd.bytes === 0 ? { kind: 'already-closed' } : { kind: 'rejected', code: 'STREAM_CLOSED' };
  if (cmd.bytes > 0 && cmd.otherType) return { kind: 'rejected', code: 'CONTENT_TYPE_MISMATCH' };
  if (cmd.seq !== null && model.lastSeq !== null && !bytewiseGreater(cmd.seq, model.lastSeq)) {
    return { kind: 'rejected', code: 'STREAM_SEQ_CONFLICT' };
  }
  return { kind: 'appended' };
}

describe('Stream-Seq compare-and-set (pure decideAppend)', () => {
  it('follows the seed for any history of plain appends', () => {
    const history = fc.array(plainCommand, { maxLength: 40 });
    fc.assert(
      fc.property(fc.option(seqValue, { nil: null }), history, (initialSeq, commands) => {
        let state = stream({ lastStreamSeq: initialSeq });
        const model: Model = { tail: 0, lastSeq: initialSeq, closed: false };
        const acceptedValues: string[] = initialSeq === null ? [] : [initialSeq];
        for (const cmd of commands) {
          const request = appendRequest({
            data: Buffer.alloc(cmd.bytes, 0x61),
            close: cmd.close,
            streamSeq: cmd.seq,
            contentType: cmd.otherType ? OTHER_TYPE : STREAM_TYPE,
          });
          const { outcome, changes } = plainAppend(state, request);
          const expected = expectedPlain(model, cmd);
          expect(outcome.kind).toBe(expected.kind);
          const error = errorOf(outcome);
          if (expected.kind === 'rejected') {
            expect(error?.code).toBe(expected.code);
            // Nothing from a refused request is committed.
            expect(changes).toBeNull();
            // Only the Stream-Seq 409 carries Stream-Last-Seq; it carries the tail and the stored value.
            if (expected.code === 'STREAM_SEQ_CONFLICT') {
              expect(error!.fields).toEqual({ nextOffset: model.tail, lastSeq: model.lastSeq });
            } else {
              expect(error!.fields?.lastSeq).toBeUndefined();
            }
            continue;
          }
          if (expected.kind === 'already-closed') continue;
          model.tail += cmd.bytes;
          model.closed ||= cmd.close;
          if (cmd.seq !== null) {
            model.lastSeq = cmd.seq;
            acceptedValues.push(cmd.seq);
          }
          state = changes!.stream;
          expect({ tail: state.tail, lastSeq: state.lastStreamSeq, closed: state.closed }).toEqual(model);
        }
        // The stored value only ever grows, bytewise.
        for (let i = 1; i < acceptedValues.length; i++) expect(bytewiseGreater(acceptedValues[i]!, acceptedValues[i - 1]!)).toBe(true);
      }),
      { seed: testSeed(), numRuns: 300 },
    );
  });

  it('compares bytewise, so zero-padded counters compare like numbers and plain decimals do not', () => {
    fc.assert(
      fc.property(fc.nat({ max: 1e12 }), fc.nat({ max: 1e12 }), (stored, sent) => {
        const padded = plainAppend(stream({ lastStreamSeq: String(stored).padStart(20, '0') }), appendRequest({ streamSeq: String(sent).padStart(20, '0') }));
        expect(padded.outcome.kind === 'appended').toBe(sent > stored);
        const decimal = plainAppend(stream({ lastStreamSeq: String(stored) }), appendRequest({ streamSeq: String(sent) }));
        expect(decimal.outcome.kind === 'appended').toBe(String(sent) > String(stored));
      }),
      { seed: testSeed() },
    );
    expect(plainAppend(stream({ lastStreamSeq: '9' }), appendRequest({ streamSeq: '10' })).outcome.kind).toBe('rejected');
  });

  it('only a stream that accepted a Stream-Seq refuses one; an append without it is unchecked and changes nothing', () => {
    fc.assert(
      fc.property(seqValue, fc.option(seqValue, { nil: null }), fc.nat({ max: 100 }), (sent, stored, tail) => {
        const fresh = plainAppend(stream({ tail }), appendRequest({ streamSeq: sent }));
        expect(fresh.outcome.kind).toBe('appended');
        expect(fresh.changes!.stream.lastStreamSeq).toBe(sent);
        const unchecked = plainAppend(stream({ tail, lastStreamSeq: stored }), appendRequest({ streamSeq: null }));
        expect(unchecked.outcome.kind).toBe('appended');
        expect(unchecked.changes!.stream.lastStreamSeq).toBe(stored);
      }),
      { seed: testSeed() },
    );
  });
});

describe('Stream-Seq syntax (parseStreamSeq)', () => {
  it('printable ASCII up to 256 bytes is a value; longer is refused with 400', () => {
    fc.assert(
      fc.property(printable(300), (raw) => {
        const parsed = parseStreamSeq(raw);
        if (raw.length <= 256) expect(parsed).toEqual({ ok: true, value: raw });
        else expect(parsed.ok ? null : parsed.error.code).toBe('STREAM_SEQ_TOO_LONG');
      }),
      { seed: testSeed() },
    );
  });

  it('a value with any other byte is ignored: no value, so nothing is checked or stored', () => {
    const other = fc.oneof(fc.integer({ min: 0, max: 0x1f }), fc.constant(0x7f), fc.integer({ min: 0x80, max: 0xff })).map((c) => String.fromCharCode(c));
    fc.assert(
      fc.property(printable(20), other, printable(20), (before, bad, after) => {
        expect(parseStreamSeq(before + bad + after)).toEqual({ ok: true, value: undefined });
      }),
      { seed: testSeed() },
    );
    expect(parseStreamSeq(undefined)).toEqual({ ok: true, value: undefined });
  });
});

describe('Content types are compared after normalisation, which keeps parameters; a UTF-8 charset is the same as none', () => {
  const caseVariant = (s: string) => fc.array(fc.boolean(), { minLength: s.length, maxLength: s.length }).map((flips) => [...s].map((c, i) => (flips[i] ? c.toUpperCase() : c.toLowerCase())).join(''));

  it('folds the case of type, subtype and parameter names, and drops white space around separators', () => {
    fc.assert(
      fc.property(caseVariant('application/json'), caseVariant('charset'), fc.constantFrom('', ' ', '  '), (type, name, space) => {
        expect(normalizeContentType(`${type}${space};${space}${name}=utf-8`)).toBe(normalizeContentType('application/json; charset=utf-8'));
      }),
      { seed: testSeed() },
    );
  });

  it('a charset of UTF-8 matches a type without one (issue 36, which replaced the rule refusing it); another charset is refused', () => {
    const json = normalizeContentType('application/json')!;
    const withCharset = normalizeContentType('application/json; charset=utf-8')!;
    expect(withCharset).not.toBe(json);
    const state = stream({ config: { contentType: json, ttlSeconds: null, expiresAtMs: null }, lastStreamSeq: '5' });
    expect(errorOf(plainAppend(state, appendRequest({ contentType: withCharset, streamSeq: '6' })).outcome)).toBeNull();
    const { outcome } = plainAppend(state, appendRequest({ contentType: normalizeContentType('application/json; charset=latin1')!, streamSeq: '4' }));
    expect(errorOf(outcome)?.code).toBe('CONTENT_TYPE_MISMATCH');
    expect(errorOf(outcome)?.fields?.lastSeq).toBeUndefined();
  });
});

// ---------------------------------------------------------------------------------
// Stream-Incarnation (pure rules)
// ---------------------------------------------------------------------------------

const offsetParam: fc.Arbitrary<OffsetParam | null> = fc.oneof(
  fc.constant(null),
  fc.constant<OffsetParam>({ kind: 'start' }),
  fc.constant<OffsetParam>({ kind: 'now' }),
  fc.nat({ max: 40 }).map((position): OffsetParam => ({ kind: 'at', position })),
);

const liveState = fc.record({ tail: fc.nat({ max: 30 }), earliest: fc.nat({ max: 30 }), closed: fc.boolean(), lastSeq: fc.option(seqValue, { nil: null }) }).map(({ tail, earliest, closed, lastSeq }) =>
  stream({ tail, earliestOffset: Math.min(earliest, tail), closed, lastStreamSeq: lastSeq }),
);

describe('Stream-Incarnation', () => {
  it('an append with another token answers 412 with the current token and applies nothing, whatever else is wrong', () => {
    fc.assert(
      fc.property(liveState, token, plainCommand, (state, sent, cmd) => {
        fc.pre(sent !== state.incarnation);
        const request = appendRequest({ data: Buffer.alloc(cmd.bytes, 0x61), close: cmd.close, streamSeq: cmd.seq, incarnation: sent, contentType: cmd.otherType ? OTHER_TYPE : STREAM_TYPE });
        const { outcome, changes } = plainAppend(state, request);
        expect(changes).toBeNull();
        // 412 never mixes with the 409s: no Stream-Last-Seq, no Stream-Closed.
        expect(errorOf(outcome)).toEqual({ code: 'INCARNATION_MISMATCH', message: expect.any(String), fields: { incarnation: state.incarnation } });
      }),
      { seed: testSeed() },
    );
  });

  it('without the header nothing changes: sending the current token answers exactly what sending none does', () => {
    fc.assert(
      fc.property(liveState, plainCommand, (state, cmd) => {
        const base = { data: Buffer.alloc(cmd.bytes, 0x61), close: cmd.close, streamSeq: cmd.seq, contentType: cmd.otherType ? OTHER_TYPE : STREAM_TYPE };
        expect(plainAppend(state, appendRequest({ ...base, incarnation: state.incarnation }))).toEqual(plainAppend(state, appendRequest({ ...base, incarnation: null })));
      }),
      { seed: testSeed() },
    );
    fc.assert(
      fc.property(liveState, offsetParam, fc.constantFrom<ReadRequest['live']>(null, 'long-poll', 'sse'), (state, offset, live) => {
        const withToken = planRead(state, { offset, live, incarnation: state.incarnation }, NOW_MS);
        expect(withToken).toEqual(planRead(state, { offset, live, incarnation: null }, NOW_MS));
      }),
      { seed: testSeed() },
    );
  });

  it('a read answers 404, 410 or 416 as it would without the header, and 412 only otherwise', () => {
    fc.assert(
      fc.property(liveState, offsetParam, fc.constantFrom<ReadRequest['live']>(null, 'long-poll', 'sse'), token, (state, offset, live, sent) => {
        fc.pre(sent !== state.incarnation);
        const without = planRead(state, { offset, live, incarnation: null }, NOW_MS);
        const withWrong = planRead(state, { offset, live, incarnation: sent }, NOW_MS);
        if (!without.ok) expect(withWrong).toEqual(without);
        else expect(withWrong).toEqual({ ok: false, error: { code: 'INCARNATION_MISMATCH', message: expect.any(String), fields: { incarnation: state.incarnation } } });
      }),
      { seed: testSeed() },
    );
    for (const missing of [undefined, stream({ deleted: true })]) {
      const plan = planRead(missing, { offset: { kind: 'start' }, live: null, incarnation: 'x' }, NOW_MS);
      expect(plan.ok ? null : plan.error.code).toBe(missing ? 'STREAM_GONE' : 'STREAM_NOT_FOUND');
    }
  });

  it('once retention trimmed the start, a read from offset=-1 answers 410, with or without a token', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 30 }), fc.option(token, { nil: null }), (earliest, sent) => {
        const trimmed = stream({ tail: 30, earliestOffset: earliest });
        const plan = planRead(trimmed, { offset: { kind: 'start' }, live: null, incarnation: sent }, NOW_MS);
        expect(plan.ok ? null : [plan.error.code, plan.error.fields]).toEqual(['OFFSET_TRIMMED', { nextOffset: earliest }]);
      }),
      { seed: testSeed() },
    );
  });

  it('HEAD and DELETE: 404 for a missing stream, 412 with the current token for another incarnation, nothing deleted', () => {
    fc.assert(
      fc.property(fc.option(liveState, { nil: undefined }), fc.option(token, { nil: null }), (state, sent) => {
        const head = planHead(state, sent, NOW_MS);
        const del = decideDelete(state, sent, NOW_MS);
        if (state === undefined) {
          expect(head.ok ? null : head.error.code).toBe('STREAM_NOT_FOUND');
          expect(del.kind === 'rejected' ? del.error.code : null).toBe('STREAM_NOT_FOUND');
        } else if (sent !== null && sent !== state.incarnation) {
          expect(head.ok ? null : head.error.fields).toEqual({ incarnation: state.incarnation });
          expect(del.kind === 'rejected' ? [del.error.code, del.error.fields] : null).toEqual(['INCARNATION_MISMATCH', { incarnation: state.incarnation }]);
        } else {
          expect(head.ok).toBe(true);
          expect(del.kind).toBe('dropped');
        }
      }),
      { seed: testSeed() },
    );
  });

  it('a live reader resumes only on the incarnation it announced', () => {
    fc.assert(
      fc.property(liveState, liveState, fc.nat({ max: 30 }), (announcedStream, current, position) => {
        fc.pre(announcedStream.incarnation !== 'other');
        const recreated = { ...current, incarnation: 'other' };
        const plan = planLiveResume(recreated, Math.min(position, recreated.tail), 'sse', announcedStream.incarnation, NOW_MS);
        expect(plan.ok).toBe(false);
        const same = planLiveResume(current, Math.min(position, current.tail), 'sse', current.incarnation, NOW_MS);
        expect(same.ok).toBe(Math.min(position, current.tail) >= current.earliestOffset);
      }),
      { seed: testSeed() },
    );
  });
});

// ---------------------------------------------------------------------------------
// PUT: Stream-Seq on create, Stream-Incarnation on create
// ---------------------------------------------------------------------------------

function createRequest(overrides: Partial<CreateRequest> = {}): CreateRequest {
  return { name: 'v1/s', bucket: null, contentType: STREAM_TYPE, ttlSeconds: null, expiresAtMs: null, close: false, data: Buffer.alloc(0), streamSeq: null, incarnation: null, fork: null, ...overrides };
}

function create(existing: StreamState | undefined, request: CreateRequest) {
  return decideCreate({ existing, request, bucketExists: true, forkSource: undefined, forkAnchor: null, forkRecord: null, newId: 2, newIncarnation: 'inc-new', nowMs: NOW_MS });
}

describe('PUT and Stream-Seq / Stream-Incarnation', () => {
  it('a PUT that creates stores its Stream-Seq unchecked; a PUT that finds the stream ignores it', () => {
    fc.assert(
      fc.property(fc.option(seqValue, { nil: null }), liveState, (sent, existing) => {
        const fresh = create(undefined, createRequest({ streamSeq: sent }));
        expect(fresh.outcome.kind).toBe('created');
        expect(fresh.changes!.stream.lastStreamSeq).toBe(sent);
        expect(fresh.changes!.stream.incarnation).toBe('inc-new');
        const again = create(existing, createRequest({ streamSeq: sent, close: existing.closed }));
        expect(again.outcome).toEqual({ kind: 'exists', stream: existing });
        expect(again.changes).toBeNull();
      }),
      { seed: testSeed() },
    );
  });

  it('a PUT with the header answers 412: for a missing stream it creates nothing; for another incarnation it wins over a config conflict', () => {
    fc.assert(
      fc.property(token, liveState, fc.boolean(), (sent, existing, conflicting) => {
        fc.pre(sent !== existing.incarnation);
        const missing = create(undefined, createRequest({ incarnation: sent }));
        expect(missing.changes).toBeNull();
        expect(missing.outcome.kind === 'rejected' ? missing.outcome.error.code : null).toBe('INCARNATION_MISMATCH');
        const stale = create(existing, createRequest({ incarnation: sent, contentType: conflicting ? OTHER_TYPE : STREAM_TYPE }));
        expect(stale.outcome.kind === 'rejected' ? [stale.outcome.error.code, stale.outcome.error.fields] : null).toEqual(['INCARNATION_MISMATCH', { incarnation: existing.incarnation }]);
      }),
      { seed: testSeed() },
    );
  });

  it('a stream past its TTL is recreated by a PUT with a new token and only the new Stream-Seq', () => {
    fc.assert(
      fc.property(liveState, fc.option(seqValue, { nil: null }), (old, sent) => {
        const expired = { ...old, config: { ...old.config, ttlSeconds: 1 }, lastAccessMs: NOW_MS - 1000, lastStreamSeq: old.lastStreamSeq ?? 'old' };
        const again = create(expired, createRequest({ streamSeq: sent }));
        expect(again.outcome.kind).toBe('created');
        expect(again.changes!.collect).toEqual(expired);
        expect(again.changes!.stream).toMatchObject({ incarnation: 'inc-new', lastStreamSeq: sent, tail: 0, closed: false, epochFloor: null });
      }),
      { seed: testSeed() },
    );
  });
});

// ---------------------------------------------------------------------------------
// Producer writes and Stream-Seq, through a MemoryStore
// ---------------------------------------------------------------------------------

interface ProducerCommand {
  producer: 'a' | 'b' | null;
  /** How the write relates to the producer's state: next seq, a repeat, a gap, a new or old epoch. */
  move: 'next' | 'repeat-newest' | 'repeat-older' | 'gap' | 'new-epoch' | 'old-epoch';
  seq: string | null;
}

const producerCommand: fc.Arbitrary<ProducerCommand> = fc.record({
  producer: fc.constantFrom<'a' | 'b' | null>('a', 'b', null),
  move: fc.constantFrom<ProducerCommand['move']>('next', 'next', 'repeat-newest', 'repeat-older', 'gap', 'new-epoch', 'old-epoch'),
  seq: fc.option(seqValue, { nil: null, freq: 4 }),
});

interface ProducerModel {
  epoch: number;
  /** Highest accepted seq of `epoch`. */
  lastSeq: number;
}

/** The producer headers a command sends, given what the model knows (null: command not applicable). */
function headersFor(cmd: ProducerCommand, p: ProducerModel | undefined): { epoch: number; seq: number } | null {
  if (p === undefined) return cmd.move === 'next' || cmd.move === 'new-epoch' ? { epoch: 0, seq: 0 } : null;
  switch (cmd.move) {
    case 'next':
      return { epoch: p.epoch, seq: p.lastSeq + 1 };
    case 'repeat-newest':
      return { epoch: p.epoch, seq: p.lastSeq };
    case 'repeat-older':
      return p.lastSeq > 0 ? { epoch: p.epoch, seq: p.lastSeq - 1 } : null;
    case 'gap':
      return { epoch: p.epoch, seq: p.lastSeq + 2 };
    case 'new-epoch':
      return { epoch: p.epoch + 1, seq: 0 };
    case 'old-epoch':
      return p.epoch > 0 ? { epoch: p.epoch - 1, seq: 0 } : null;
  }
}

describe('Producer deduplication runs first (MemoryStore)', () => {
  it('duplicates are never 409; a Stream-Seq 409 uses up no Producer-Seq and carries no producer or closure fields', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(producerCommand, { minLength: 1, maxLength: 30 }), async (commands) => {
        const store = new MemoryStore({ producers: DEFAULT_PRODUCER_SETTINGS, nowMs: () => NOW_MS });
        try {
          expect((await store.run('createStream', createRequest())).kind).toBe('created');
          const producers = new Map<string, ProducerModel>();
          let lastSeq: string | null = null;
          for (const cmd of commands) {
            const known = cmd.producer === null ? undefined : producers.get(cmd.producer);
            const headers = cmd.producer === null ? null : headersFor(cmd, known);
            if (cmd.producer !== null && headers === null) continue;
            const request = appendRequest({ streamSeq: cmd.seq, producer: headers && cmd.producer ? { id: cmd.producer, ...headers } : null });
            const outcome = await store.run('append', { name: 'v1/s', request });
            const error = errorOf(outcome);
            const isRepeat = cmd.move === 'repeat-newest' || cmd.move === 'repeat-older';
            const seqConflicts = cmd.seq !== null && lastSeq !== null && !bytewiseGreater(cmd.seq, lastSeq);
            if (cmd.producer !== null && known && isRepeat) {
              // Dedup first: a duplicate, even when its Stream-Seq is no longer greater.
              expect(outcome.kind).toBe('duplicate');
              if (outcome.kind === 'duplicate') expect(outcome.receipt === null).toBe(cmd.move === 'repeat-older');
              continue;
            }
            if (cmd.producer !== null && known && cmd.move === 'old-epoch') {
              expect(error?.code).toBe('PRODUCER_FENCED');
              continue;
            }
            if (cmd.producer !== null && known && cmd.move === 'gap') {
              expect(error?.code).toBe('PRODUCER_SEQ_GAP');
              expect(error?.fields?.expectedSeq).toBe(known.lastSeq + 1);
              expect(error?.fields?.lastSeq).toBeUndefined();
              continue;
            }
            if (seqConflicts) {
              expect(error?.code).toBe('STREAM_SEQ_CONFLICT');
              expect(error?.fields).toEqual({ nextOffset: expect.any(Number), lastSeq });
              continue; // the producer's state is unchanged: the same seq is still next
            }
            expect(outcome.kind).toBe('appended');
            if (outcome.kind === 'appended' && headers) expect(outcome.producer).toMatchObject({ epoch: headers.epoch, seq: headers.seq });
            if (cmd.producer !== null && headers) producers.set(cmd.producer, { epoch: headers.epoch, lastSeq: headers.seq });
            if (cmd.seq !== null) lastSeq = cmd.seq;
          }
          expect((await store.getStream('v1/s'))!.lastStreamSeq).toBe(lastSeq);
        } finally {
          await store.close();
        }
      }),
      { seed: testSeed(), numRuns: 200 },
    );
  });
});

describe('A recreated stream starts without producer state or Stream-Seq (MemoryStore)', () => {
  async function fill(store: MemoryStore, epoch: number, seqs: string[]): Promise<void> {
    for (let i = 0; i < seqs.length; i++) {
      const producer = { id: 'p', epoch, seq: i };
      await store.run('append', { name: 'v1/s', request: appendRequest({ producer, streamSeq: seqs[i]! }) });
    }
  }

  async function expectFresh(store: MemoryStore, oldToken: string, putSeq: string | null): Promise<void> {
    const now = (await store.getStream('v1/s'))!;
    expect(now.incarnation).not.toBe(oldToken);
    expect(now.lastStreamSeq).toBe(putSeq);
    expect(now.tail).toBe(0);
    const stale = await store.run('append', { name: 'v1/s', request: appendRequest({ incarnation: oldToken }) });
    expect(errorOf(stale)?.fields).toEqual({ incarnation: now.incarnation });
    const first = await store.run('append', { name: 'v1/s', request: appendRequest({ producer: { id: 'p', epoch: 0, seq: 0 } }) });
    expect(first.kind).toBe('appended');
  }

  it('after DELETE and PUT', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 5 }), fc.array(seqValue, { minLength: 1, maxLength: 6 }), fc.option(seqValue, { nil: null }), async (epoch, seqs, putSeq) => {
        const store = new MemoryStore({ producers: DEFAULT_PRODUCER_SETTINGS, nowMs: () => NOW_MS });
        try {
          await store.run('createStream', createRequest());
          await fill(store, epoch, seqs);
          const old = (await store.getStream('v1/s'))!.incarnation;
          expect((await store.run('deleteStream', { name: 'v1/s', incarnation: old })).kind).toBe('dropped');
          expect((await store.run('createStream', createRequest({ streamSeq: putSeq }))).kind).toBe('created');
          await expectFresh(store, old, putSeq);
        } finally {
          await store.close();
        }
      }),
      { seed: testSeed(), numRuns: 50 },
    );
  });

  it('after TTL expiry and a later PUT', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 5 }), fc.array(seqValue, { minLength: 1, maxLength: 6 }), fc.option(seqValue, { nil: null }), async (epoch, seqs, putSeq) => {
        let clock = NOW_MS;
        const store = new MemoryStore({ producers: DEFAULT_PRODUCER_SETTINGS, nowMs: () => clock });
        try {
          await store.run('createStream', createRequest({ ttlSeconds: 1 }));
          await fill(store, epoch, seqs);
          const old = (await store.getStream('v1/s'))!.incarnation;
          clock += 1000;
          // A client still holding the old token cannot recreate it.
          expect((await store.run('createStream', createRequest({ incarnation: old }))).kind).toBe('rejected');
          expect((await store.run('createStream', createRequest({ streamSeq: putSeq }))).kind).toBe('created');
          await expectFresh(store, old, putSeq);
        } finally {
          await store.close();
        }
      }),
      { seed: testSeed(), numRuns: 50 },
    );
  });
});
