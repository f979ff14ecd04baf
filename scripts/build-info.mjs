// Writes dist/build-info.json: the commit this build was made from, so that `rill --version`,
// the startup log, /healthz and the rill_build_info metric can say what runs. Run by
// `npm run build` after tsc. Outside a git checkout (a tarball), the commit is "unknown".
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';

const root = new URL('../', import.meta.url);
let commit = 'unknown';
try {
  commit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() || 'unknown';
} catch {
  // No git, or not a checkout: the build goes on without a commit.
}
const { version } = JSON.parse(readFileSync(new URL('package.json', root), 'utf8'));
mkdirSync(new URL('dist/', root), { recursive: true });
writeFileSync(new URL('dist/build-info.json', root), `${JSON.stringify({ version, commit })}\n`);
