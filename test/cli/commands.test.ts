/**
 * The `rill` client commands where a first-time user trips: every mistake answers what
 * went wrong and what to do, in one error format, and every server feature has a
 * command. The real binary against one real server (memory store: nothing here depends
 * on the engine); the streams and buckets a test starts from are made over HTTP by rill's
 * client (`cli.client`), and the binary runs the commands under test.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CLI_TEST_TIMEOUT_MS, useCliServer } from '../helpers/cli.js';
import { freePort } from '../helpers/server.js';

const cli = useCliServer('first', { store: 'memory' });
const { rill, ok } = cli;

describe('rill commands, first hour', { timeout: CLI_TEST_TIMEOUT_MS }, () => {
  it('refuses a create without a stream name, and heads a bucket', async () => {
    const bare = await rill(['create', 'first']);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toBe('rill: USAGE: first names a bucket, not a stream: create the bucket with "rill buckets create first", a stream with "rill create first/NAME"\n');
    expect(await ok(['head', 'first'])).toMatch(/^id: first\nstreams: 0\n/);
  });

  it('creates a stream with a retention policy, which trims as it is written', async () => {
    await ok(['create', 'first/kept', '-t', 'application/json', '--keep-messages', '2', '--keep-bytes', '1MiB', '--keep-age', '7d']);
    // Written by the client, as `rill append first/kept '{"n":N}'` sends them: the create is under test.
    for (const n of [1, 2, 3]) await cli.client.stream('first/kept').append(`{"n":${n}}`, { contentType: 'application/json' });
    const head = JSON.parse(await ok(['--json', 'head', 'first/kept'])) as { earliestOffset: string; retention: unknown };
    expect(head.retention).toEqual({ maxBytes: 1024 * 1024, maxMessages: 2, maxAgeMs: 7 * 24 * 3600 * 1000 });
    expect(head.earliestOffset).toBe('00000000000000000008');
    const refused = await rill(['create', 'first/bad', '--keep-messages', '0']);
    expect(refused.code).toBe(2);
  });

  it('uses an explicit --epoch as given, or says why the server refused it', async () => {
    await cli.client.stream('first/epochs').create({ contentType: 'application/json' });
    await ok(['append', 'first/epochs', '{"e":5}', '--producer', 'p', '--epoch', '5']);
    const lower = await rill(['append', 'first/epochs', '{"e":2}', '--producer', 'p', '--epoch', '2']);
    expect(lower.code).toBe(1);
    expect(lower.stderr).toMatch(/^rill: PRODUCER_FENCED: .* \(HTTP 403\)\n$/);
    expect(await ok(['read', 'first/epochs'])).toBe('{"e":5}\n');
    const head = JSON.parse(await ok(['--json', 'head', 'first/epochs'])) as { nextOffset: string };
    expect(head.nextOffset).toBe('00000000000000000008');
  });

  it('prints its version, takes a URL without a scheme, and names a refused URL', async () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    // The version and the commit the build was made from (dist/build-info.json, written by the build).
    const built = JSON.parse(readFileSync(new URL('../../dist/build-info.json', import.meta.url), 'utf8')) as { commit: string };
    expect(built.commit).toMatch(/^([0-9a-f]{40}|unknown)$/);
    expect(await ok(['--version'])).toBe(`${pkg.version} (commit ${built.commit})\n`);
    expect(await ok(['--url', cli.server.url.replace('http://', ''), 'head', 'first'])).toMatch(/^id: first/);
    const port = await freePort();
    const refused = await rill(['--url', `127.0.0.1:${port}`, 'head', 'first/x']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(
      `rill: CONNECTION_FAILED: HEAD http://127.0.0.1:${port}/first/x: the connection was refused: nothing listens on 127.0.0.1:${port} (ECONNREFUSED); start a server there (rill serve), or point the CLI at yours with --url or RILL_URL\n`,
    );
    // https:// against a server that speaks http says so.
    const https = cli.server.url.replace('http://', 'https://');
    const tls = await rill(['--url', https, 'head', 'first/x']);
    expect(tls.code).toBe(1);
    expect(tls.stderr).toMatch(/^rill: CONNECTION_FAILED: HEAD https:\/\/127\.0\.0\.1:\d+\/first\/x: 127\.0\.0\.1:\d+ does not speak TLS \(https\): it may be an http server; use an http:\/\/ URL \(ERR_SSL_WRONG_VERSION_NUMBER\); /);
  });

  it('reports errors as JSON with --json: code, message, status', async () => {
    const missing = await rill(['--json', 'head', 'first/nope']);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toBe('');
    expect(JSON.parse(missing.stderr)).toEqual({ error: { code: 'STREAM_NOT_FOUND', message: 'stream not found: /first/nope', status: 404 } });
  });

  it('honours read --max-bytes, says tail starts at now, says what an offset is, and refuses an empty stdin', async () => {
    // As `rill create -t application/json` and `rill append` of these lines on stdin make it.
    await cli.client.stream('first/bounded').create({ contentType: 'application/json' });
    await cli.client.stream('first/bounded').appendMessages([{ n: 1 }, { n: 2 }, { n: 3 }]);
    const bounded = await rill(['read', 'first/bounded', '--max-bytes', '16']);
    expect(bounded.stdout).toBe('{"n":1}\n{"n":2}\n');
    expect(bounded.stderr).toBe('rill: more to read: --offset 00000000000000000016\n');
    expect(await ok(['tail', '--help'])).toMatch(/from now/);
    // An offset typed by hand is told what an offset is.
    const short = await rill(['read', 'first/bounded', '--offset', '5']);
    expect(short.code).toBe(1);
    expect(short.stderr).toBe('rill: INVALID_OFFSET: "5" is not an offset: use -1 (the start), now (the tail) or an offset rill answered, 20 digits as in Stream-Next-Offset (HTTP 400)\n');
    const empty = await rill(['append', 'first/bounded'], '');
    expect(empty.code).toBe(1);
    expect(empty.stderr).toBe('rill: EMPTY_BODY: stdin was empty: nothing was appended\n');
  });

  it('publishes a snapshot, trims, bootstraps, labels and forks; a 410 says where to start', async () => {
    await cli.client.stream('first/long').create({ contentType: 'application/json' });
    await cli.client.stream('first/long').appendMessages([{ n: 1 }, { n: 2 }]);
    const none = await rill(['snapshot', 'first/long']);
    expect(none.code).toBe(1);
    expect(none.stderr).toBe('rill: SNAPSHOT_NOT_FOUND: first/long has no snapshot; publish one with "rill snapshot first/long OFFSET DATA" (HTTP 404)\n');
    expect(await ok(['snapshot', 'first/long', '00000000000000000008', '{"sum":1}'])).toMatch(/^published snapshot at 00000000000000000008 digest [0-9a-f]{64}\n$/);
    expect(await ok(['snapshot', 'first/long'])).toBe('{"sum":1}');
    expect(await ok(['retention', 'first/long', '00000000000000000008'])).toBe('earliest-offset 00000000000000000008\n');
    const gone = await rill(['read', 'first/long']);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain('the earliest offset is 00000000000000000008: read from there (rill read first/long --offset 00000000000000000008) or start from the snapshot (rill bootstrap first/long)');
    expect(await ok(['bootstrap', 'first/long'])).toBe('{"sum":1}\n{"n":2}\n');
    await ok(['attrs', 'first/long', '{"title":"Long"}']);
    expect(JSON.parse(await ok(['attrs', 'first/long']))).toEqual({ title: 'Long' });
    expect(await ok(['fork', 'first/long', 'first/long-fork', '--offset', '00000000000000000016'])).toBe(
      'forked first/long-fork from first/long (application/json) next-offset 00000000000000000016\n',
    );
    expect(await ok(['read', 'first/long-fork', '--offset', '00000000000000000008'])).toBe('{"n":2}\n');
  });

  it("changes a bucket's settings (buckets set), shows them, and prints the usage record", async () => {
    await cli.client.bucket('tuned').create();
    const set = await ok(['buckets', 'set', 'tuned', '--public-read', 'on', '--max-streams', '5', '--max-bytes', '1KiB']);
    expect(set).toMatch(/^id: tuned\nstreams: 0\n/);
    expect(set).toContain('public-read: on\nlimits: streams 5, subscriptions none, bytes 1024\n');
    await cli.client.stream('tuned/notes').create({ contentType: 'text/plain' });
    await cli.client.stream('tuned/notes').append('hello', { contentType: 'text/plain' });
    const shown = JSON.parse(await ok(['--json', 'buckets', 'show', 'tuned'])) as { retainedBytes: number };
    expect(shown).toMatchObject({ streamCount: 1, publicRead: true, overrides: { maxStreams: 5, maxSubscriptions: null, maxBytes: 1024 } });
    // default gives a limit back to the server's (none here), 0 lifts it for the bucket.
    const back = JSON.parse(await ok(['--json', 'buckets', 'set', 'tuned', '--max-bytes', 'default', '--max-streams', '0', '--public-read', 'off']));
    expect(back).toMatchObject({ publicRead: false, limits: { maxStreams: null, maxBytes: null }, overrides: { maxStreams: 0, maxBytes: null } });
    for (const args of [[], ['--public-read', 'yes'], ['--max-bytes', 'lots']]) {
      const refused = await rill(['buckets', 'set', 'tuned', ...args]);
      expect(refused.code, args.join(' ')).toBe(2);
    }
    expect((await rill(['buckets', 'set', 'tuned'])).stderr).toContain('name a setting to change');
    // A default retention policy for its streams, shown, then removed.
    const kept = await ok(['buckets', 'set', 'tuned', '--retention', '{"maxAgeMs":604800000}']);
    expect(kept).toContain('retention: {"maxBytes":null,"maxMessages":null,"maxAgeMs":604800000}\n');
    expect(JSON.parse(await ok(['--json', 'buckets', 'set', 'tuned', '--retention', 'none']))).toMatchObject({ retention: null });
    expect((await rill(['buckets', 'set', 'tuned', '--retention', '{bad'])).code).toBe(2);
    expect((await rill(['buckets', 'set', 'tuned', '--retention', '{"maxAgeMs":0}'])).stderr).toMatch(/^rill: INVALID_BUCKET_SETTINGS: /);
    // The usage record: with auth off every write is the subject "-".
    const rows = (await ok(['--json', 'usage', '--bucket', 'tuned'])).trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(rows).toEqual([{ bucket: 'tuned', subject: '-', appends: 1, bytesIn: shown.retainedBytes, bytesOut: 0, liveReaders: 0 }]);
    expect(await ok(['usage', '--bucket', 'tuned'])).toBe(`tuned\t-\tappends 1\tbytes-in ${shown.retainedBytes}\tbytes-out 0\tlive 0\n`);
  });
});
