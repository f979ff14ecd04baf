/**
 * A full disk, for real: the server's data directory is a small tmpfs this test mounts
 * (it runs as root, as CI does). Writes fill it until the server refuses them with 507;
 * a delete still works and lets writes in again; a restart on the full disk starts and
 * serves every acknowledged byte. Before the free-space limit, every write, DELETE
 * included, answered 503 on a full disk and a restart exited "database or disk is full".
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statfsSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { offset, readAll } from '../helpers/http.js';
import { startServer, type ServerProcess } from '../helpers/server.js';
import { eventually } from '../helpers/webhooks.js';
import { expectJsonRefusal, refusalOf } from './checks.js';
import { extensionUrl } from '../../src/protocol/extensions.js';

const MiB = 1024 * 1024;
const FS_BYTES = 48 * MiB;
const MIN_FREE_BYTES = 12 * MiB;
const binary = { 'content-type': 'application/octet-stream' };

let mountDir: string;
let dataDir: string;
let server: ServerProcess | null = null;

beforeAll(() => {
  // A real full filesystem needs a mount of its own; PostgreSQL tests need root's own user switch too.
  expect(process.getuid?.(), 'the disk-full test mounts a tmpfs and must run as root').toBe(0);
  mountDir = mkdtempSync(join(tmpdir(), 'rill-full-disk-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${FS_BYTES}`, 'tmpfs', mountDir]);
  dataDir = join(mountDir, 'data');
});

// A test that failed leaves its server holding the directory's lock: killed, so that the
// next test's start fails, if it does, for a reason of its own.
afterEach(async () => {
  if (server && server.child.exitCode === null && server.child.signalCode === null) await server.kill();
  server = null;
});

afterAll(() => {
  execFileSync('umount', [mountDir]);
  rmSync(mountDir, { recursive: true, force: true });
});

async function start(): Promise<ServerProcess> {
  server = await startServer({ process: true, dataDir, args: ['--min-free-disk', String(MIN_FREE_BYTES)] });
  return server;
}

/** A piece of bytes (a MiB unless told) that says which append it was. */
function piece(n: number, bytes = MiB): Buffer<ArrayBuffer> {
  return Buffer.alloc(bytes, `piece ${n};`);
}

/** Appends pieces to `url` until the server refuses one; answers the pieces acknowledged and the refusal. */
async function fill(url: string, from: number, bytes = MiB): Promise<{ acknowledged: Buffer[]; refusal: Response }> {
  const acknowledged: Buffer[] = [];
  for (let n = from; n < from + (64 * MiB) / bytes; n++) {
    const body = piece(n, bytes);
    const res = await fetch(url, { method: 'POST', headers: binary, body });
    if (res.status !== 204) return { acknowledged, refusal: res };
    acknowledged.push(body);
  }
  throw new Error(`64 MiB in pieces of ${bytes} bytes were accepted on a 48 MiB filesystem`);
}

/** Every byte of the stream, by catch-up reads to its tail. */
async function contentOf(url: string): Promise<Buffer> {
  return (await readAll(url)).body;
}

