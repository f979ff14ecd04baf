/**
 * The light client package (packages/client): packed as npm would publish it, it holds the
 * client and the protocol files it uses, nothing of the server, and depends on nothing but
 * @noble/hashes, so an application installs it in seconds (no better-sqlite3 to compile, no
 * pg). Its files import only web-standard APIs, so they run in browsers too. Installed into
 * an empty application, it writes exactly once and reads back against a real server.
 */
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeDir, startServer, tempDataDir, type RunningServer } from '../helpers/server.js';

const execFileAsync = promisify(execFile);
const repo = fileURLToPath(new URL('../../', import.meta.url));
const work = tempDataDir('rill-client-package-');
let packed: { filename: string; files: Array<{ path: string }> };
let server: RunningServer;

beforeAll(async () => {
  // npm pack runs the package's prepack: its build from the repository's sources.
  const out = execFileSync('npm', ['pack', './packages/client', '--pack-destination', work, '--json'], { cwd: repo, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  packed = (JSON.parse(out) as Array<typeof packed>)[0]!;
  server = await startServer();
}, 120_000);

afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
  removeDir(work);
});

/** Every module a JavaScript file (as tsc writes it: a statement per line) imports or re-exports, statically or dynamically. */
function importsOf(source: string): string[] {
  const statements = /^\s*(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|^\s*import\s*['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]/gm;
  return [...source.matchAll(statements)].map((match) => (match[1] ?? match[2] ?? match[3])!);
}

describe('the rill-streams-client package', () => {
  it('holds the client and the protocol files it uses, no server code, and depends on @noble/hashes alone', () => {
    const paths = packed.files.map((file) => file.path);
    expect(paths).toContain('dist/client/index.js');
    expect(paths).toContain('dist/client/index.d.ts');
    for (const path of paths) expect(path, path).toMatch(/^(package\.json|README\.md|dist\/(client|protocol)\/[\w-]+\.(js|d\.ts))$/);
    const manifest = JSON.parse(readFileSync(join(repo, 'packages/client/package.json'), 'utf8')) as Record<string, unknown>;
    expect(Object.keys(manifest.dependencies as object)).toEqual(['@noble/hashes']);
    expect(manifest.devDependencies).toBeUndefined();
  });

  it('imports nothing but its own files and @noble/hashes: no node: module, so it runs in browsers', () => {
    const app = join(work, 'unpacked');
    mkdirSync(app, { recursive: true });
    execFileSync('tar', ['-xzf', join(work, packed.filename), '-C', app]);
    const dist = join(app, 'package', 'dist');
    for (const dir of readdirSync(dist)) {
      for (const file of readdirSync(join(dist, dir)).filter((name) => name.endsWith('.js'))) {
        for (const specifier of importsOf(readFileSync(join(dist, dir, file), 'utf8'))) {
          expect(specifier, `${dir}/${file}`).toMatch(/^(\.\.?\/[\w./-]+\.js|@noble\/hashes\/[\w./-]+\.js)$/);
        }
      }
    }
  });

  it('installed into an empty application, writes exactly once and reads back from a real server', async () => {
    const app = join(work, 'app');
    const modules = join(app, 'node_modules');
    mkdirSync(join(modules, 'rill-streams-client'), { recursive: true });
    execFileSync('tar', ['-xzf', join(work, packed.filename), '-C', join(modules, 'rill-streams-client'), '--strip-components=1']);
    // Its one dependency, as npm would install it (the registry is not reached from tests).
    symlinkSync(join(repo, 'node_modules', '@noble'), join(modules, '@noble'));
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    writeFileSync(
      join(app, 'main.js'),
      `import { IdempotentProducer, RillClient } from 'rill-streams-client';
const client = new RillClient({ url: process.argv[2] });
await client.bucket('apps').create();
const stream = client.stream('apps/orders');
await stream.create({ contentType: 'application/json' });
const producer = new IdempotentProducer(stream, { id: 'checkout', digest: true });
for (const n of [1, 2, 3]) await producer.appendJson({ n });
await producer.close();
const values = [];
for await (const batch of stream.read()) values.push(...batch.messages.map((message) => message.value));
console.log(JSON.stringify(values));
`,
    );
    // Asynchronously: the server runs in this process.
    const run = await execFileAsync(process.execPath, ['main.js', server.url], { cwd: app, encoding: 'utf8' });
    expect(run.stderr).toBe('');
    const out = run.stdout;
    expect(JSON.parse(out)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
  });
});
