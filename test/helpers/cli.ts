/** Runs the real `rill` binary (dist/cli/main.js) against a server, as a user would. */
import { spawn } from 'node:child_process';
import { CLI } from './server.js';

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
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}
