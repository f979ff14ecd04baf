/**
 * The `rill` client commands, run as the real binary (dist/bin/rill.js) against a real
 * server: plain output by default, --json on request, RILL_URL or --url.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI_TEST_TIMEOUT_MS, runCli, startCli } from '../helpers/cli.js';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { until, untilLiveReader, within } from '../helpers/processing.js';

let server: RunningServer;

beforeAll(async () => {
  server = await startServer();
});

afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

const rill = (args: string[], options: { stdin?: string; env?: Record<string, string> } = {}) => runCli(server.url, args, options);

async function ok(args: string[], options?: { stdin?: string }): Promise<string> {
  const run = await rill(args, options);
  expect(run.code, run.stderr).toBe(0);
  return run.stdout;
}

const start = (args: string[]) => startCli(server.url, args);

describe('rill client commands', { timeout: CLI_TEST_TIMEOUT_MS }, () => {
  it('creates, appends from argument and stdin, reads, heads and lists', async () => {
    expect(await ok(['buckets', 'create', 'clibk'])).toBe('created clibk\n');
    expect(await ok(['create', 'clibk/events', '-t', 'application/json'])).toMatch(/^created clibk\/events \(application\/json\)/);
    expect(await ok(['append', 'clibk/events', '{"n":1}'])).toMatch(/^appended next-offset 00000000000000000008 record-start 0 record-next 1\n$/);
    await ok(['append', 'clibk/events', '--producer', 'cli-writer'], { stdin: '{"n":2}\n\n{"n":3}\n' });
    // A second run of the same producer claims a newer epoch by itself.
    await ok(['append', 'clibk/events', '--producer', 'cli-writer'], { stdin: '{"n":4}\n' });
    expect(await ok(['read', 'clibk/events'])).toBe('{"n":1}\n{"n":2}\n{"n":3}\n{"n":4}\n');
    const lines = (await ok(['read', 'clibk/events', '--json'])).trim().split('\n').map((l) => JSON.parse(l));
    expect(lines[1]).toEqual({ offset: '00000000000000000008', nextOffset: '00000000000000000016', value: { n: 2 } });
    const head = JSON.parse(await ok(['--json', 'head', 'clibk/events']));
    expect(head).toMatchObject({ contentType: 'application/json', nextOffset: '00000000000000000032', closed: false });
    expect(await ok(['head', 'clibk/events'])).toMatch(/^content-type: application\/json\nnext-offset: 00000000000000000032\nclosed: false\n/);
    expect(await ok(['ls', 'clibk'])).toBe('events\n');
    expect(JSON.parse(await ok(['ls', 'clibk', '--json']))).toEqual({ bucket: 'clibk', streams: ['events'] });
    expect(JSON.parse(await ok(['buckets', 'show', 'clibk', '--json']))).toMatchObject({ id: 'clibk', streamCount: 1 });
  });

  it('tails with SSE until the stream is closed', async () => {
    await ok(['create', 'v1/stream/cli-tail', '-t', 'text/plain']);
    await ok(['append', 'v1/stream/cli-tail', 'before ']);
    const tail = start(['tail', 'v1/stream/cli-tail', '--offset', '-1']);
    // The rest is appended once the tail has caught up and waits for more.
    await until(() => tail.stdout() === 'before ', 'the tail to print the history');
    await untilLiveReader(`${server.url}/v1/stream/cli-tail`);
    await ok(['append', 'v1/stream/cli-tail', 'after', '--close']);
    expect(await within(tail.exited, 15_000, 'the tail to end at the close'), tail.stderr()).toBe(0);
    expect(tail.stdout()).toBe('before after');
    // Caught up, it said on stderr that it was live, and from where.
    expect(tail.stderr()).toBe('rill: live from offset 00000000000000000007: waiting for new data (Ctrl-C to stop)\n');
  });

  it('stops a tail on Ctrl-C', async () => {
    await ok(['create', 'v1/stream/cli-sigint', '-t', 'text/plain']);
    const tail = start(['tail', 'v1/stream/cli-sigint']);
    // Ctrl-C once the tail is reading: it waits on the stream, and prints what is appended
    // after it started.
    await untilLiveReader(`${server.url}/v1/stream/cli-sigint`);
    await fetch(`${server.url}/v1/stream/cli-sigint`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'x' });
    await until(() => tail.stdout() === 'x', 'the tail to print the append');
    tail.child.kill('SIGINT');
    expect(await within(tail.exited, 10_000, 'the tail to stop on SIGINT'), tail.stderr()).toBe(0);
    expect(tail.stderr()).toBe('rill: live from offset 00000000000000000000: waiting for new data (Ctrl-C to stop)\n');
  });

  it('reports typed errors on stderr with exit code 1, and honours --url', async () => {
    const missing = await rill(['head', 'clibk/nope']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^rill: STREAM_NOT_FOUND: /);
    await ok(['create', 'v1/stream/cli-seq', '-t', 'application/json']);
    await ok(['append', 'v1/stream/cli-seq', '{"a":1}', '--stream-seq', '05']);
    const conflict = await rill(['append', 'v1/stream/cli-seq', '{"a":2}', '--stream-seq', '04']);
    expect(conflict.code).toBe(1);
    expect(conflict.stderr).toMatch(/^rill: STREAM_SEQ_CONFLICT: /);
    const elsewhere = await rill(['--url', 'http://127.0.0.1:9', 'head', 'v1/stream/cli-seq']);
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.stderr).toMatch(/^rill: CONNECTION_FAILED: HEAD http:\/\/127.0.0.1:9\/v1\/stream\/cli-seq: /);
    expect(await ok(['rm', 'v1/stream/cli-seq'])).toBe('deleted v1/stream/cli-seq\n');
    expect((await rill(['read', 'v1/stream/cli-seq'])).code).toBe(1);
  });
});
