/**
 * The official Durable Streams client (@durable-streams/client from npm), unmodified,
 * against rill's bucket-less /v1/stream family: it creates, appends, reads and tails,
 * and rill's own client sees the same stream. The Yjs provider and its server
 * (@durable-streams/y-durable-streams) sync and compact documents on rill whatever
 * names their doc ids give the streams (issue 36).
 */
import { DurableStream, IdempotentProducer as OfficialProducer, stream as officialStream } from '@durable-streams/client';
import { YjsProvider } from '@durable-streams/y-durable-streams';
import { YjsServer } from '@durable-streams/y-durable-streams/server';
import * as Y from 'yjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RillClient } from '../../src/client/index.js';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { readAll, until } from '../helpers/processing.js';

let server: RunningServer;
let rill: RillClient;

beforeAll(async () => {
  server = await startServer({ args: ['--long-poll-timeout', '1s'] });
  rill = new RillClient({ url: server.url });
});

afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

function urlOf(name: string): string {
  return `${server.url}/v1/stream/${name}`;
}

/**
 * Collects JSON items from an official live session while `during` runs, until `count`
 * arrived; `during` is handed the items so far, to append each after the last arrived.
 */
async function tailItems(url: string, live: 'sse' | 'long-poll', count: number, during: (items: unknown[]) => Promise<void>): Promise<unknown[]> {
  const items: unknown[] = [];
  const session = await officialStream<unknown>({ url, live, offset: '-1' });
  session.subscribeJson(async (batch) => {
    items.push(...batch.items);
  });
  try {
    await during(items);
    await until(() => items.length >= count, `${count} items tailed with ${live}`);
  } finally {
    session.cancel();
  }
  return items;
}

describe('@durable-streams/client against rill', () => {
  it('creates, appends and reads a JSON stream', async () => {
    const url = urlOf(`official-json-${Date.now()}`);
    const handle = await DurableStream.create({ url, contentType: 'application/json' });
    await handle.append(JSON.stringify({ n: 1 }));
    await handle.append(JSON.stringify({ n: 2 }));
    const session = await officialStream<{ n: number }>({ url, live: false });
    expect(await session.json()).toEqual([{ n: 1 }, { n: 2 }]);
    // rill's client reads the same messages at the same offsets.
    expect(await readAll(rill.stream(url))).toEqual([{ n: 1 }, { n: 2 }]);
  });

  it('tails with SSE and with long-poll while rill appends', async () => {
    for (const live of ['sse', 'long-poll'] as const) {
      const url = urlOf(`official-tail-${live}-${Date.now()}`);
      await DurableStream.create({ url, contentType: 'application/json' });
      const writer = rill.stream(url);
      await writer.appendJson({ i: 0 });
      const items = await tailItems(url, live, 4, async (tailed) => {
        // Each append follows the delivery of the one before: the session is tailing when it lands.
        for (let i = 1; i < 4; i++) {
          await until(() => tailed.length === i, `item ${i - 1} tailed with ${live}`);
          await writer.appendJson({ i });
        }
      });
      expect(items).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }, { i: 3 }]);
    }
  });

  it('reads text streams and sees closure', async () => {
    const url = urlOf(`official-text-${Date.now()}`);
    const handle = await DurableStream.create({ url, contentType: 'text/plain' });
    await handle.append('hello ');
    await handle.append('world');
    await handle.close();
    const session = await officialStream({ url, live: false });
    expect(await session.text()).toBe('hello world');
    expect((await rill.stream(url).head()).closed).toBe(true);
  });

  it('the official producer pipelining 5 batches delivers every message once even when its seq 0 lands last', async () => {
    for (const contentType of ['application/json', 'application/octet-stream']) {
      for (let run = 0; run < 3; run++) {
        const url = urlOf(`official-pipelined-${run}-${contentType.split('/')[1]}-${Date.now()}`);
        const handle = await DurableStream.create({ url, contentType });
        // Every request carrying seq 0 is held back until rill has answered a later seq, so seq
        // 1.. of a producer rill has never seen arrive first: the race a pipelining client hits
        // by chance, made certain.
        let held = 0;
        let laterAnswered = 0;
        const slowSeqZero: typeof fetch = async (input, init) => {
          const seq = new Headers(init?.headers).get('producer-seq');
          if (seq === '0') {
            held++;
            await until(() => laterAnswered > 0, 'an answer to a seq after 0');
          }
          const response = await fetch(input, init);
          if (seq !== null && seq !== '0') laterAnswered++;
          return response;
        };
        const errors: Error[] = [];
        const producer = new OfficialProducer(handle, `pipelined-${run}`, { maxInFlight: 5, maxBatchBytes: 64, lingerMs: 0, fetch: slowSeqZero, onError: (e) => errors.push(e) });
        const messages = Array.from({ length: 60 }, (_, i) => ({ run, i, pad: 'x'.repeat(20) }));
        for (const m of messages) producer.append(contentType === 'application/json' ? JSON.stringify(m) : `${JSON.stringify(m)}\n`);
        await producer.flush();
        await producer.close();
        expect(errors).toEqual([]);
        expect(held).toBeGreaterThan(0);
        if (contentType === 'application/json') expect(await readAll(rill.stream(url))).toEqual(messages);
        else expect(await (await fetch(`${url}?offset=-1`)).text()).toBe(messages.map((m) => `${JSON.stringify(m)}\n`).join(''));
      }
    }
  });

  it("writes exactly-once with the official producer; rill's reader sees each once", async () => {
    const url = urlOf(`official-producer-${Date.now()}`);
    const handle = await DurableStream.create({ url, contentType: 'application/json' });
    const producer = new OfficialProducer(handle, 'official-writer', { autoClaim: true });
    for (let i = 0; i < 200; i++) producer.append(JSON.stringify({ i }));
    await producer.flush();
    await producer.close();
    expect(await readAll(rill.stream(url))).toEqual(Array.from({ length: 200 }, (_, i) => ({ i })));
  });
});

