/**
 * Two instances of one processor at once (seed 003: only one may publish under a
 * producer name). The newer instance claims a higher epoch with its first result,
 * which fences the older one: the older one's next write answers 403 and it stops. The
 * target stays exactly-once throughout.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { RillClient, type StreamHandle } from '../../src/client/index.js';
import { removeDir, startServer, type ServerProcess } from '../helpers/server.js';
import {
  exitOf,
  expectSource,
  expectWindows,
  makeJsonStreams,
  readAll,
  SourceWriter,
  stopProcessing,
  startProcessor,
  tailOf,
  waitForProgress,
  type Aggregate,
  type ChildConfig,
  type ProcessorChild,
} from '../helpers/processing.js';

const FENCED_EXIT = 3;
let server: ServerProcess | undefined;

afterEach(async () => {
  await stopProcessing();
  await server?.stop();
  if (server) removeDir(server.dataDir);
  server = undefined;
});

describe('two instances of one processor', () => {
  it('fences the older instance; the target stays exactly-once', { timeout: 60_000 }, async () => {
    server = await startServer({ process: true });
    const client = new RillClient({ url: server.url });
    const [source, sums] = (await makeJsonStreams(client, 'fence', ['source', 'sums'])) as [StreamHandle, StreamHandle];
    const config: ChildConfig = { url: server.url, source: 'fence/source', targets: ['fence/sums'], producerId: 'summer', windowCount: 10 };
    let older: ProcessorChild | undefined;
    /** How much the source held when the older instance stopped. */
    let writtenAtFence: number | undefined;
    const feed: SourceWriter = new SourceWriter(source, {
      prefill: 1000,
      batch: 20,
      pauseMs: 30,
      minTotal: 1000,
      maxTotal: 20_000,
      // Keep the source growing until the older instance has stopped (it stops on its next
      // write), and 20 windows more, which only the newer one can publish.
      keepGoing: (): boolean => {
        if (older === undefined || older.child.exitCode === null) return true;
        writtenAtFence ??= feed.written;
        return feed.written < writtenAtFence + 200;
      },
    });
    older = startProcessor(config);
    await waitForProgress([sums], 0, older, 15_000);
    const newer = startProcessor(config);
    const olderExit = await exitOf(older, 40_000);
    expect(olderExit, older.output()).toBe(FENCED_EXIT);
    expect(older.output()).toMatch(/PRODUCER_FENCED/);
    // The newer instance goes on publishing after the older one stopped.
    const afterFence = await tailOf(sums);
    const total = await feed.done;
    const newerExit = await exitOf(newer, 40_000);
    expect(newerExit, newer.output()).toBe(0);
    expect(await tailOf(sums)).toBeGreaterThan(afterFence);
    await expectSource(source, total);
    expectWindows(await readAll<Aggregate>(sums), total, 10);
  });
});
