/**
 * Commit hints only while another node listens (src/storage/postgres/notify.ts, issue 41):
 * a node alone sends none; a node that starts listening says so, and the others hint
 * their commits from then on; once it has gone, their next count stops them. Real
 * PostgreSQL. The test listens on the channel with a session of its own (not a node's:
 * nodes do not count it), and tells "no hint came" without waiting for time: its own
 * NOTIFY, sent after the commit, arrives after any hint of that commit (notifications
 * arrive in commit order).
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { v1StreamKey } from '../../src/protocol/ids.js';
import { HINT_CHANNEL } from '../../src/storage/postgres/notify.js';
import { DEFAULT_PRODUCER_SETTINGS } from '../../src/core/types.js';
import { PostgresStore } from '../../src/storage/postgres/engine.js';
import { appendRequest, createRequest, expectAppended, TestClock, usePostgresNodes } from './fixtures.js';
import { until } from '../helpers/waits.js';

const clock = new TestClock();
const nodes = usePostgresNodes(clock);
const text = (data: string) => appendRequest(data, { contentType: 'text/plain' });

/** A session listening on the hint channel, keeping every payload it hears. */
class Overhearing {
  readonly payloads: string[] = [];
  private constructor(private readonly client: pg.Client) {}

  static async start(url: string): Promise<Overhearing> {
    const client = new pg.Client(url);
    await client.connect();
    const listening = new Overhearing(client);
    client.on('notification', (message) => listening.payloads.push(message.payload ?? ''));
    await client.query(`LISTEN ${HINT_CHANNEL}`);
    return listening;
  }

  /** The payloads heard up to now: a marker is sent and awaited, so that every earlier commit's hints are in. */
  async heard(): Promise<string[]> {
    const marker = `marker ${this.payloads.length}`;
    await this.client.query('SELECT pg_notify($1, $2)', [HINT_CHANNEL, marker]);
    await until(() => this.payloads.includes(marker), `the test's own ${marker}`);
    return this.payloads.splice(0).filter((p) => !p.startsWith('marker '));
  }

  end(): Promise<void> {
    return this.client.end();
  }
}

let overhearing: Overhearing | null = null;
afterEach(async () => {
  await overhearing?.end();
  overhearing = null;
});

/** The hints of `node` among `payloads` that name `name`. */
function hintsOf(node: PostgresStore, name: string, payloads: string[]): string[] {
  return payloads.filter((p) => p.split('\n')[0] === node.nodeId && p.split('\n').includes(name));
}

describe('commit hints', () => {
  it('a node alone sends none; it hints while a second node listens, and stops once that one has gone', async () => {
    overhearing = await Overhearing.start(nodes.url());
    const first = await nodes.node();
    const name = v1StreamKey('hinted');
    await first.run('createStream', createRequest(name, { contentType: 'text/plain' }));
    expectAppended(await first.run('append', { name, request: text('a') }));
    expect(first.hinting).toBe(false);
    expect(hintsOf(first, name, await overhearing.heard())).toEqual([]);
    // The test's own marker is no node's hello.
    expect(first.hinting).toBe(false);

    const second = await nodes.node();
    // The second said so once listening: the first hints from then on, without waiting for its count.
    await until(() => first.hinting, 'the first node hinting once the second listens');
    expectAppended(await first.run('append', { name, request: text('b') }));
    const heard = await overhearing.heard();
    expect(hintsOf(first, name, heard)).toHaveLength(1);
    // The second's hello: its id and no names.
    expect(heard).toContain(second.nodeId);

    await second.close();
    await until(async () => {
      await first.countNodes();
      return !first.hinting;
    }, 'the first node alone again by its count');
    expectAppended(await first.run('append', { name, request: text('c') }));
    expect(hintsOf(first, name, await overhearing.heard())).toEqual([]);
  });

  it('two nodes hint each other from the start: a stream one of them appends to is forgotten by the other', async () => {
    const [a, b] = [await nodes.node(), await nodes.node()];
    await until(() => a.hinting && b.hinting, 'both nodes hinting');
    const name = v1StreamKey('forgotten');
    await b.run('createStream', createRequest(name, { contentType: 'text/plain' }));
    expectAppended(await b.run('append', { name, request: text('x') }));
    expect(b.knownStream(name)).toBeDefined();
    expectAppended(await a.run('append', { name, request: text('y') }));
    // a's hint names the stream: b no longer runs on the row it knew.
    await until(() => b.knownStream(name) === undefined, `b forgetting ${name} on a's hint`);
    const receipt = expectAppended(await b.run('append', { name, request: text('z') }));
    expect(receipt.start).toBe(2);
    expect(b.stats.stale).toBe(0);
  });

  it('a node whose database URL names an application of its own is counted all the same', async () => {
    const first = await nodes.node();
    expect(first.hinting).toBe(false);
    const url = new URL(nodes.url());
    url.searchParams.set('application_name', 'an-app-of-its-own');
    const second = await PostgresStore.open({ url: url.toString(), producers: DEFAULT_PRODUCER_SETTINGS, nowMs: clock.read });
    try {
      // The second's hello was heard; then a count, begun after it, decides on its own.
      await until(() => first.hinting, "the second node's hello heard");
      await first.countNodes();
      expect(first.hinting).toBe(true);
      // And the second counts the first.
      expect(second.hinting).toBe(true);
    } finally {
      await second.close();
    }
  });
});