describe('@durable-streams/y-durable-streams (provider and server) on rill', () => {
  const SERVICE = 'notes';
  let yjs: YjsServer;
  const providers: YjsProvider[] = [];

  beforeAll(async () => {
    // A small threshold, so that a few edits make the server compact into a .snapshots/{offset}_snapshot stream.
    yjs = new YjsServer({ port: 0, dsServerUrl: server.url, compactionThreshold: 256 });
    await yjs.start();
  });

  afterAll(async () => {
    for (const provider of providers) provider.destroy();
    await yjs?.stop();
  });

  async function open(docId: string): Promise<Y.Doc> {
    const doc = new Y.Doc();
    const provider = new YjsProvider({ doc, baseUrl: `${yjs.url}/v1/yjs/${SERVICE}`, docId });
    providers.push(provider);
    await until(() => provider.synced, `provider of ${docId} synced`);
    return doc;
  }

  /** The status rill answers for the latest snapshot stream the Yjs server recorded in the document's index; null before one. */
  async function latestSnapshotStatus(docId: string): Promise<number | null> {
    const root = `${server.url}/v1/stream/yjs/${SERVICE}/docs/${docId}`;
    const index = await fetch(`${root}/.index?offset=-1`);
    if (index.status !== 200) return null;
    const latest = ((await index.json()) as Array<{ snapshotOffset: string }>).at(-1);
    if (latest === undefined) return null;
    return (await fetch(`${root}/.snapshots/${latest.snapshotOffset}_snapshot`, { method: 'HEAD' })).status;
  }

  it('syncs and compacts documents with 256-character doc ids holding "/" and segments spelled like rill\'s extensions', async () => {
    const long = `${'ab/C_d-9'.repeat(40)}`.slice(0, 255) + 'z';
    for (const docId of [long, 'notes/snapshot', `team/stats/attrs/${Date.now()}/retention`]) {
      const writer = await open(docId);
      const text = writer.getText('t');
      for (let i = 0; i < 8; i++) text.insert(text.length, `line ${i} of ${docId.slice(0, 40)}\n`);
      const expected = text.toString();
      await until(async () => (await latestSnapshotStatus(docId)) !== null, `a snapshot of ${docId.slice(0, 40)}`);
      expect(await latestSnapshotStatus(docId), docId).toBe(200);
      // A new reader starts from the snapshot and the updates after it.
      const reader = await open(docId);
      await until(() => reader.getText('t').toString() === expected, `the text of ${docId.slice(0, 40)} on a new reader`);
    }
  });
});
