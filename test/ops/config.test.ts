/**
 * `rill serve` configuration: every flag also from RILL_<FLAG> and from a TOML or JSON
 * file; flag > environment > file > default; unknown keys and bad values refused at
 * startup, naming the key. The real binary, read through its startup log.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI, freePort } from '../helpers/server.js';

const dir = mkdtempSync(join(tmpdir(), 'rill-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Outcome {
  /** Exit code, or null when it started and was stopped. */
  code: number | null;
  lines: Array<Record<string, unknown>>;
  stderr: string;
}

/** Runs `rill serve` with no RILL_* variables but `env`; stops it once listening. */
function serve(args: string[], env: Record<string, string> = {}): Promise<Outcome> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RILL_')));
  const child = spawn(process.execPath, [CLI, 'serve', '--store', 'memory', ...args], { env: { ...clean, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  const parsed = () => stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
  child.stdout.on('data', (d: Buffer) => {
    stdout += d.toString();
    if (stdout.includes('rill listening')) child.kill('SIGTERM');
  });
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code: stdout.includes('rill listening') ? null : code, lines: parsed(), stderr })));
}

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

type Config = Record<string, { value: unknown; source: string }>;

/** The startup log's configuration line, as each key's value and source ('default' when it names none). */
function configOf(lines: Array<Record<string, unknown>>): Config {
  const line = lines.find((l) => l.msg === 'configuration')!;
  const values = line.config as Record<string, unknown>;
  const from = line.from as Record<string, string>;
  return Object.fromEntries(Object.entries(values).map(([k, value]) => [k, { value, source: from[k] ?? 'default' }]));
}

describe('configuration', () => {
  it('takes each setting from the flag, else the environment, else the file, else the default', async () => {
    const port = await freePort();
    const config = file(
      'precedence.toml',
      `port = ${port}\nmax-body = "1000"\nsse-heartbeat = "7s"\nlong-poll-timeout = "3s"\naccess-log = "off"\n`,
    );
    const out = await serve(['--config', config, '--sse-heartbeat', '9s'], { RILL_MAX_BODY: '2000', RILL_SSE_HEARTBEAT: '8s', RILL_LONG_POLL_TIMEOUT: '4s' });
    expect(out.stderr).toBe('');
    expect(out.code).toBeNull();
    const effective = configOf(out.lines);
    expect(effective.port).toEqual({ value: port, source: 'config' });
    expect(effective['max-body']).toEqual({ value: 2000, source: 'env' });
    expect(effective['long-poll-timeout']).toEqual({ value: 4000, source: 'env' });
    expect(effective['sse-heartbeat']).toEqual({ value: 9000, source: 'cli' });
    expect(effective['access-log']).toEqual({ value: 0, source: 'config' });
    expect(effective['max-connections']).toEqual({ value: 20_000, source: 'default' });
    // The file's port is the one it listens on.
    expect(out.lines.find((l) => l.msg?.toString().startsWith('rill listening'))!.url).toBe(`http://127.0.0.1:${port}`);
  });

  it('takes the values of a repeatable flag as a list in the file and comma-separated in its variable', async () => {
    const fromFile = await serve(['--config', file('lists.toml', 'port = 0\ncors-origin = ["http://a.example", "http://b.example"]\nallowed-host = ["rill.test"]\n')]);
    expect(fromFile.stderr).toBe('');
    expect(configOf(fromFile.lines)['cors-origin']).toEqual({ value: ['http://a.example', 'http://b.example'], source: 'config' });
    expect(configOf(fromFile.lines)['allowed-host']).toEqual({ value: ['rill.test'], source: 'config' });
    const fromEnv = await serve(['--port', '0'], { RILL_CORS_ORIGIN: 'http://a.example, http://c.example' });
    expect(configOf(fromEnv.lines)['cors-origin']).toEqual({ value: ['http://a.example', 'http://c.example'], source: 'env' });
    const notStrings = await serve(['--config', file('bad-list.toml', 'cors-origin = [1, 2]\n')]);
    expect(notStrings.code).toBe(2);
    expect(notStrings.stderr).toContain('key "cors-origin": expected a list of strings');
  });

  it('logs a --no-X flag under its own key with its own meaning: no-console is false by default and true when set, from any source', async () => {
    const [byDefault, byFlag, byEnv, byFile] = await Promise.all([
      serve(['--port', '0']),
      serve(['--port', '0', '--no-console']),
      serve(['--port', '0'], { RILL_NO_CONSOLE: 'true' }),
      serve(['--config', file('no-console.toml', 'port = 0\nno-console = true\n')]),
    ]);
    expect(configOf(byDefault.lines)['no-console']).toEqual({ value: false, source: 'default' });
    expect(configOf(byFlag.lines)['no-console']).toEqual({ value: true, source: 'cli' });
    expect(configOf(byEnv.lines)['no-console']).toEqual({ value: true, source: 'env' });
    expect(configOf(byFile.lines)['no-console']).toEqual({ value: true, source: 'config' });
  });

  it('reads JSON files too, and hides secrets in the startup log', async () => {
    const config = file('settings.json', JSON.stringify({ port: 0, 'max-producers': 12, 'postgres-url': 'postgres://u:hunter2@db:5432/x' }));
    const out = await serve(['--config', config]);
    expect(out.code).toBeNull();
    const effective = configOf(out.lines);
    expect(effective['max-producers']).toEqual({ value: 12, source: 'config' });
    expect(JSON.stringify(out.lines)).not.toContain('hunter2');
  });

  it('refuses an unknown key, a bad value and a bad variable at startup, naming it', async () => {
    // Each refused before listening, in parallel.
    const [unknown, bad, choice, kind, env, syntax] = await Promise.all([
      serve(['--config', file('unknown.toml', 'port = 0\nmax-bodyy = 5\n')]),
      serve(['--config', file('bad.toml', 'long-poll-timeout = "soon"\n')]),
      serve(['--config', file('choice.toml', 'log-level = "loud"\n')]),
      serve(['--config', file('kind.toml', 'max-body = [1, 2]\n')]),
      serve([], { RILL_PORT: 'eighty' }),
      serve(['--config', file('broken.toml', 'port = = 1\n')]),
    ]);
    // Usage errors, as a bad flag is: exit 2.
    for (const outcome of [unknown, bad, choice, kind, env, syntax]) expect(outcome.code).toBe(2);
    expect(unknown.stderr).toContain('unknown key "max-bodyy"');
    expect(unknown.stderr).toContain('unknown.toml');
    expect(bad.stderr).toMatch(/key "long-poll-timeout": "soon": expected a duration/);
    expect(choice.stderr).toContain('key "log-level": "loud" is not one of fatal, error, warn, info, debug, trace, silent');
    expect(kind.stderr).toContain('key "max-body": expected a string or a number, not a list');
    expect(env.stderr).toContain('environment variable RILL_PORT: "eighty": expected a port number');
    expect(syntax.stderr).toContain('broken.toml is not valid TOML');
  });
});
