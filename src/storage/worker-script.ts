import { fileURLToPath } from 'node:url';

/**
 * The file a worker thread runs: script `name` (without extension) beside the calling
 * module (`callerUrl`, its import.meta.url). Under the test runner the caller is
 * TypeScript, which a worker cannot load; the tests run against the build (`npm test`
 * builds first), so the script is taken from dist/ there.
 */
export function workerScript(callerUrl: string, name: string): string {
  const caller = fileURLToPath(callerUrl);
  const script = fileURLToPath(new URL(`./${name}.js`, callerUrl));
  if (!caller.endsWith('.ts')) return script;
  const at = script.lastIndexOf('/src/');
  if (at < 0) throw new Error(`invariant: a TypeScript module outside src/ starts a worker (${caller})`);
  return `${script.slice(0, at)}/dist/${script.slice(at + '/src/'.length)}`;
}
