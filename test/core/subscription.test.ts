/**
 * The subscription rules as properties (core/subscription.ts, core/glob.ts): glob matching
 * against a regular-expression oracle, and for random histories of acks, that a cursor
 * never moves backwards nor beyond the tail, and that a stale holder moves nothing.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkPattern, globMatch, literalPrefix } from '../../src/core/glob.js';
import { decideAck, decideClaim, decideWake, type AckItem } from '../../src/core/subscription.js';
import type { LinkView, SubscriptionState } from '../../src/core/subscription-types.js';
import { testSeed } from '../helpers/seed.js';

const segment = fc.constantFrom('a', 'b', 'c', 'ab');
const patternSegment = fc.constantFrom('a', 'b', '*', '**');

/** The oracle for patterns without `**`: each `*` is one segment of at least one character. */
function oracle(pattern: string, path: string): boolean {
  const source = pattern
    .split('/')
    .map((s) => (s === '*' ? '[^/]+' : s))
    .join('/');
  return new RegExp(`^${source}$`).test(path);
}

/** `**` as any run of whole segments: the pattern matches when some expansion of each `**` into 0..3 segments does. */
function expandsTo(pattern: string[], path: string[]): boolean {
  const at = pattern.indexOf('**');
  if (at < 0) return oracle(pattern.join('/'), path.join('/'));
  for (let k = 0; k <= path.length; k++) if (expandsTo([...pattern.slice(0, at), ...Array<string>(k).fill('*'), ...pattern.slice(at + 1)], path)) return true;
  return false;
}

describe('glob patterns', () => {
  it('match as the oracle says, and every match starts with the literal prefix', () => {
    fc.assert(
      fc.property(fc.array(patternSegment, { minLength: 1, maxLength: 4 }), fc.array(segment, { minLength: 1, maxLength: 5 }), (p, s) => {
        const pattern = p.join('/');
        const path = s.join('/');
        const matched = globMatch(pattern, path);
        expect(matched).toBe(expandsTo(p, s));
        if (matched) expect(path.startsWith(literalPrefix(pattern))).toBe(true);
      }),
      { seed: testSeed() },
    );
  });

  it('* is exactly one segment and ** zero or more', () => {
    expect(globMatch('events/*', 'events/a')).toBe(true);
    expect(globMatch('events/*', 'events')).toBe(false);
    expect(globMatch('events/*', 'events/a/b')).toBe(false);
    expect(globMatch('events/**', 'events')).toBe(true);
    expect(globMatch('events/**', 'events/a/b/c')).toBe(true);
    expect(globMatch('**/x', 'x')).toBe(true);
    expect(globMatch('a/**/x', 'a/b/c/x')).toBe(true);
    expect(globMatch('a/**/x', 'a/b/c/y')).toBe(false);
    expect(checkPattern('a/b*', 256, 16)).toMatchObject({ ok: false });
    expect(checkPattern('**/**/**/**/**', 256, 16)).toMatchObject({ ok: false });
  });
});

const NOW = 1_000_000;

function subscription(over: Partial<SubscriptionState> = {}): SubscriptionState {
  return {
    key: 'v1/s',
    scope: 'v1',
    id: 's',
    incarnation: 'inc',
    config: { type: 'pull-wake', pattern: 'a/*', streams: [], webhookUrl: null, wakeStream: 'w', leaseTtlMs: 10_000, description: null },
    configHash: 'h',
    createdAtMs: 0,
    generation: 0,
    wake: null,
    ...over,
  };
}

const view = (path: string, acked: number, tail: number): LinkView => ({
  link: { subKey: 'v1/s', stream: `v1/${path}`, path, explicit: false, glob: true, ackedOffset: acked },
  tail,
});

describe('wakes, claims and acks', () => {
  it('a wake raises the generation by one, lists the pending streams, and appends an event for pull-wake', () => {
    const woke = decideWake(subscription({ generation: 4 }), [view('a/x', 0, 10)], NOW, 'w1')!;
    expect(woke.subscription.generation).toBe(5);
    expect(woke.subscription.wake!.snapshot).toEqual([{ path: 'a/x', explicit: false, acked: 0, tail: 10 }]);
    expect(woke.event).toMatchObject({ type: 'wake', wake_id: 'w1', generation: 5, stream: 'a/x' });
    expect(decideWake(woke.subscription, [view('a/x', 0, 12)], NOW, 'w2')).toBeNull();
    expect(decideWake(subscription(), [], NOW, 'w3')).toBeNull();
  });

  it('for random ack histories: cursors never go backwards nor past the tail, and stale holders move nothing', () => {
    const history = fc.array(fc.record({ offset: fc.integer({ min: -1, max: 120 }), stale: fc.boolean(), tail: fc.integer({ min: 0, max: 100 }) }), { maxLength: 30 });
    fc.assert(
      fc.property(history, (steps) => {
        let sub = decideClaim({ subscription: subscription(), pending: () => [view('a/x', 0, 50)], worker: 'w', nowMs: NOW, wakeId: 'wk' });
        if (sub.kind !== 'claimed') throw new Error('claim failed');
        let state = sub.subscription;
        let acked = 0;
        let tail = 50;
        for (const step of steps) {
          tail = Math.max(tail, step.tail);
          const ack: AckItem = { path: 'a/x', offset: step.offset < 0 ? null : step.offset };
          const generation = step.stale ? state.generation - 1 : state.generation;
          const outcome = decideAck({
            subscription: state,
            mode: 'ack',
            claims: { incarnation: 'inc', generation, wakeId: 'wk' },
            reference: { wakeId: 'wk', generation },
            acks: [ack],
            links: new Map([['a/x', view('a/x', acked, tail)]]),
            done: false,
            nowMs: NOW,
          });
          if (step.stale) {
            expect(outcome).toMatchObject({ kind: 'rejected', error: { code: 'FENCED' } });
            continue;
          }
          const valid = ack.offset !== null && ack.offset >= acked && ack.offset <= tail;
          expect(outcome.kind).toBe(valid ? 'acked' : 'rejected');
          if (outcome.kind === 'acked') {
            for (const link of outcome.links) expect(link.ackedOffset).toBeGreaterThan(acked);
            acked = ack.offset!;
            state = outcome.subscription;
          }
        }
      }),
      { seed: testSeed() },
    );
  });

  it('a claim is refused while another worker holds an unexpired lease, and taken once it has expired', () => {
    const claimed = decideClaim({ subscription: subscription(), pending: () => [view('a/x', 0, 5)], worker: 'one', nowMs: NOW, wakeId: 'wk' });
    if (claimed.kind !== 'claimed') throw new Error('claim failed');
    const busy = decideClaim({ subscription: claimed.subscription, pending: () => [view('a/x', 0, 5)], worker: 'two', nowMs: NOW + 9_999, wakeId: 'wk2' });
    expect(busy).toMatchObject({ kind: 'rejected', error: { code: 'ALREADY_CLAIMED', currentHolder: 'one', generation: 1 } });
    const taken = decideClaim({ subscription: claimed.subscription, pending: () => [view('a/x', 0, 5)], worker: 'two', nowMs: NOW + 10_000, wakeId: 'wk2' });
    expect(taken).toMatchObject({ kind: 'claimed', subscription: { generation: 2, wake: { id: 'wk2', holder: 'two' } } });
  });
});
