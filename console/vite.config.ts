/**
 * Builds the web console (console/) into dist/console, served by `rill serve` at
 * /console/. The client library is bundled from src/client; nothing is fetched from
 * another host, at build time or at run time.
 */
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const here = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root: here,
  base: '/console/',
  logLevel: 'warn',
  // Vite's own transformer (Oxc) compiles the JSX for Preact: no plugin needed.
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: fileURLToPath(new URL('../dist/console', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    // The server's Content-Security-Policy allows no inline script or style.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
  },
});
