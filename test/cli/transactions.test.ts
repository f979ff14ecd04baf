/**
 * `rill tx BUCKET/KEY`: group transactions from `--op` and from NDJSON on stdin, the
 * acknowledgements printed (plain and --json), refusals exiting 1 with the operation named
 * and every stream unchanged, producer retries, and usage mistakes exiting 2. The real
 * binary against one real server.
 */
import { describe, expect, it } from 'vitest';
import { CLI_TEST_TIMEOUT_MS, useCliServer } from '../helpers/cli.js';

const BUCKET = 'txcli';
const cli = useCliServer(BUCKET);
const { rill, ok } = cli;
let counter = 0;

// Setup and checks go over HTTP: every run of the binary starts a Node process, so only
// the commands under test run it.
const url = (path: string) => `${cli.server.url}/${path}`;

/** A fresh affinity key with a JSON stream `journal` and a text stream `notes`, both empty. */
async function group(): Promise<string> {
  counter += 1;
  const key = `${BUCKET}/key-${counter}`;
  for (const [stream, type] of [['journal', 'application/json'], ['notes', 'text/plain']]) {
    expect((await fetch(url(`${key}/${stream}`), { method: 'PUT', headers: { 'content-type': type! } })).status).toBe(201);
  }
  return key;
}

/** A stream's bytes from the start. */
async function read(path: string): Promise<string> {
  const res = await fetch(url(`${path}?offset=-1`));
  expect(res.status).toBe(200);
  return res.text();
}

const op = (value: unknown) => JSON.stringify(value);
const lines = (text: string) => text.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);

/** What a reader and a HEAD see of each stream, to compare before and after a refusal. */
async function states(key: string): Promise<unknown[]> {
  const out: unknown[] = [];
  for (const stream of ['journal', 'notes']) {
    const head = await fetch(url(`${key}/${stream}`), { method: 'HEAD' });
    out.push(await read(`${key}/${stream}`), head.headers.get('stream-next-offset'), head.headers.get('stream-record-next'), head.headers.get('stream-closed'));
  }
  return out;
}

describe('rill tx', { timeout: CLI_TEST_TIMEOUT_MS }, () => {
  it('commits the --op operations in order and prints one acknowledgement per operation', async () => {
    const key = await group();
    const stdout = await ok([
      'tx', key,
      '--op', op({ stream: 'journal', value: { step: 1 }, record_match: 0 }),
      '--op', op({ stream: 'notes', text: 'note 1\n' }),
      '--op', op({ stream: 'journal', messages: ['a', 'b'], record_match: 1 }),
    ]);
    expect(stdout).toBe(
      [
        'journal appended offset 00000000000000000000 next-offset 00000000000000000011 record-start 0 record-next 1',
        'notes appended offset 00000000000000000000 next-offset 00000000000000000007',
        'journal appended offset 00000000000000000011 next-offset 00000000000000000019 record-start 1 record-next 3',
        '',
      ].join('\n'),
    );
    expect(JSON.parse(await read(`${key}/journal`))).toEqual([{ step: 1 }, 'a', 'b']);
    expect(await read(`${key}/notes`)).toBe('note 1\n');
  });

  it('reads NDJSON operations from stdin when there is no --op, and prints JSON with --json', async () => {
    const key = await group();
    const stdin = `${op({ stream: 'notes', base64: Buffer.from('hi\n').toString('base64') })}\n\n${op({ stream: 'journal', value: [1, 2], close_after: true })}\n`;
    const acks = lines(await ok(['tx', key, '--json'], stdin));
    expect(acks).toEqual([
      { stream: 'notes', offset: '00000000000000000000', nextOffset: '00000000000000000003', closed: false, duplicate: false },
      { stream: 'journal', offset: '00000000000000000000', nextOffset: '00000000000000000006', closed: true, duplicate: false, records: { start: 0, next: 1 } },
    ]);
    expect(JSON.parse(await read(`${key}/journal`))).toEqual([[1, 2]]);
  });

  it('a refusal exits 1 naming the operation, and leaves every stream unchanged', async () => {
    const key = await group();
    await ok(['tx', key, '--op', op({ stream: 'journal', value: 0 })]);
    const before = await states(key);
    const stale = await rill(['tx', key, '--op', op({ stream: 'notes', text: 'x\n' }), '--op', op({ stream: 'journal', value: 1, record_match: 0 })]);
    expect([stale.code, stale.stdout]).toEqual([1, '']);
    expect(stale.stderr).toMatch(/^rill: RECORD_MATCH_FAILED: operation 1 \(journal\): .* \(HTTP 412\)\n$/);
    const missing = await rill(['tx', key, '--json'], `${op({ stream: 'journal', value: 2 })}\n${op({ stream: 'absent', value: 3 })}\n`);
    expect(missing.code).toBe(1);
    expect(JSON.parse(missing.stderr)).toEqual({ error: { code: 'STREAM_NOT_FOUND', message: 'operation 1 (absent): stream not found', status: 404, operation: 1 } });
    expect(await states(key)).toEqual(before);
  });

  it('a producer retry prints the original acknowledgements as duplicates', async () => {
    const key = await group();
    const producer = { producer_id: 'importer', producer_epoch: 0, producer_seq: 0 };
    const args = ['tx', key, '--op', op({ stream: 'journal', value: 'once', producer }), '--op', op({ stream: 'notes', text: 'once\n', producer })];
    const first = await ok(args);
    expect(first).toContain('journal appended');
    expect(await ok(args)).toBe(first.replaceAll('appended', 'duplicate'));
    expect(JSON.parse(await read(`${key}/journal`))).toEqual(['once']);
  });

  it('refuses usage mistakes with exit 2, sending nothing', async () => {
    const key = await group();
    const usage = async (args: string[], stdin: string, message: string) => {
      const run = await rill(args, stdin);
      expect([run.code, run.stdout], run.stderr).toEqual([2, '']);
      expect(run.stderr).toContain(message);
    };
    await usage(['tx', BUCKET, '--op', op({ stream: 'journal', value: 1 })], '', 'tx takes BUCKET/KEY');
    await usage(['tx', key], '', 'no operations');
    await usage(['tx', key, '--op', '{"stream":'], '', 'operation 0 (--op) is not JSON');
    await usage(['tx', key, '--op', op({ stream: 'journal', value: 1 }), '--op', op({ stream: 'journal' })], '', 'operation 1 (--op): give the payload as exactly one of');
    await usage(['tx', key], `${op({ stream: 'journal', value: 1 })}\n${op({ stream: 'journal', value: 1, stream_closed: true })}\n`, 'stdin line 2: unknown member "stream_closed"');
    await usage(['tx', key, '--op', op({ stream: 'notes', base64: 'aGk' })], '', '"base64" is standard padded base64');
    expect(JSON.parse(await read(`${key}/journal`))).toEqual([]);
  });
});
