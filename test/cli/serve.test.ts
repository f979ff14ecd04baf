/**
 * `rill serve` as an operator meets it: `--help` shows durations and sizes the way the
 * flags take them, those forms are accepted, an unknown RILL_LOG_LEVEL and an SSE lifetime
 * under 1 s are clear startup errors, and SIGTERM logs once the server has stopped.
 */
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { serveSettingsOf } from '../../src/cli/serve-options.js';
import { formatBytes, formatDurationMs, parseBytes, parseDurationMs } from '../../src/cli/units.js';
import { CLI, freePort, removeDir, startServer } from '../helpers/server.js';

describe('rill serve', () => {
  it('--help shows defaults in the forms the flags accept, and names RILL_LOG_LEVEL', () => {
    const help = spawnSync(process.execPath, [CLI, 'serve', '--help'], { encoding: 'utf8' }).stdout;
    expect(help).toMatch(/--long-poll-timeout <duration> .*\(default: 20s[,)]/);
    expect(help).toMatch(/--max-body <size> .*\(default: 32MiB[,)]/);
    expect(help).toMatch(/--producer-ttl <duration> .*\(default: 7d[,)]/);
    expect(help).toContain('RILL_LOG_LEVEL');
    for (const ms of [20_000, 60_000, 604_800_000, 1500]) expect(parseDurationMs(formatDurationMs(ms))).toBe(ms);
    for (const bytes of [33_554_432, 16_384, 1000]) expect(parseBytes(formatBytes(bytes))).toBe(bytes);
    expect(() => parseBytes('32MB')).toThrow(/32MiB/);
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
    expect(run.stderr).toContain(`error: option '--sse-lifetime <duration>' argument '999ms' is invalid. ${REASON}`);
    await expect(serveSettingsOf(['--sse-lifetime', '500ms'], {})).rejects.toThrow(REASON);
    await expect(serveSettingsOf([], { RILL_SSE_LIFETIME: '0' })).rejects.toThrow(`environment variable RILL_SSE_LIFETIME: "0": ${REASON}`);
    expect((await serveSettingsOf(['--sse-lifetime', '1s'], {})).settings.sseLifetimeMs).toBe(1000);
  });

  it('takes sizes with units and logs "stopped" after SIGTERM', async () => {
    const server = await startServer({ process: true, store: 'memory', args: ['--max-body', '1KiB'], env: { RILL_LOG_LEVEL: 'info' } });
    try {
      await fetch(`${server.url}/cfgx`, { method: 'PUT' });
      const big = await fetch(`${server.url}/cfgx/s`, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'x'.repeat(1025) });
      expect(big.status).toBe(413);
      expect(await server.stop()).toBe(0);
      // 'exit' can come before the last output: wait for the end of stdout.
      const stdout = server.child.stdout!;
      if (!stdout.readableEnded) await once(stdout, 'end');
      // pino may write its lines out of order on exit; the times say which came last.
      const lines = server.output().trim().split('\n').map((l) => JSON.parse(l) as { msg: string; signal?: string; time: number });
      const stopped = lines.find((l) => l.msg === 'stopped');
      expect(stopped, server.output()).toMatchObject({ signal: 'SIGTERM' });
      expect(Math.max(...lines.map((l) => l.time))).toBe(stopped!.time);
    } finally {
      removeDir(server.dataDir);
    }
  });
});
