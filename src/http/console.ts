/**
 * The web console's built files (`dist/console`, made by `npm run build`), served
 * read-only under `/console/`. Only files inside that folder are answered: a path is
 * decoded once, refused if any segment is `..` or holds a NUL or backslash, and checked
 * again after resolving. Unknown files answer the usual JSON 404.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { readFile, stat } from 'node:fs/promises';
import { extname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { protocolError } from '../protocol/errors.js';
import { send, sendError } from './response.js';

/** From both `src/http` (tests) and `dist/http` (the package), the package's `dist/console`. */
export const DEFAULT_CONSOLE_DIR = fileURLToPath(new URL('../../dist/console/', import.meta.url));

/** The built console is a few hundred KB; nothing larger is served. */
const MAX_CONSOLE_FILE_BYTES = 8 * 1024 * 1024;

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

/**
 * The page talks only to the server that served it: scripts, styles and requests from
 * this origin, nothing inline, no framing.
 */
const CONTENT_SECURITY_POLICY = "default-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

export function isConsolePath(pathname: string): boolean {
  return pathname === '/console' || pathname.startsWith('/console/');
}

/** The file a console path names, relative to the console folder, or undefined when the path may not name one. */
export function consoleFileOf(pathname: string): string | undefined {
  let relative: string;
  try {
    relative = decodeURIComponent(pathname.slice('/console/'.length));
  } catch {
    return undefined;
  }
  if (relative === '') return 'index.html';
  const segments = relative.split('/');
  if (segments.some((s) => s === '' || s === '.' || s === '..' || s.includes('\\') || s.includes('\0'))) return undefined;
  return segments.join('/');
}

const notFound = (res: ServerResponse, message = 'no such console file') => sendError(res, protocolError('NOT_FOUND', message));

export async function handleConsole(req: IncomingMessage, res: ServerResponse, dir: string, pathname: string): Promise<void> {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    return sendError(res, protocolError('METHOD_NOT_ALLOWED', 'the console is read-only'), { allow: 'GET, HEAD' });
  }
  if (pathname === '/console') return send(res, 308, { location: '/console/', 'cache-control': 'no-store' });
  const file = consoleFileOf(pathname);
  if (file === undefined) return notFound(res);
  const root = resolve(dir);
  const path = resolve(join(root, file));
  if (!path.startsWith(root + sep)) return notFound(res);
  const info = await stat(path).catch(() => undefined);
  if (info === undefined || !info.isFile() || info.size > MAX_CONSOLE_FILE_BYTES) {
    return notFound(res, file === 'index.html' ? 'the console is not built (run npm run build)' : undefined);
  }
  const body = await readFile(path);
  send(res, 200, {
    'content-type': CONTENT_TYPES[extname(path)] ?? 'application/octet-stream',
    // Vite names every asset by its hash, so it never changes; index.html names them and must be checked each time.
    'cache-control': file.startsWith('assets/') ? 'public, max-age=31536000, immutable' : 'no-cache',
    'content-security-policy': CONTENT_SECURITY_POLICY,
    'referrer-policy': 'no-referrer',
  }, body);
}
