// Bundles the `rill` command (dist/cli/main.js, tsc's output) and its worker threads into
// dist/bin/: one file each, with their dependencies inside. Run by `npm run build` after tsc.
//
// Why: every `rill` command and server start used to load some 200 modules of dist/ and
// the modules of pino, pg, prom-client, jose and commander one file at a time, which cost
// a server start about 630 ms of CPU here and 410 ms bundled (docs/testing.md). The
// bundle is the same code: tsc's output, joined, names kept.
//
// dist/bin/ sits at the same depth as dist/ops/ and dist/http/, so the paths the modules
// take from import.meta.url (the package root, dist/console/, dist/build-info.json) and the
// worker scripts beside their caller (src/storage/worker-script.ts) resolve the same.
//
// `--if-changed` skips the work when the bundle is newer than every module of dist/ and the
// lock file, as `npm start` rebuilds each time.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('../', import.meta.url));
const dist = join(root, 'dist');
const outdir = join(dist, 'bin');
const ENTRIES = {
  rill: join(dist, 'cli/main.js'),
  // Started by the storage thread and the SQLite checkpointer as `./worker.js` and
  // `./checkpoint-worker.js` beside the module that starts them: the bundle, here.
  worker: join(dist, 'storage/thread/worker.js'),
  'checkpoint-worker': join(dist, 'storage/sqlite/checkpoint-worker.js'),
};
// Not bundled: a native module (better-sqlite3), pg's optional native driver, and the
// modules loaded only on demand with createRequire (pino-pretty for a terminal,
// cli-progress for a progress bar) or import() (the S3 client, only with --cold-store:
// bundled, it doubled the file every start parses), which resolve from node_modules as before.
const EXTERNAL = ['better-sqlite3', 'pg-native', 'pino-pretty', 'cli-progress', '@aws-sdk/client-s3'];
// The CommonJS dependencies inside an ES module bundle still call require() (for Node's own
// modules) and read __dirname; this gives them both, as Node gives a CommonJS module.
const BANNER = [
  "import { createRequire as __rillCreateRequire } from 'node:module';",
  "import { fileURLToPath as __rillFileURLToPath } from 'node:url';",
  'const require = __rillCreateRequire(import.meta.url);',
  'const __filename = __rillFileURLToPath(import.meta.url);',
  "const __dirname = __rillFileURLToPath(new URL('.', import.meta.url));",
].join(' ');

function newestModuleMs(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (path !== outdir && path !== join(dist, 'console')) newest = Math.max(newest, newestModuleMs(path));
    } else if (entry.name.endsWith('.js')) {
      newest = Math.max(newest, statSync(path).mtimeMs);
    }
  }
  return newest;
}

function upToDate() {
  const bundleMs = Math.min(...Object.keys(ENTRIES).map((name) => statSync(join(outdir, `${name}.js`), { throwIfNoEntry: false })?.mtimeMs ?? 0));
  const lockMs = statSync(join(root, 'package-lock.json'), { throwIfNoEntry: false })?.mtimeMs ?? Infinity;
  return bundleMs > Math.max(newestModuleMs(dist), lockMs);
}

if (process.argv.includes('--if-changed') && upToDate()) process.exit(0);
await build({
  entryPoints: ENTRIES,
  outdir,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  external: EXTERNAL,
  banner: { js: BANNER },
  // Licences of the bundled packages, in dist/bin/*.LEGAL.txt.
  legalComments: 'linked',
  logLevel: 'warning',
});
