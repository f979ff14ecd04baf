/**
 * Long CLI jobs draw a progress bar on a terminal and nothing when piped. `script` (util-
 * linux) runs the command on a pseudo-terminal; the piped runs get plain pipes.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI } from '../helpers/server.js';
import { startInProcess, type Running } from './ops-helpers.js';

const exec = promisify(execFile);

/** The command's terminal output, run on a pseudo-terminal. */
async function onTerminal(command: string): Promise<string> {
  const { stdout } = await exec('script', ['-qec', command, '/dev/null']);
  return stdout;
}

async function piped(command: string): Promise<{ stdout: string; stderr: string }> {
  return exec('sh', ['-c', command]);
}

describe('progress bars', () => {
  let server: Running;
  let input: string;
  let node: string;

  beforeAll(async () => {
    server = await startInProcess();
    await fetch(`${server.url}/progress-b`, { method: 'PUT' });
    for (const s of ['tty', 'pipe']) await fetch(`${server.url}/progress-b/${s}`, { method: 'PUT' });
    input = join(server.dataDir, 'input.bin');
    writeFileSync(input, randomBytes(1_500_000));
    node = `${process.execPath} ${CLI} --url ${server.url}`;
  });
  afterAll(() => server.stop());

  it('append from stdin and read to a file show a bar on a terminal, and none when piped', async () => {
    const [ttyAppend, pipeAppend] = await Promise.all([onTerminal(`${node} append progress-b/tty < ${input}`), piped(`${node} append progress-b/pipe < ${input}`)]);
    expect(ttyAppend).toMatch(/append \[=+\] 100% 1\.4 MiB \/ 1\.4 MiB/);
    expect(pipeAppend).toEqual({ stdout: 'appended next-offset 00000000000001500000\n', stderr: '' });

    const [ttyRead, pipeRead] = await Promise.all([
      onTerminal(`${node} read progress-b/tty > ${input}.tty`),
      piped(`${node} read progress-b/pipe > ${input}.pipe`),
    ]);
    expect(ttyRead).toMatch(/read \[=+\] 100% 1\.4 MiB \/ 1\.4 MiB/);
    expect(pipeRead).toEqual({ stdout: '', stderr: '' });
    for (const copy of [`${input}.tty`, `${input}.pipe`]) expect(readFileSync(copy).equals(readFileSync(input))).toBe(true);
  });

  it('check and backup show a bar on a terminal, and only their result when piped', async () => {
    const data = `--data ${server.dataDir}`;
    const [ttyCheck, pipeCheck, ttyBackup] = await Promise.all([
      onTerminal(`${process.execPath} ${CLI} check ${data}`),
      piped(`${process.execPath} ${CLI} check ${data} 2>&1`),
      onTerminal(`${process.execPath} ${CLI} backup ${server.dataDir}/copy.db ${data}`),
    ]);
    expect(ttyCheck).toMatch(/check \[=+\] 100% 2 \/ 2 streams/);
    expect(pipeCheck.stdout).toMatch(/^ok: \S+: 2 streams, \d+ appends, 0 producer records\n$/);
    expect(ttyBackup).toMatch(/backup \[=+\] 100% (\d+) \/ \1 pages/);
  });
});
