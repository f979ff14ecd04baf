/**
 * Backup under load: writers append while `rill backup` copies the data directory of the
 * running server; the restored directory passes `rill check`, and a server on it holds
 * every write acknowledged before the backup began, each stream a gap-free prefix of
 * what was written (a consistent state), its record ordinals as they were. A damaged copy fails `rill check` and is not
 * restored.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, openSync, statSync, writeSync, closeSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { backupDataDir, restoreDataDir } from '../../src/storage/sqlite/backup.js';
import { CLI, removeDir, startServer, tempDataDir, type RunningServer } from '../helpers/server.js';

const exec = promisify(execFile);
const STREAMS = ['w0', 'w1', 'w2'];

/** Runs the rill CLI; answers its exit code and output instead of throwing on failure. */
async function rill(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await exec(process.execPath, [CLI, ...args]);
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

const dirs: string[] = [];
const servers: RunningServer[] = [];
afterAll(async () => {
  for (const s of servers) await s.stop();
  for (const d of dirs) removeDir(d);
});

function dir(): string {
  const d = tempDataDir('rill-backup-');
  dirs.push(d);
  return d;
}

/** One writer per stream appending 0, 1, 2, ... one at a time; `acked[i]` counts what stream i acknowledged. */
function startWriters(url: string): { acked: number[]; stop: () => Promise<void> } {
  const acked = STREAMS.map(() => 0);
  let running = true;
  const loops = STREAMS.map(async (name, i) => {
    while (running) {
      const res = await fetch(`${url}/backup-b/${name}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: `[${acked[i]}]` });
      expect(res.status).toBe(204);
      acked[i]!++;
    }
  });
  return {
    acked,
    stop: async () => {
      running = false;
      await Promise.all(loops);
    },
  };
}

describe('backup and restore', () => {
  it('a backup taken under writes restores to a consistent state holding every write acknowledged before it began', async () => {
    const server = await startServer({ store: 'sqlite', dataDir: dir() });
    servers.push(server);
    await fetch(`${server.url}/backup-b`, { method: 'PUT' });
    for (const name of STREAMS) await fetch(`${server.url}/backup-b/${name}`, { method: 'PUT', headers: { 'content-type': 'application/json' } });
    const writers = startWriters(server.url);
    const file = join(dir(), 'rill-backup.db');
    let ackedBefore: number[];
    let backup: Awaited<ReturnType<typeof rill>>;
    let ackedDuring: number;
    try {
      // Each stream has some history before the backup begins (a loaded machine may take a while to write it).
      await expect.poll(() => Math.min(...writers.acked), { interval: 20, timeout: 15_000 }).toBeGreaterThanOrEqual(10);
      ackedBefore = [...writers.acked];
      backup = await rill('backup', file, '--data', server.dataDir);
      ackedDuring = Math.min(...writers.acked.map((n, i) => n - ackedBefore[i]!));
    } finally {
      await writers.stop();
    }
    expect(backup.code, backup.stderr).toBe(0);
    expect(backup.stdout).toContain(`to ${file}`);
    // The writers were not paused by the backup.
    expect(ackedDuring).toBeGreaterThan(0);

    const restored = dir();
    await restoreDataDir(file, restored);
    const check = await rill('check', '--data', restored);
    expect(check.code, check.stderr).toBe(0);
    expect(check.stdout).toMatch(/^ok: .*: 3 streams, \d+ appends, 0 producer records\n$/);

    const again = await startServer({ store: 'sqlite', dataDir: restored });
    servers.push(again);
    for (const [i, name] of STREAMS.entries()) {
      const values = (await (await fetch(`${again.url}/backup-b/${name}?offset=-1&max_bytes=1000000`)).json()) as number[];
      expect(values.length).toBeGreaterThanOrEqual(ackedBefore[i]!);
      expect(values).toEqual(values.map((_, n) => n));
      // Record ordinals survive the copy: value n is record n, and N counts them.
      const head = await fetch(`${again.url}/backup-b/${name}`, { method: 'HEAD' });
      expect(head.headers.get('stream-record-next')).toBe(String(values.length));
      for (const record of [0, values.length >> 1, values.length - 1]) {
        expect(await (await fetch(`${again.url}/backup-b/${name}?record=${record}&max_records=1`)).text()).toBe(`${record}\n`);
      }
    }
  });

  it('refuses to overwrite a file, to restore over a database without --force, and into a directory a server has open', async () => {
    const server = servers[0]!;
    const file = join(dir(), 'twice.db');
    await backupDataDir(server.dataDir, file);
    await expect(backupDataDir(server.dataDir, file)).rejects.toThrow('exists; a backup never overwrites a file');
    const target = dir();
    await restoreDataDir(file, target);
    await expect(restoreDataDir(file, target)).rejects.toThrow('already holds a database; pass --force');
    await restoreDataDir(file, target, { force: true });
    await expect(restoreDataDir(file, server.dataDir, { force: true })).rejects.toThrow('in use by another rill server');
  });

  it('the database, its WAL and shared-memory files, backups and restored databases are readable by their owner only (0600)', async () => {
    const server = servers[0]!;
    const modeOf = (path: string) => statSync(path).mode & 0o777;
    for (const suffix of ['', '-wal', '-shm']) expect(modeOf(join(server.dataDir, `rill.db${suffix}`)), `rill.db${suffix}`).toBe(0o600);
    const file = join(dir(), 'private.db');
    await backupDataDir(server.dataDir, file);
    expect(modeOf(file)).toBe(0o600);
    const target = dir();
    await restoreDataDir(file, target);
    expect(modeOf(join(target, 'rill.db'))).toBe(0o600);
  });

  it('a damaged copy fails rill check with the problem named, and is not restored', async () => {
    const good = join(dir(), 'good.db');
    expect((await rill('backup', good, '--data', servers[0]!.dataDir)).code).toBe(0);
    const bad = join(dir(), 'bad.db');
    copyFileSync(good, bad);
    // Garbage over the second half of the file: b-tree pages of the tables and indexes.
    const size = statSync(bad).size;
    const fd = openSync(bad, 'r+');
    writeSync(fd, Buffer.alloc(Math.floor(size / 2), 0x5a), 0, Math.floor(size / 2), Math.floor(size / 2 / 4096) * 4096);
    closeSync(fd);
    const check = await rill('check', bad);
    expect(check.code).toBe(1);
    expect(check.stderr).toMatch(/rill check: .*bad\.db has \d+ problem\(s\):\n {2}(integrity_check: |the database is damaged: )/);
    await expect(restoreDataDir(bad, dir())).rejects.toThrow('fails its check, so it is not restored');
  });
});
