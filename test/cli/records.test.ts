/**
 * The `rill` commands by record ordinal: `read --record / --tail-records / --max-records /
 * --ordinals`, `tail` by record, `append --record-match`, record tails in `head`, and the
 * refusals (usage mistakes exit 2, the server's and the client's refusals exit 1). The
 * real binary against one real server (memory store: nothing here depends on the engine).
 */
import { describe, expect, it } from 'vitest';
import { CLI_TEST_TIMEOUT_MS, startCli, useCliServer } from '../helpers/cli.js';
import { until, untilLiveReader, within } from '../helpers/processing.js';

const cli = useCliServer('recs', { store: 'memory' });
const { rill, ok } = cli;

async function refused(args: string[], code: number, stdin = ''): Promise<string> {
  const run = await rill(args, stdin);
  expect(run.code, run.stdout).toBe(code);
  return run.stderr;
}

/**
 * A JSON stream holding the values 0 to count - 1, made over HTTP by rill's client as
 * `rill create -t application/json` and `rill append` with those lines on stdin make it (one
 * append of the values): the commands under test read and append to it.
 */
async function numbers(name: string, count: number): Promise<string> {
  const stream = cli.client.stream(`recs/${name}`);
  await stream.create({ contentType: 'application/json' });
  if (count > 0) await stream.appendMessages(Array.from({ length: count }, (_, i) => i));
  return `recs/${name}`;
}

describe('rill read by record', { timeout: CLI_TEST_TIMEOUT_MS }, () => {
  it('starts at a record, at the last k, prints ordinals, and reads one bounded answer', async () => {
    const path = await numbers('read', 6);
    expect(await ok(['read', path, '--record', '3'])).toBe('3\n4\n5\n');
    expect(await ok(['read', path, '--record', 'now'])).toBe('');
    expect(await ok(['read', path, '--tail-records', '2', '--ordinals'])).toBe('4\t4\n5\t5\n');
    expect(await ok(['read', path, '--ordinals'])).toBe('0\t0\n1\t1\n2\t2\n3\t3\n4\t4\n5\t5\n');
    expect((await ok(['read', path, '--record', '4', '--json'])).trim().split('\n').map((l) => JSON.parse(l))).toEqual([
      { record: 4, value: 4 },
      { record: 5, value: 5 },
    ]);
    const page = await rill(['read', path, '--record', '1', '--max-records', '2']);
    expect([page.code, page.stdout, page.stderr]).toEqual([0, '1\n2\n', 'rill: more to read: --record 3\n']);
    const last = await rill(['read', path, '--record', '4', '--max-records', '5']);
    expect([last.stdout, last.stderr]).toEqual(['4\n5\n', '']);
    const bytes = await rill(['read', path, '--record', '0', '--max-bytes', '4']);
    expect([bytes.stdout, bytes.stderr]).toEqual(['0\n1\n', 'rill: more to read: --record 2\n']);
  });

  it('refuses a start given twice or malformed (usage, exit 2), a record past the tail and a stream without records (exit 1)', async () => {
    const path = await numbers('refusals', 2);
    expect(await refused(['read', path, '--record', '0', '--offset', '-1'], 2)).toBe('rill: USAGE: a read starts at an --offset or at a record (--record, --tail-records), not both\n');
    expect(await refused(['read', path, '--record', '0', '--tail-records', '1'], 2)).toBe('rill: USAGE: start at --record or at --tail-records, not both\n');
    expect(await refused(['read', path, '--record', 'first'], 2)).toContain('expected a record ordinal (0, 1, 2, ...) or now');
    expect(await refused(['read', path, '--max-records', '0'], 2)).toContain('expected a positive integer');
    expect(await refused(['read', path, '--record', '3'], 1)).toMatch(/^rill: RECORD_BEYOND_TAIL: record 3 is beyond the record tail, 2 \(HTTP 400\)\n$/);
    await cli.client.stream('recs/text').create({ contentType: 'text/plain' });
    expect(await refused(['read', 'recs/text', '--record', '0'], 1)).toMatch(/^rill: RECORDS_NOT_ACTIVE: .* \(HTTP 400\)\n$/);
  });

  it('says where the retained records start when a record was trimmed', async () => {
    const path = await numbers('trimmed', 4);
    const url = `${cli.server.url}/${path}`;
    expect((await fetch(`${url}/snapshot?record=2`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{}' })).status).toBe(204);
    expect((await fetch(`${url}/retention?record=2`, { method: 'PUT' })).status).toBe(204);
    const gone = await refused(['read', path, '--record', '0'], 1);
    expect(gone).toContain('RECORD_TRIMMED');
    expect(gone).toContain(`the first retained record is 2: read from there (rill read ${path} --record 2) or start from the snapshot (rill bootstrap ${path})`);
    expect(await ok(['read', path, '--record', '2'])).toBe('2\n3\n');
  });

  it('tails the last k records, then what is appended, until the stream is closed', async () => {
    const path = await numbers('tail', 3);
    const tail = startCli(cli.server.url, ['tail', path, '--tail-records', '1', '--ordinals']);
    await until(() => tail.stdout() === '2\t2\n', 'the tail to print the last record');
    await untilLiveReader(`${cli.server.url}/${path}`);
    await ok(['append', path, '3', '--close']);
    expect(await within(tail.exited, 15_000, 'the tail to end at the close'), tail.stderr()).toBe(0);
    expect(tail.stdout()).toBe('2\t2\n3\t3\n');
  });
});

describe('rill append --record-match and head', { timeout: CLI_TEST_TIMEOUT_MS }, () => {
  it('appends only at the record tail it names, chaining stdin batches, and says the range', async () => {
    const path = await numbers('match', 1);
    expect(await ok(['append', path, '"a"', '--record-match', '1'])).toMatch(/^appended next-offset \d{20} record-start 1 record-next 2\n$/);
    expect(await refused(['append', path, '"b"', '--record-match', '1'], 1)).toMatch(/^rill: RECORD_MATCH_FAILED: Stream-Record-Match 1 is not the stream's record tail, 2 \(HTTP 412\)\n$/);
    // 1,001 lines go in two appends (1,000 lines each at most): the second expects the tail the first left.
    const lines = Array.from({ length: 1001 }, (_, i) => `{"l":${i}}\n`).join('');
    expect(await ok(['append', path, '--record-match', '2'], lines)).toMatch(/record-start 1002 record-next 1003\n$/);
    expect(await ok(['read', path, '--record', '1', '--max-records', '2'])).toBe('"a"\n{"l":0}\n');
    expect(await ok(['head', path])).toMatch(/\nextensions: json-record-coordinates-v1\nrecord-first: 0\nrecord-next: 1003\n$/);
    expect(JSON.parse(await ok(['--json', 'head', path]))).toMatchObject({ recordsActive: true, recordFirst: 0, recordNext: 1003 });
  });

  it('refuses --record-match with --producer (usage) and on a stream without records (nothing sent)', async () => {
    const path = await numbers('match-refusals', 1);
    expect(await refused(['append', path, '2', '--record-match', '1', '--producer', 'p'], 2)).toBe('rill: USAGE: --record-match goes with plain appends, not with --producer\n');
    await cli.client.stream('recs/text-match').create({ contentType: 'text/plain' });
    expect(await refused(['append', 'recs/text-match', 'x', '--record-match', '0'], 1)).toMatch(/^rill: RECORDS_NOT_ACTIVE: .*recordMatch was not sent\n$/);
    expect(await ok(['head', 'recs/text-match'])).not.toMatch(/record-/);
  });
});
