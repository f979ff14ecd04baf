/**
 * The README and its guides, run as a new user would: every ```sh and ```ts block, in
 * order, of the README and then of each guide under docs/ (in the order the README's
 * `## Guides` section lists them), against ONE fresh default server (`rill serve`, no flags:
 * SQLite, open, port 4437, or a free port substituted for 4437 everywhere when 4437 is
 * taken). Blocks fenced ```console (servers started with other flags, installs) run in
 * test/docs/console-examples.test.ts, each in a terminal of its own; ```text is not run.
 *
 * What an example states is asserted (the README states the convention under Install):
 * - `# → 201` after a shell command: the HTTP status of its curl answer; `# → exit 1`:
 *   the command's exit code; any words after them must appear in its output. A command
 *   without a stated status must exit 0, and its curl answers must be below 400.
 * - A command whose comment says `Ctrl-C` runs for a second, then is stopped.
 * - `// → text` in TypeScript: the program prints `text`, in that order; it must end.
 *
 * The shell blocks share one bash session (variables carry over, as in a terminal, from the
 * README into the guides, which say what of it they use); `rill` is the built CLI, and
 * `import ... from 'rill-streams/client'` resolves to the built package by its own name. A
 * ```ts block whose first line is a `// CommonJS` comment runs as a CommonJS file (`.cts`).
 *
 * Every document under docs/ with a runnable block is a guide the README links, except the
 * ones in NOT_GUIDES; every relative link between README.md, SECURITY.md and docs/*.md names
 * a file and a heading that exist.
 */
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, freePort, startServer, tempDataDir, removeDir, type ServerProcess } from '../helpers/server.js';
import { guides, runnableBlocks, shellCommands, statedPrints, type Block } from './markdown.js';
import { expectStated, portFree, Shell } from './shell.js';

const ROOT = resolve(import.meta.dirname, '../..');
const README = join(ROOT, 'README.md');
/** Documents under docs/ whose ```sh blocks are not examples against a server. */
const NOT_GUIDES: Record<string, string> = {
  'docs/performance.md': 'its sh block lists the `npm run bench` commands, which take minutes and change the checkout',
};
const DOC_PORT = 4437;
/** Inside the package, so that the examples' imports resolve to it by its own name. */
const WORK = join(ROOT, '.readme-run');
/**
 * tsx's loader, imported by node itself: the `tsx` command would start a second node process
 * to run the file with this same loader (about 0.3 s of CPU per example here).
 */