describe('a full disk', () => {
  // A bound only a bug reaches: 7 s alone here, past the default 30 s under a load average of 10.
  it('refuses writes with 507 while deletes and retention free space and reads go on; a restart on the full disk serves everything acknowledged', { timeout: 120_000 }, async () => {
    let s = await start();
    // URLs are made as needed: the restarted server listens on another port.
    const stream = (id: string) => `${s.url}/v1/stream/${id}`;
    const first = stream('first');
    for (const url of [first, stream('second')]) expect((await fetch(url, { method: 'PUT', headers: binary })).status).toBe(201);
    // The second stream's first two pieces are covered by a snapshot, so retention can drop them later.
    const early = [piece(100), piece(101)];
    for (const body of early) expect((await fetch(stream('second'), { method: 'POST', headers: binary, body })).status).toBe(204);
    const snapshotAt = offset(2 * MiB);
    expect((await fetch(extensionUrl(stream('second'), `snapshot/${snapshotAt}`), { method: 'PUT', headers: binary, body: 'summary' })).status).toBe(204);

    // Fill: the first stream takes what the disk has, then writes are refused.
    const filled = await fill(first, 0);
    expect(filled.acknowledged.length).toBeGreaterThan(8);
    expectJsonRefusal(await refusalOf(filled.refusal), 507, 'INSUFFICIENT_STORAGE');
    expect(filled.refusal.headers.get('retry-after')).not.toBeNull();
    expect(Buffer.compare(await contentOf(first), Buffer.concat(filled.acknowledged))).toBe(0);
    // Smaller writes still find room for a while (the limit counts bytes), until they too are refused.
    const topped = await fill(first, 100, 4096);
    expectJsonRefusal(await refusalOf(topped.refusal), 507, 'INSUFFICIENT_STORAGE');
    expect(Buffer.compare(await contentOf(first), Buffer.concat([...filled.acknowledged, ...topped.acknowledged]))).toBe(0);

    // Delete the stream that filled the disk: its pages are free again, and writes resume.
    expect((await fetch(first, { method: 'DELETE' })).status).toBe(204);
    const refilled = await fill(stream('second'), 1000);
    expect(refilled.acknowledged.length).toBeGreaterThan(4);
    expectJsonRefusal(await refusalOf(refilled.refusal), 507, 'INSUFFICIENT_STORAGE');
    expect(s.output()).toContain('disk space is low');
    expect(s.output()).toContain('disk space returned');

    // Killed and restarted on the full disk: it starts, serves every acknowledged byte, and
    // refuses writes once the little that recovery freed (appends it moved into the index) is used.
    await s.kill();
    s = await start();
    expect(Buffer.compare(await contentOf(stream('second')), Buffer.concat([...early, ...refilled.acknowledged]))).toBe(0);
    const last = await fill(stream('second'), 2000);
    expectJsonRefusal(await refusalOf(last.refusal), 507, 'INSUFFICIENT_STORAGE');
    const acknowledged = [...early, ...refilled.acknowledged, ...last.acknowledged];
    expect(Buffer.compare(await contentOf(stream('second')), Buffer.concat(acknowledged))).toBe(0);

    // Retention works on the full disk: the two pieces under the snapshot are dropped.
    expect((await fetch(extensionUrl(stream('second'), `retention/${snapshotAt}`), { method: 'PUT' })).status).toBe(204);
    expect((await fetch(`${stream('second')}?offset=${offset(0)}`)).status).toBe(410);
    const retained = await fetch(`${stream('second')}?offset=${snapshotAt}`);
    expect(Buffer.compare(Buffer.from(await retained.arrayBuffer()).subarray(0, MiB), acknowledged[2]!)).toBe(0);

    // So does a delete, after which new streams and appends are accepted again.
    expect((await fetch(stream('second'), { method: 'DELETE' })).status).toBe(204);
    expect((await fetch(stream('fourth'), { method: 'PUT', headers: binary, body: 'z' })).status).toBe(201);
    expect((await fetch(stream('fourth'), { method: 'POST', headers: binary, body: piece(2000) })).status).toBe(204);
    expect(await s.stop()).toBe(0);
  });

  it('answers 507, not 503, when another process fills the disk and SQLite itself runs out (limit off)', async () => {
    const s = await startServer({ process: true, dataDir, args: ['--min-free-disk', '0'] });
    server = s;
    const url = `${s.url}/v1/stream/fifth`;
    expect((await fetch(url, { method: 'PUT', headers: binary })).status).toBe(201);
    const ballast = join(mountDir, 'ballast');
    fillRest(ballast);
    try {
      expectJsonRefusal(await refusalOf(await fetch(url, { method: 'POST', headers: binary, body: piece(3000) })), 507, 'INSUFFICIENT_STORAGE');
    } finally {
      rmSync(ballast);
    }
    expect((await fetch(url, { method: 'POST', headers: binary, body: piece(3001) })).status).toBe(204);
    expect(await s.stop()).toBe(0);
  });
});

describe('a disk another process filled to the last byte', () => {
  it('still lets rill start after a clean stop: reads and deletes are served, writes refused with 507 until space returns', async () => {
    // The filesystem to itself: what the tests above stored is not needed.
    rmSync(dataDir, { recursive: true, force: true });
    const ownDir = join(mountDir, 'data-last-byte');
    const args = ['--min-free-disk', String(MIN_FREE_BYTES)];
    let s = await startServer({ process: true, dataDir: ownDir, args });
    server = s;
    const stream = (id: string) => `${s.url}/v1/stream/${id}`;
    const kept = [piece(4000), piece(4001)];
    expect((await fetch(stream('kept'), { method: 'PUT', headers: binary, body: kept[0] })).status).toBe(201);
    expect((await fetch(stream('kept'), { method: 'POST', headers: binary, body: kept[1] })).status).toBe(204);
    expect((await fetch(stream('doomed'), { method: 'PUT', headers: binary, body: piece(4002) })).status).toBe(201);
    expect(statSync(join(ownDir, 'rill.reserve')).size, 'the reserve: a quarter of the limit').toBe(MIN_FREE_BYTES / 4);
    expect(await s.stop()).toBe(0);

    const ballast = join(mountDir, 'ballast-last-byte');
    fillRest(ballast);
    try {
      expect(statfsSync(mountDir).bavail, 'the filesystem is full').toBe(0);
      s = await startServer({ process: true, dataDir: ownDir, args });
      server = s;
      expect(Buffer.compare(await contentOf(stream('kept')), Buffer.concat(kept))).toBe(0);
      expectJsonRefusal(await refusalOf(await fetch(stream('kept'), { method: 'POST', headers: binary, body: 'more' })), 507, 'INSUFFICIENT_STORAGE');
      expectJsonRefusal(await refusalOf(await fetch(stream('new'), { method: 'PUT', headers: binary })), 507, 'INSUFFICIENT_STORAGE');
      expect((await fetch(stream('doomed'), { method: 'DELETE' })).status).toBe(204);
      expect((await fetch(stream('doomed'))).status).toBe(404);
    } finally {
      rmSync(ballast);
    }
    // Space is back: the reserve is written again and so are appends (the server reads free
    // space at most every 100 ms, so the first appends may still be refused).
    await eventually(async () => (await fetch(stream('kept'), { method: 'POST', headers: binary, body: 'more' })).status === 204, 10_000, 'appends to be accepted again');
    expect(statSync(join(ownDir, 'rill.reserve')).size).toBe(MIN_FREE_BYTES / 4);
    expect(await s.stop()).toBe(0);
  });
});

/** Writes zeros to `path` until the filesystem has no room left. */
function fillRest(path: string): void {
  try {
    execFileSync('dd', ['if=/dev/zero', `of=${path}`, 'bs=1M'], { stdio: 'ignore' });
  } catch {
    // dd stops with "No space left on device": the filesystem is full, as wanted.
  }
}
