// Builds the web console into dist/console (tsc checks it, vite bundles it). With
// --if-changed, as `npm run build` (and so `npm start`) runs it, the build is skipped when
// dist/console is newer than every file it is made from: the console's own sources, the
// rill sources it bundles (src/), and the package files; a start with nothing changed then
// costs no console build (about 5 s here).
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const INPUTS = ['console', 'src', 'package.json', 'package-lock.json'];
const OUTPUT = 'dist/console/index.html';

/** The newest modification time under `path`, in ms. */
function newestMs(path) {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = stat.mtimeMs;
  for (const entry of readdirSync(path)) newest = Math.max(newest, newestMs(join(path, entry)));
  return newest;
}

/** Whether the console built in `root` is newer than every file it is made from. */
export function consoleUpToDate(root) {
  const output = join(root, OUTPUT);
  if (!existsSync(output)) return false;
  const inputs = INPUTS.map((input) => join(root, input)).filter((path) => existsSync(path));
  return Math.max(...inputs.map(newestMs)) < statSync(output).mtimeMs;
}

function build(root) {
  const run = (bin, args) => execFileSync(process.execPath, [join(root, 'node_modules', bin), ...args], { cwd: root, stdio: 'inherit' });
  run('typescript/bin/tsc', ['-p', 'console/tsconfig.json']);
  run('vite/bin/vite.js', ['build', '--config', 'console/vite.config.ts']);
}

const root = fileURLToPath(new URL('../', import.meta.url));
if (process.argv[1] === undefined || import.meta.url !== pathToFileURL(process.argv[1]).href) {
  // Imported (by its test): nothing runs.
} else if (process.argv.includes('--if-changed') && consoleUpToDate(root)) {
  console.log('console: up to date (dist/console is newer than its sources)');
} else {
  build(root);
}