const TSX_LOADER = pathToFileURL(join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href;
const BLOCK_TIMEOUT_MS = 20_000;

function runTs(file: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', TSX_LOADER, file], { env, cwd: WORK });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), BLOCK_TIMEOUT_MS);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

let server: ServerProcess;
let shell: Shell;
let port: number;
const env: NodeJS.ProcessEnv = { ...process.env };

beforeAll(async () => {
  port = (await portFree(DOC_PORT)) ? DOC_PORT : await freePort();
  server = await startServer({ process: true, port, dataDir: tempDataDir('rill-readme-'), env: { RILL_LOG_LEVEL: 'warn' } });
  rmSync(WORK, { recursive: true, force: true });
  mkdirSync(join(WORK, 'bin'), { recursive: true });
  writeFileSync(join(WORK, 'bin/rill'), `#!/bin/sh\nexec "${process.execPath}" "${CLI}" "$@"\n`);
  chmodSync(join(WORK, 'bin/rill'), 0o755);
  env.PATH = `${join(WORK, 'bin')}:${process.env.PATH}`;
  // The CLI's default server is 4437: on another port, the shell names it as a user would.
  if (port === DOC_PORT) delete env.RILL_URL;
  else env.RILL_URL = `http://127.0.0.1:${port}`;
  shell = new Shell(env, WORK, BLOCK_TIMEOUT_MS);
  await shell.run({ text: shell.functions(), line: 0, untilCtrlC: false }, join(WORK, 'prelude.out'));
});

afterAll(async () => {
  shell?.close();
  await server?.stop();
  if (server) removeDir(server.dataDir);
  rmSync(WORK, { recursive: true, force: true });
});

/** Runs a document's examples in the shared shell, against the shared server. */
async function runExamples(doc: string): Promise<number> {
  const markdown = readFileSync(join(ROOT, doc), 'utf8').replaceAll(`127.0.0.1:${DOC_PORT}`, `127.0.0.1:${port}`);
  const blocks = runnableBlocks(markdown);
  for (const [n, block] of blocks.entries()) {
    if (block.lang === 'ts') {
      const commonJs = /^\/\/ CommonJS\b/.test(block.code);
      const file = join(WORK, `${doc.replace(/\W+/g, '-')}-block-${n}.${commonJs ? 'cts' : 'mts'}`);
      writeFileSync(file, block.code);
      const run = await runTs(file, env);
      expect(run.code, `${doc} line ${block.line}: the TypeScript example failed or did not end\n${run.output}`).toBe(0);
      let from = 0;
      for (const print of statedPrints(block)) {
        const at = run.output.indexOf(print, from);
        expect(at, `${doc} line ${block.line}: expected it to print ${print}\n${run.output}`).toBeGreaterThanOrEqual(0);
        from = at + print.length;
      }
      continue;
    }
    for (const command of shellCommands(block)) {
      // Installing or running npm scripts would change the checkout this test runs in.
      expect(command.text, `${doc} line ${command.line}: fence install and npm commands as console, not sh`).not.toMatch(/^\s*(sudo\s+)?(npm|npx|yarn|pnpm)\b/);
      const started = Date.now();
      const raw = await shell.run(command, join(WORK, 'command.out'), doc);
      if (process.env.RILL_README_TIMES) console.log(`${Date.now() - started} ms  ${doc} line ${command.line}`);
      expectStated(command, raw, doc);
    }
  }
  return blocks.length;
}

const GUIDES = guides(readFileSync(README, 'utf8'));

describe('README and guides', () => {
  it('README.md: every sh and ts example runs as written, in order, with the outcome it states', { timeout: 180_000 }, async () => {
    expect(await runExamples('README.md')).toBeGreaterThan(3);
  });

  // After the README's, in the order it lists them: a guide goes on from the README's state.
  for (const doc of GUIDES) {
    it(`${doc}: every sh and ts example runs as written, in order, with the outcome it states`, { timeout: 180_000 }, async () => {
      await runExamples(doc);
    });
  }

  it('every document under docs/ with an sh or ts example is a guide the README lists, and every guide exists', () => {
    expect(GUIDES.length).toBeGreaterThan(5);
    const examples = ['README.md', ...GUIDES].map((doc) => runnableBlocks(readFileSync(join(ROOT, doc), 'utf8')).length);
    expect(examples.reduce((sum, n) => sum + n, 0)).toBeGreaterThan(5);
    const docs = readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`);
    for (const doc of GUIDES) expect(docs, `the README lists ${doc}`).toContain(doc);
    const withExamples = docs.filter((doc) => runnableBlocks(readFileSync(join(ROOT, doc), 'utf8')).length > 0);
    const untested = withExamples.filter((doc) => !GUIDES.includes(doc) && !(doc in NOT_GUIDES));
    expect(untested, 'documents whose examples no test runs: list them under the README\'s ## Guides').toEqual([]);
  });
});

/** The anchors of a Markdown file's headings, as GitHub makes them. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const found = new Set<string>();
  for (const line of markdown.replace(/^```[\s\S]*?^```/gm, '').split('\n')) {
    const heading = /^#{1,6}\s+(.*)$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const slug = heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replaceAll(' ', '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    found.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return found;
}

describe('links between the documents', () => {
  it('every relative link of README.md, SECURITY.md and docs/*.md names a file that exists, and a heading in it', () => {
    const docs = ['README.md', 'SECURITY.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
    const broken: string[] = [];
    for (const doc of docs) {
      const text = readFileSync(join(ROOT, doc), 'utf8').replace(/^```[\s\S]*?^```/gm, '');
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue;
        const [path, anchor] = target!.split('#') as [string, string | undefined];
        const file = path === '' ? join(ROOT, doc) : resolve(dirname(join(ROOT, doc)), path);
        if (!existsSync(file)) broken.push(`${doc}: ${target} (no such file)`);
        else if (anchor && file.endsWith('.md') && !anchors(readFileSync(file, 'utf8')).has(anchor)) broken.push(`${doc}: ${target} (no such heading)`);
      }
    }
    expect(broken).toEqual([]);
  });
});

describe('README example conventions', () => {
  it('reads statuses, exit codes, outputs and Ctrl-C from the comments', () => {
    const block: Block = { lang: 'sh', line: 10, code: "# intro\ncurl -i -X PUT $B/x \\\n  -H 'a: b'   # → 201\nrill read x  # → exit 1 STREAM_NOT_FOUND\ncurl -N $B/x # Ctrl-C to stop" };
    expect(shellCommands(block)).toEqual([
      { text: "curl -i -X PUT $B/x \\\n  -H 'a: b'   # → 201", line: 12, untilCtrlC: false, status: 201 },
      { text: 'rill read x  # → exit 1 STREAM_NOT_FOUND', line: 14, untilCtrlC: false, exit: 1, output: 'STREAM_NOT_FOUND' },
      { text: 'curl -N $B/x # Ctrl-C to stop', line: 15, untilCtrlC: true },
    ]);
    expect(runnableBlocks('```sh\na\n```\n```console\nb\n```\n```ts\nc // → 3\n```\n').map((b) => b.lang)).toEqual(['sh', 'ts']);
    expect(statedPrints({ lang: 'ts', line: 1, code: 'console.log(1); // → 1\nx(); // no' })).toEqual(['1']);
    expect(guides('## Guides\n\n- [A](docs/a.md): x\n  [not](docs/x.md)\n- [B](docs/b.md)\n\nSee [C](docs/c.md).\n\n## Next\n\n- [D](docs/d.md)\n')).toEqual(['docs/a.md', 'docs/b.md']);
    expect(guides('## Guides\n\n- [A](docs/a.md)\n')).toEqual(['docs/a.md']);
  });
});
