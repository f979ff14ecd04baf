/**
 * `rill serve` as an operator meets it: `--help` shows durations and sizes the way the
 * flags take them, those forms are accepted, an unknown RILL_LOG_LEVEL and an SSE lifetime
 * under 1 s are clear startup errors, and SIGTERM logs once the server has stopped.
 */
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { serveSettingsOf } from '../../src/cli/serve-options.js';
import { formatBytes, formatDurationMs, parseBytes, parseDurationMs } from '../../src/cli/units.js';
import { CLI, freePort, PortTaken, removeDir, startServer, tempDataDir } from '../helpers/server.js';
import { CLI_TEST_TIMEOUT_MS } from '../helpers/cli.js';

/** Runs `rill ARGS` to its end: its exit code and stderr. */
function rillSync(args: string[]): { status: number | null; stderr: string } {
  const run = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', env: { ...process.env, RILL_LOG_LEVEL: 'error' } });
  return { status: run.status, stderr: run.stderr };
}

describe('rill serve', { timeout: CLI_TEST_TIMEOUT_MS }, () => {
  it('--help shows defaults in the forms the flags accept, and names RILL_LOG_LEVEL', () => {
    const help = spawnSync(process.execPath, [CLI, 'serve', '--help'], { encoding: 'utf8' }).stdout;
    expect(help).toMatch(/--long-poll-timeout <duration> .*\(default: 20s[,)]/);
    expect(help).toMatch(/--max-body <size> .*\(default: 32MiB[,)]/);
    expect(help).toMatch(/--producer-ttl <duration> .*\(default: 7d[,)]/);
    expect(help).toContain('RILL_LOG_LEVEL');
    for (const ms of [20_000, 60_000, 604_800_000, 1500]) expect(parseDurationMs(formatDurationMs(ms))).toBe(ms);
    for (const bytes of [33_554_432, 16_384, 1000]) expect(parseBytes(formatBytes(bytes))).toBe(bytes);
    expect(() => parseBytes('32MB')).toThrow(/32MiB/);
    // A duration needs its unit (0 is the same in every unit); a usage error names the
    // command's own help instead of printing all of it.
    expect(parseDurationMs('0')).toBe(0);
    expect(rillSync(['serve', '--long-poll-timeout', '30'])).toEqual({
      status: 2,
      stderr: 'rill: USAGE: option \'--long-poll-timeout <duration>\' argument \'30\' is invalid. "30" has no unit: write 30s, 30ms or 30m (units: ms, s, m, h, d)\nsee `rill serve --help`\n',
    });
    expect(help).toContain('Durations need a unit');
    const token = spawnSync(process.execPath, [CLI, 'token', '--help'], { encoding: 'utf8' }).stdout;
    expect(token).toMatch(/--ttl <duration> .*\(default: 1h\)/);
    expect(rillSync(['subs', 'create', 'x', '--bogus'])).toEqual({ status: 2, stderr: "rill: USAGE: unknown option '--bogus'\nsee `rill subs create --help`\n" });
  });

  it('answers a mistake of the operator with exit 2, CONFIG or USAGE, the flag and what to do', async () => {
    const dir = tempDataDir();
    const server = await startServer({ process: true, store: 'sqlite' });
    try {
      const short = join(dir, 'short.key');
      writeFileSync(short, 'too short\n', { mode: 0o600 });
      const expectations: Array<[string[], string]> = [
        [['serve', '--port', '0', '--store', 'memory', '--auth-secret-file', join(dir, 'missing.key')], `rill: CONFIG: --auth-secret-file ${join(dir, 'missing.key')}: no such file; write a secret of at least 32 random bytes there, such as: openssl rand -base64 32 > ${join(dir, 'missing.key')}\n`],
        [['serve', '--port', '0', '--store', 'memory', '--auth-secret-file', short], `rill: CONFIG: --auth-secret-file ${short}: the secret is 9 bytes; an HS256 secret must be at least 32; write a secret of at least 32 random bytes there, such as: openssl rand -base64 32 > ${short}\n`],
        [['token', '--secret-file', short, '--bucket', 'b', '--can', 'read'], `rill: CONFIG: --secret-file ${short}: the secret is 9 bytes; an HS256 secret must be at least 32; give the file rill serve --auth-secret-file reads (write one with: openssl rand -base64 32 > ${short})\n`],
        [['serve', '--port', '0', '--store', 'postgres'], 'rill: CONFIG: --store postgres needs --postgres-url (or RILL_POSTGRES_URL): the database to use, such as postgres://user:password@host:5432/db\n'],
        [['serve', '--port', '0', '--store', 'memory', '--cold-store', 's3://b/p'], 'rill: CONFIG: --cold-store works with --store sqlite or --store postgres, not --store memory: a memory store keeps nothing to move\n'],
        [['serve', '--port', '0', '--store', 'sqlite', '--sqlite-thread', 'on', '--cold-store', 's3://b/p'], 'rill: CONFIG: --cold-store works with --store sqlite only with --sqlite-thread off for now (this server has --sqlite-thread on), or with --store postgres\n'],
        [['serve', '--port', '0', '--store', 'memory', '--cold-store', 'b/p'], 'rill: CONFIG: --cold-store takes s3://bucket/prefix, not b/p\n'],
        [['serve', '--port', String(server.port), '--store', 'memory'], `rill: CONFIG: --port ${server.port}: port ${server.port} on 127.0.0.1 is in use by another process: stop it, or choose another port with --port (0 picks a free one)\n`],
        [['serve', '--port', '0', '--data', server.dataDir], `rill: CONFIG: --data ${server.dataDir}: the data directory is in use by another rill server (its rill.lock is held): stop that server, or give this one another --data directory\n`],
        [['backup', join(dir, 'b.db'), '--data', join(dir, 'none')], `rill: CONFIG: --data ${join(dir, 'none')}: no such directory; point --data at the directory rill serve --data uses\n`],
        [['backup', join(dir, 'none', 'b.db'), '--data', server.dataDir], `rill: CONFIG: ${join(dir, 'none', 'b.db')}: the directory ${join(dir, 'none')} does not exist; create it first (mkdir -p ${join(dir, 'none')})\n`],
        [['restore', short, '--data', server.dataDir], `rill: USAGE: --data ${server.dataDir} already holds a database; add --force to replace it with ${short} (what it holds now is lost)\n`],
      ];
      for (const [args, stderr] of expectations) expect(rillSync(args)).toEqual({ status: 2, stderr });
      // The test helper knows this refusal, so a probed port taken before the child listens is tried again.
      await expect(startServer({ process: true, store: 'memory', port: server.port })).rejects.toBeInstanceOf(PortTaken);
    } finally {
      await server.stop();
      removeDir(server.dataDir);
      removeDir(dir);
    }
  });

  it('refuses an unknown RILL_LOG_LEVEL at startup, saying which levels exist', () => {
    const run = spawnSync(process.execPath, [CLI, 'serve', '--store', 'memory', '--port', '0'], { encoding: 'utf8', env: { ...process.env, RILL_LOG_LEVEL: 'loud' } });
    expect(run.status).toBe(2);
    expect(run.stderr).toBe('rill: USAGE: environment variable RILL_LOG_LEVEL: "loud" is not one of fatal, error, warn, info, debug, trace, silent\n');
  });

  it('never logs the password of --postgres-url, in its user info or as ?password=, even when PostgreSQL cannot be reached', async () => {
    const port = await freePort();
    for (const url of [`postgres://rill:s3cret-a@127.0.0.1:${port}/db`, `postgres://rill@127.0.0.1:${port}/db?sslmode=disable&password=s3cret-b&sslpassword=s3cret-c`]) {
      const run = spawnSync(process.execPath, [CLI, 'serve', '--port', '0', '--store', 'postgres', '--postgres-url', url], { encoding: 'utf8', env: { ...process.env, RILL_LOG_LEVEL: 'info' } });
      const output = run.stdout + run.stderr;
      expect(run.status, output).not.toBe(0);
      // The configuration line, and the refusal naming the database.
      expect(output).toMatch(/"postgres-url":"postgres:\/\/rill[^"]*\*\*\*/);
      expect(output).toMatch(/cannot open the PostgreSQL store at postgres:\/\/rill.*\*\*\*/);
      expect(output).not.toContain('s3cret');
    }
  });

  it('refuses an --sse-lifetime under 1s at startup (exit 2), saying why, from a flag or a variable', async () => {
    const REASON = 'expected at least 1s: with shorter SSE connections the official Durable Streams client gives up SSE after three of them and ends its read silently';
    const run = spawnSync(process.execPath, [CLI, 'serve', '--store', 'memory', '--port', '0', '--sse-lifetime', '999ms'], { encoding: 'utf8' });
    expect(run.status).toBe(2);
    expect(run.stderr).toContain(`rill: USAGE: option '--sse-lifetime <duration>' argument '999ms' is invalid. ${REASON}`);
    await expect(serveSettingsOf(['--sse-lifetime', '500ms'], {})).rejects.toThrow(REASON);
    await expect(serveSettingsOf([], { RILL_SSE_LIFETIME: '0' })).rejects.toThrow(`environment variable RILL_SSE_LIFETIME: "0": ${REASON}`);
    expect((await serveSettingsOf(['--sse-lifetime', '1s'], {})).settings.sseLifetimeMs).toBe(1000);
  });

  it('takes --usage-max-keys from 1 to 1,000,000, 10,000 by default, and refuses others', async () => {
    expect((await serveSettingsOf([], {})).settings.usageMaxKeys).toBe(10_000);
    expect((await serveSettingsOf(['--usage-max-keys', '3'], {})).settings.usageMaxKeys).toBe(3);
    expect((await serveSettingsOf([], { RILL_USAGE_MAX_KEYS: '50' })).settings.usageMaxKeys).toBe(50);
    for (const bad of ['0', '1000001', '2.5', 'many']) {
      await expect(serveSettingsOf(['--usage-max-keys', bad], {})).rejects.toThrow('expected an integer from 1 to 1000000');
    }
  });

  it('passes --quota-creates and the bucket limits (--bucket-max-bytes a size) to the settings, from flags or the environment, 0 (none) by default', async () => {
    const defaults = (await serveSettingsOf([], {})).settings;
    expect([defaults.auth?.quotas.createsPerSecond, defaults.bucketLimits]).toEqual([0, { maxStreams: 0, maxSubscriptions: 0, maxBytes: 0 }]);
    const set = (await serveSettingsOf(['--quota-creates', '5', '--bucket-max-streams', '100', '--bucket-max-bytes', '10MiB'], { RILL_BUCKET_MAX_SUBSCRIPTIONS: '7' })).settings;
    expect([set.auth?.quotas.createsPerSecond, set.bucketLimits]).toEqual([5, { maxStreams: 100, maxSubscriptions: 7, maxBytes: 10 * 1024 * 1024 }]);
  });

  it('takes sizes with units and logs "stopped" after SIGTERM', async () => {
    const server = await startServer({ process: true, store: 'memory', args: ['--max-body', '1KiB'], env: { RILL_LOG_LEVEL: 'info' } });
    try {
      await fetch(`${server.url}/cfgx`, { method: 'PUT' });
      const big = await fetch(`${server.url}/cfgx/s`, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'x'.repeat(1025) });
      expect(big.status).toBe(413);
      // What runs: /healthz, the rill_build_info metric and the startup line give the version and commit.
      const built = JSON.parse(readFileSync(join(import.meta.dirname, '../../dist/build-info.json'), 'utf8')) as { version: string; commit: string };
      expect(await (await fetch(`${server.url}/healthz`)).json()).toEqual({ status: 'ok', version: built.version, commit: built.commit });
      expect(await (await fetch(`${server.url}/metrics`)).text()).toContain(`rill_build_info{version="${built.version}",commit="${built.commit}"} 1\n`);
      expect(await server.stop()).toBe(0);
      // 'exit' can come before the last output: wait for the end of stdout.
      const stdout = server.child.stdout!;
      if (!stdout.readableEnded) await once(stdout, 'end');
      // pino may write its lines out of order on exit; the times say which came last.
      const lines = server.output().trim().split('\n').map((l) => JSON.parse(l) as { msg: string; signal?: string; time: number });
      const stopped = lines.find((l) => l.msg === 'stopped');
      expect(stopped, server.output()).toMatchObject({ signal: 'SIGTERM' });
      expect(Math.max(...lines.map((l) => l.time))).toBe(stopped!.time);
      expect(lines.find((l) => l.msg.startsWith('rill listening on'))).toMatchObject({ version: built.version, commit: built.commit });
    } finally {
      removeDir(server.dataDir);
    }
  });
});
