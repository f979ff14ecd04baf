/**
 * A real S3-compatible server for the cold tier's tests: s3rver (a devDependency, pure
 * JavaScript, so `npm ci` installs it with nothing to download; docs/decisions.md says why
 * it and not MinIO). It runs in the test's own process on 127.0.0.1, on a port the kernel
 * picks, storing objects in a temporary directory the test can reach into to corrupt one.
 *
 * Faults: `stop()` closes the listener (uploads and reads then fail to connect) and
 * `restart()` listens again on the same port and directory; `slow(ms)` puts a TCP relay in
 * front that holds each connection's bytes for that long.
 */
import { createServer, Socket, type Server } from 'node:net';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import S3rver from 's3rver';
// s3rver's default keys and its endpoint, as the server under test reads them (AWS tools' variables).
import { s3Env } from '../../bench/s3.js';

export const TEST_BUCKET = 'rill-cold';

export interface TestS3 {
  /** Where clients connect: the relay when slowed, else s3rver itself. */
  endpoint: string;
  /** The variables an AWS tool reads, pointing at this server. */
  env: Record<string, string>;
  /** The directory s3rver keeps objects in. */
  directory: string;
  /** Files holding the objects' bodies under the bucket (s3rver's own layout), by key. */
  objectFiles(): Map<string, string>;
  /** Flips a byte in the middle of an object's stored body. */
  corrupt(key: string): void;
  stop(): Promise<void>;
  restart(): Promise<void>;
  /** Stops the server and removes its directory. */
  close(): Promise<void>;
}

function listen(server: S3rver): Promise<void> {
  return server.run().then(() => undefined);
}

function newS3rver(directory: string, port: number): S3rver {
  return new S3rver({ address: '127.0.0.1', port, silent: true, directory, configureBuckets: [{ name: TEST_BUCKET, configs: [] }] });
}

function portOf(server: S3rver): number {
  // s3rver keeps its http.Server once running.
  const http = (server as unknown as { httpServer: Server }).httpServer;
  const address = http.address();
  if (address === null || typeof address === 'string') throw new Error('s3rver is not listening');
  return address.port;
}

/** s3rver stores an object's body as `<dir>/<bucket>/<key>._S3rver_object`. */
const OBJECT_SUFFIX = '._S3rver_object';

/** s3rver removes an object's files, and a directory left empty, while a walk may be under way: what went is not there. */
function gone(error: unknown): boolean {
  return (error as NodeJS.ErrnoException).code === 'ENOENT';
}

function walk(dir: string, base: string, found: Map<string, string>): void {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (error) {
    if (gone(error)) return;
    throw error;
  }
  for (const name of names) {
    const path = join(dir, name);
    let directory: boolean;
    try {
      directory = statSync(path).isDirectory();
    } catch (error) {
      if (gone(error)) continue;
      throw error;
    }
    if (directory) walk(path, `${base}${name}/`, found);
    else if (name.endsWith(OBJECT_SUFFIX)) found.set(base + name.slice(0, -OBJECT_SUFFIX.length), path);
  }
}

export async function startTestS3(): Promise<TestS3> {
  const directory = mkdtempSync(join(tmpdir(), 'rill-s3-'));
  let server = newS3rver(directory, 0);
  await listen(server);
  const port = portOf(server);
  const endpoint = `http://127.0.0.1:${port}`;
  const objectFiles = () => {
    const found = new Map<string, string>();
    walk(join(directory, TEST_BUCKET), '', found);
    return found;
  };
  return {
    endpoint,
    directory,
    env: s3Env(endpoint),
    objectFiles,
    corrupt(key) {
      const path = objectFiles().get(key);
      if (path === undefined) throw new Error(`no object ${key} in the test S3 server`);
      const body = readFileSync(path);
      body[body.length >> 1]! ^= 0xff;
      writeFileSync(path, body);
    },
    stop: () => server.close(),
    async restart() {
      server = newS3rver(directory, port);
      await listen(server);
    },
    async close() {
      await server.close().catch(() => undefined);
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

/**
 * A relay in front of `target` that holds every chunk it passes for `delayMs`: S3 slowed
 * down, with nothing refused.
 */
export async function startSlowRelay(targetPort: number, delayMs: number): Promise<{ endpoint: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const relay = createServer((client) => {
    const upstream = new Socket();
    sockets.add(client).add(upstream);
    const pass = (from: Socket, to: Socket) => from.on('data', (d) => setTimeout(() => to.write(d), delayMs));
    upstream.connect(targetPort, '127.0.0.1');
    pass(client, upstream);
    pass(upstream, client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  const address = relay.address();
  if (address === null || typeof address === 'string') throw new Error('relay is not listening');
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => relay.close(() => resolve()));
    },
  };
}
