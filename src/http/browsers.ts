/**
 * What protects a rill from the web pages open in a browser that can reach it: which
 * origins get CORS headers, and, on a loopback address, which Host names are served (a
 * page that re-points its own domain at 127.0.0.1, DNS rebinding, sends its own Host).
 *
 * Defaults: with auth off, only pages served from loopback names (a developer's own
 * app); with auth on, any origin, since every request must carry a bearer token that a
 * foreign page does not have (rill uses no cookies). `--cors-origin` replaces either.
 *
 * CORS only stops a page from reading answers: a "simple" cross-site POST (a text/plain
 * form or fetch) still arrives and would write. So an unsafe request whose Origin is
 * neither allowed nor the server's own is refused before anything is served. A request
 * without Origin (curl, servers) is not a browser's cross-site request and is unaffected.
 */
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { protocolError, type ProtocolError } from '../protocol/errors.js';

const CORS_ORIGIN = Symbol('rill.corsOrigin');
/** Methods that change nothing here (RFC 9110's safe methods rill serves): any origin may send them. */
const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);
type Tagged = IncomingMessage & { [CORS_ORIGIN]?: string | null };

/** Host names (without port) that are loopback: localhost, *.localhost, 127.0.0.0/8, ::1. */
export function isLoopbackName(host: string): boolean {
  const name = host.toLowerCase().replace(/^\[|\]$/g, '');
  if (name === 'localhost' || name.endsWith('.localhost')) return true;
  if (isIP(name) === 4) return name.startsWith('127.');
  return name === '::1' || name === '0:0:0:0:0:0:0:1';
}

/** The name part of a Host header: `[::1]:4437` -> `[::1]`, `a.b:80` -> `a.b`. */
function hostName(host: string): string {
  const bracket = /^(\[[^\]]*\])(?::\d*)?$/.exec(host);
  if (bracket) return bracket[1]!;
  const colon = host.lastIndexOf(':');
  return colon < 0 || host.indexOf(':') !== colon ? host : host.slice(0, colon);
}

function loopbackOrigin(origin: string): boolean {
  try {
    const url = new URL(origin);
    return (url.protocol === 'http:' || url.protocol === 'https:') && isLoopbackName(url.hostname);
  } catch {
    return false;
  }
}

export class BrowserPolicy {
  private readonly origins: Set<string> | null;
  private readonly anyOrigin: boolean;
  private readonly hosts: Set<string> | null;

  /**
   * The last Host found served: the same clients send the same Host again and again, and
   * judging it (regular expressions, two lowercasings) was about 1,800 instructions a
   * request under callgrind.
   */
  private lastServedHost: string | null = null;

  private readonly scheme: 'http' | 'https';
  private readonly publicOrigin: string | null;

  constructor(options: { corsOrigins: string[] | null; authOn: boolean; listenHost: string; allowedHosts: string[]; tls: boolean; publicUrl: string | null }) {
    const configured = options.corsOrigins;
    this.scheme = options.tls ? 'https' : 'http';
    this.publicOrigin = options.publicUrl === null ? null : originOfUrl(options.publicUrl);
    this.anyOrigin = configured === null ? options.authOn : configured.includes('*');
    this.origins = configured === null ? null : new Set(configured.map((o) => o.replace(/\/+$/, '').toLowerCase()));
    this.hosts = isLoopbackName(options.listenHost) ? new Set(options.allowedHosts.map((h) => h.toLowerCase())) : null;
  }

  /** The refusal of a request whose Host is not served here (loopback listeners only). */
  hostRefusal(req: IncomingMessage): ProtocolError | null {
    if (this.hosts === null) return null;
    const host = req.headers.host;
    // HTTP/1.0 clients may send none; browsers always do.
    if (host === undefined || host === this.lastServedHost) return null;
    const name = hostName(host).toLowerCase();
    if (isLoopbackName(name) || this.hosts.has(name) || this.hosts.has(host.toLowerCase())) {
      this.lastServedHost = host;
      return null;
    }
    return protocolError('HOST_NOT_ALLOWED', `this server listens on loopback and does not serve Host "${name}"; add it with --allowed-host`);
  }

  /** Decides once per request whether its Origin gets CORS headers; `corsOriginOf` reads it. */
  tagOrigin(req: IncomingMessage): void {
    const origin = req.headers.origin;
    (req as Tagged)[CORS_ORIGIN] = typeof origin === 'string' && this.allows(origin) ? origin : null;
  }

  /**
   * The refusal of an unsafe request (not GET, HEAD, OPTIONS) sent by a page of an origin
   * that is not allowed and is not this server's own (the console's): a cross-site write.
   * Call after tagOrigin.
   */
  originRefusal(req: IncomingMessage): ProtocolError | null {
    const origin = req.headers.origin;
    if (typeof origin !== 'string' || SAFE_METHODS.has(req.method ?? 'GET')) return null;
    if ((req as Tagged)[CORS_ORIGIN] || this.isOwnOrigin(origin, req.headers.host)) return null;
    return protocolError('ORIGIN_NOT_ALLOWED', `pages of origin "${origin.slice(0, 200)}" may not change anything here; add it with --cors-origin`);
  }

  /** The served scheme and Host of the request itself, or the origin of --public-url (behind a proxy). */
  private isOwnOrigin(origin: string, host: string | undefined): boolean {
    const sent = originOfUrl(origin);
    if (sent === null) return false;
    if (sent === this.publicOrigin) return true;
    return host !== undefined && sent === originOfUrl(`${this.scheme}://${host}`);
  }

  private allows(origin: string): boolean {
    if (this.anyOrigin) return true;
    if (this.origins === null) return loopbackOrigin(origin);
    return this.origins.has(origin.toLowerCase());
  }
}

/** The serialised origin of a URL (`https://a.example:8443`, default port left out); null when unparsable or opaque. */
function originOfUrl(url: string): string | null {
  try {
    const parsed = new URL(url);
    return parsed.origin === 'null' ? null : parsed.origin;
  } catch {
    return null;
  }
}

/** The Origin to answer with CORS headers, or undefined: none sent, or not allowed. */
export function corsOriginOf(req: IncomingMessage | undefined): string | undefined {
  return (req as Tagged | undefined)?.[CORS_ORIGIN] ?? undefined;
}
