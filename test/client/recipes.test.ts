/**
 * The two Stream-Seq recipes of seed 001 against a real server: prefix-count commits by
 * racing writers, and the outbox publisher with a takeover by a new owner.
 */
import { describe, expect, it } from 'vitest';
import {
  FencedError,
  OutboxPublisher,
  PrefixCountCommitter,
  RillClient,
  StreamClosedError,
  type FetchLike,
  type StreamHandle,
} from '../../src/client/index.js';
import { useClientServer } from '../helpers/client-server.js';
import { readAll } from '../helpers/processing.js';

const env = useClientServer('recipes');
let counter = 0;

async function freshLog(): Promise<string> {
  counter += 1;
  const path = `recipes/log-${counter}`;
  // Created without Stream-Seq, so the first commit's 0 is accepted.
  await env.client.stream(path).create({ contentType: 'application/json' });
  return path;
}

interface Event {
  writer: number;
  k: number;
  seen: number;
  part: number;
}

describe('prefix-count committer', () => {
  it('accepts a commit only from a writer that saw the whole log', async () => {
    const path = await freshLog();
    const writers = [0, 1, 2, 3];
    const attempts = await Promise.all(
      writers.map(async (writer) => {
        const committer = new PrefixCountCommitter<Event>(env.client.stream(path));
        let total = 0;
        for (let k = 0; k < 8; k++) {
          const outcome = await committer.commit(({ count }) => [
            { writer, k, seen: count, part: 0 },
            { writer, k, seen: count, part: 1 },
          ]);
          expect(outcome.committed).toBe(true);
          total += outcome.attempts;
        }
        return total;
      }),
    );
    // Writers that started together raced; the losers read on and tried again.
    expect(attempts.reduce((a, b) => a + b, 0)).toBeGreaterThan(32);
    const log = await readAll<Event>(env.client.stream(path));
    expect(log.length).toBe(64);
    log.forEach((event, i) => {
      // Each commit was validated against exactly the events before it.
      if (event.part === 0) expect(event.seen).toBe(i);
      else expect(event.seen).toBe(i - 1);
    });
    for (const writer of writers) expect(log.filter((e) => e.writer === writer).length).toBe(16);
  });

  it('lets the validation decline, and counts what it read', async () => {
    const path = await freshLog();
    const seen: number[] = [];
    const committer = new PrefixCountCommitter<{ n: number }>(env.client.stream(path), { apply: (_e, index) => seen.push(index) });
    await committer.commit(() => [{ n: 1 }, { n: 2 }]);
    const declined = await committer.commit(({ count }) => (count >= 2 ? undefined : [{ n: 3 }]));
    expect(declined).toEqual({ committed: false, attempts: 1 });
    expect(committer.count).toBe(2);
    expect(seen).toEqual([0, 1]);
  });

  it('finds its own commit in the log when the answer was lost', async () => {
    const path = await freshLog();
    let lost = 0;
    const lossy: FetchLike = async (input, init) => {
      const response = await fetch(input, init);
      const seq = (init?.headers as Record<string, string> | undefined)?.['stream-seq'];
      if (init?.method === 'POST' && seq !== undefined && lost === 0) {
        lost += 1;
        await response.arrayBuffer();
        throw new TypeError('simulated: connection reset after the server answered');
      }
      return response;
    };
    const committer = new PrefixCountCommitter<{ op: string }>(new RillClient({ url: env.server.url, fetch: lossy }).stream(path));
    const outcome = await committer.commit(() => [{ op: 'op-1' }], (event) => event.op === 'op-1');
    expect(lost).toBe(1);
    expect(outcome.committed).toBe(true);
    expect(await readAll(env.client.stream(path))).toEqual([{ op: 'op-1' }]);
  });
});

describe('outbox publisher', () => {
  async function publishRange(outbox: OutboxPublisher, from: number, to: number) {
    const outcomes = [];
    for (let n = from; n <= to; n++) outcomes.push(outbox.publish(n, { fact: n }));
    return Promise.all(outcomes);
  }

  it('publishes each fact once across a takeover; the old owner is fenced', async () => {
    const path = await freshLog();
    const stream: StreamHandle = env.client.stream(path);
    const first = new OutboxPublisher(env.client.stream(path), { id: 'outbox', epoch: 1, maxInFlight: 4 });
    expect((await publishRange(first, 1, 40)).every((o) => o.published)).toBe(true);
    // The new owner takes over with a higher epoch and republishes from an earlier point.
    const second = new OutboxPublisher(env.client.stream(path), { id: 'outbox', epoch: 2, maxInFlight: 4 });
    expect(await second.lastPublished()).toBe('00000000000000000040');
    const outcomes = await publishRange(second, 35, 60);
    const skipped = outcomes.filter((o) => !o.published);
    expect(skipped.map((o) => o.streamSeq)).toEqual([35, 36, 37, 38, 39, 40].map((n) => String(n).padStart(20, '0')));
    for (const o of skipped) if (!o.published) expect(o.lastSeq).toBe('00000000000000000040');
    await second.flush();
    const stale = await first.publish(61, { fact: 61 }).catch((e: unknown) => e);
    expect(stale).toBeInstanceOf(FencedError);
    expect(await readAll(stream)).toEqual(Array.from({ length: 60 }, (_, i) => ({ fact: i + 1 })));
  });

  it('treats any 409 other than Stream-Seq as an error', async () => {
    const path = await freshLog();
    const outbox = new OutboxPublisher(env.client.stream(path), { id: 'outbox' });
    await outbox.publish(1, { fact: 1 });
    await env.client.stream(path).close();
    const error = await outbox.publish(2, { fact: 2 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StreamClosedError);
    await expect(outbox.publish(1, { fact: 1 })).rejects.toThrow(RangeError);
  });
});
