/** A bash session the docs tests type commands into, as a reader types them into a terminal. */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { expect } from 'vitest';
import type { Command } from './markdown.js';

/** One bash process: variables carry from command to command (and block to block). */
export class Shell {
  private readonly child: ChildProcessWithoutNullStreams;
  private buffer = '';
  private waiting: ((line: string) => void) | undefined;

  /** `commandTimeoutMs`: longest one command may run before the test fails, naming it. */
  constructor(env: NodeJS.ProcessEnv, cwd: string, private readonly commandTimeoutMs: number) {
    this.child = spawn('bash', ['--noprofile', '--norc'], { env, cwd });
    this.child.stdout.on('data', (d: Buffer) => {
      this.buffer += d.toString();
      const done = /__DONE__ (\d+)\n/.exec(this.buffer);
      if (done && this.waiting) {
        this.buffer = '';
        this.waiting(done[1]!);
      }
    });
  }

  /** Runs a command; its output (stdout and stderr) goes to a file, read afterwards. */
  async run(command: Command, outFile: string, doc = 'README'): Promise<{ exit: number; output: string }> {
    // Ctrl-C: curl (a shell function here) stops itself after a second; anything else is stopped by timeout.
    const body = !command.untilCtrlC ? command.text : /^curl\b/.test(command.text) ? `RILL_README_MAX_TIME=1 ${command.text}` : `timeout 1 ${command.text}`;
    const script = `{\n${body}\n} > ${outFile} 2>&1 < /dev/null; echo "__DONE__ $?"\n`;
    const exit = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${doc} line ${command.line} did not end within ${this.commandTimeoutMs} ms: ${command.text}`)), this.commandTimeoutMs);
      this.waiting = (code) => {
        clearTimeout(timer);
        resolve(code);
      };
      this.child.stdin.write(script);
    });
    return { exit: Number(exit), output: readFileSync(outFile, 'utf8') };
  }

  /** curl as the user runs it, plus its answers' statuses on lines of their own. */
  functions(): string {
    return `curl() { command curl ${'${RILL_README_MAX_TIME:+--max-time $RILL_README_MAX_TIME}'} -sS -w '\\n@@status %{http_code}\\n' "$@"; }`;
  }

  close(): void {
    this.child.stdin.end();
  }
}


/** The statuses curl reported, and the output as the user would see it. */
export function splitStatuses(raw: string): { statuses: number[]; shown: string } {
  const statuses = [...raw.matchAll(/@@status (\d{3})/g)].map((m) => Number(m[1]));
  return { statuses, shown: raw.replace(/\n?@@status \d{3}\n/g, '\n') };
}

export async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer().once('error', () => resolve(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
}


/**
 * Asserts what a command states (test/docs/markdown.ts): its exit code (0 unless stated;
 * a command stopped after a second as by Ctrl-C, curl's time limit 28 or timeout's 124),
 * the status of its last curl answer (every answer below 400 unless stated), and the words
 * its output must hold. Answers the output as the reader sees it.
 */
export function expectStated(command: Command, raw: { exit: number; output: string }, doc: string): string {
  const { statuses, shown } = splitStatuses(raw.output);
  const where = `${doc} line ${command.line}: ${command.text}\n${shown}`;
  if (command.untilCtrlC) expect([28, 124], where).toContain(raw.exit);
  else expect(raw.exit, where).toBe(command.exit ?? 0);
  if (command.status !== undefined) expect(statuses.at(-1), where).toBe(command.status);
  else for (const status of statuses) expect(status, where).toBeLessThan(400);
  if (command.output !== undefined) expect(shown.toLowerCase(), where).toContain(command.output.toLowerCase());
  return shown;
}
