/** Runs the real `rill` binary (dist/bin/rill.js) against a server, as a user would. */
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, expect } from 'vitest';
import { RillClient } from '../../src/client/index.js';
import { CLI, removeDir, startServer, type RunningServer, type StartOptions } from './server.js';

/**
 * Per test of the files that run the `rill` binary many times in a row. Each run is a
 * process start (0.3-0.5 s of CPU here), so a test of fifteen commands took over 30 s
 * (vitest's default here) while other work loaded the machine (load average 8). A bound
 * only a hung command reaches.
 */
export const CLI_TEST_TIMEOUT_MS = 120_000;

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runCli(url: string, args: string[], options: { stdin?: string; env?: Record<string, string> } = {}): Promise<CliRun> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, RILL_URL: url, ...options.env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdin.end(options.stdin ?? '');
    // 'close': once its output is all read ('exit' may come before the last of it).
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A `rill` command left running (a tail): what it printed so far, and its exit code. */
export interface RunningCli {
  child: ChildProcess;
  exited: Promise<number | null>;
  stdout(): string;
  stderr(): string;
}

export function startCli(url: string, args: string[]): RunningCli {
  const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, RILL_URL: url } });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return { child, exited, stdout: () => stdout, stderr: () => stderr };
}

/**
 * A file's CLI tests: one real server with one bucket, stopped after them, and the binary run
 * against it. The bucket, and the streams a test starts from, come from `client` in the
 * test's own process (docs/testing.md: set up with HTTP, test with the binary); the binary
 * runs the commands under test.
 */
export interface CliServer {
  /** Filled in once the server is up. */
  server: RunningServer;
  /** rill's client on the server, for setting up what the commands under test start from. */
  client: RillClient;
  rill(args: string[], stdin?: string): Promise<CliRun>;
  /** Runs a command that must succeed; answers its stdout. */
  ok(args: string[], stdin?: string): Promise<string>;
}

/** Registers beforeAll/afterAll for a server with `bucket`; the commands run once it is up. */
export function useCliServer(bucket: string, options: StartOptions = {}): CliServer {
  const env: CliServer = {
    server: undefined as unknown as RunningServer,
    client: undefined as unknown as RillClient,
    rill: (args, stdin = '') => runCli(env.server.url, args, { stdin }),
    async ok(args, stdin = '') {
      const run = await env.rill(args, stdin);
      expect(run.code, run.stderr).toBe(0);
      return run.stdout;
    },
  };
  beforeAll(async () => {
    env.server = await startServer(options);
    env.client = new RillClient({ url: env.server.url });
    await env.client.bucket(bucket).create();
  });
  afterAll(async () => {
    await env.server?.stop();
    if (env.server) removeDir(env.server.dataDir);
  });
  return env;
}
