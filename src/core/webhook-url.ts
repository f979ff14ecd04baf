/**
 * Which webhook URLs rill will call (server-side request forgery). A subscription's URL
 * is checked when it is created (`checkWebhookUrl`), and every address its host
 * resolves to is checked again when a delivery connects (`isForbiddenAddress`), so a
 * name that later resolves to a private address (DNS rebinding) reaches nothing inside.
 *
 * Refused: anything but `https:`; user names and passwords; fragments; control
 * characters and spaces (the URL parser would silently drop some of them); port 0;
 * `localhost` and `*.localhost`; and IP addresses that are not public unicast: loopback,
 * "this network" 0/8, RFC 1918, CGNAT 100.64/10, link-local, IETF protocol assignments
 * 192.0.0/24, benchmarking 198.18/15, documentation 192.0.2/24, 198.51.100/24 and
 * 203.0.113/24, the 6to4 relay anycast 192.88.99/24, multicast, reserved 240/4 and
 * broadcast; IPv6 `::`, `::1`, the IPv4-compatible form, the IPv4-mapped form
 * (::ffff:0:0/96) of every refused IPv4 address, documentation 2001:db8::/32, unique-local fc00::/7, link-local
 * fe80::/10, site-local fec0::/10, multicast, Teredo 2001::/32, and NAT64 (64:ff9b::/96,
 * 64:ff9b:1::/48) and 6to4 (2002::/16) addresses whose embedded IPv4 address is refused.
 *
 * `allowLocalhost` is a development setting: it allows `http:` or `https:` to
 * `localhost`, `*.localhost`, 127.0.0.0/8 and ::1, and nothing else that is private.
 *
 * Pure: no Node modules (the WHATWG `URL` parser is a global), no I/O.
 */

export const MAX_WEBHOOK_URL_BYTES = 2048;

export type WebhookUrlCheck = { ok: true; url: URL } | { ok: false; reason: string };

/** What a refused local webhook adds: the server flag that allows it, for development. */
export const LOCALHOST_FLAG_HINT = 'a server started with --webhook-allow-localhost (development only) calls localhost, over http too';

const refuse = (reason: string): WebhookUrlCheck => ({ ok: false, reason });

export function checkWebhookUrl(raw: string, allowLocalhost: boolean): WebhookUrlCheck {
  if (typeof raw !== 'string' || raw.length === 0) return refuse('the webhook URL is empty');
  if (new TextEncoder().encode(raw).length > MAX_WEBHOOK_URL_BYTES) {
    return refuse(`the webhook URL is longer than ${MAX_WEBHOOK_URL_BYTES} bytes`);
  }
  // The parser strips tabs and newlines anywhere and spaces at the ends: refuse rather
  // than call a URL other than the one written.
  if (/[\u0000-\u0020\u007f]/.test(raw)) return refuse('the webhook URL holds a space or a control character');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return refuse('the webhook URL is not a valid absolute URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return refuse('the webhook URL must use https');
  if (url.username !== '' || url.password !== '') return refuse('the webhook URL must not hold a user name or password');
  if (url.hash !== '' || raw.includes('#')) return refuse('the webhook URL must not hold a fragment');
  if (url.port === '0') return refuse('the webhook URL must not use port 0');
  const host = hostOf(url);
  if (host.kind === 'none') return refuse('the webhook URL has no host');
  const local = isLocalHost(host);
  // A local webhook refused in production names the flag that allows it in development.
  const devOnly = local && !allowLocalhost ? `; ${LOCALHOST_FLAG_HINT}` : '';
  if (url.protocol === 'http:' && !(allowLocalhost && local)) {
    return refuse(allowLocalhost ? 'the webhook URL must use https unless its host is localhost' : `the webhook URL must use https${devOnly}`);
  }
  if (host.kind === 'name') {
    if (local && !allowLocalhost) return refuse(`the webhook URL's host ${host.value} is local${devOnly}`);
    return { ok: true, url };
  }
  if (isForbiddenAddress(host.value, allowLocalhost)) {
    return refuse(`the webhook URL's host ${host.value} is not a public address${devOnly}`);
  }
  return { ok: true, url };
}

type Host = { kind: 'none' } | { kind: 'name'; value: string } | { kind: 'ip'; value: string };

/** The URL's host as a name or an address, with the brackets and trailing dot removed. */
function hostOf(url: URL): Host {
  let value = url.hostname;
  if (value.startsWith('[') && value.endsWith(']')) return { kind: 'ip', value: value.slice(1, -1) };
  while (value.endsWith('.')) value = value.slice(0, -1);
  if (value === '') return { kind: 'none' };
  // The parser already turned every IPv4 spelling (hex, octal, short forms) into a dotted quad.
  return parseIpv4(value) === null ? { kind: 'name', value } : { kind: 'ip', value };
}

function isLocalHost(host: Host): boolean {
  if (host.kind === 'name') return host.value === 'localhost' || host.value.endsWith('.localhost');
  return host.kind === 'ip' && isLoopbackAddress(host.value);
}

/**
 * Whether a delivery must not connect to `ip` (an address as DNS answers it). Anything
 * that does not parse as an address is forbidden: the check fails closed.
 */
export function isForbiddenAddress(ip: string, allowLocalhost: boolean): boolean {
  if (allowLocalhost && isLoopbackAddress(ip)) return false;
  const v4 = parseIpv4(ip);
  if (v4 !== null) return isForbiddenIpv4(v4);
  const v6 = parseIpv6(ip);
  if (v6 !== null) return isForbiddenIpv6(v6);
  return true;
}

/** 127.0.0.0/8, ::1, and 127.0.0.0/8 mapped into IPv6. */
export function isLoopbackAddress(ip: string): boolean {
  const v4 = parseIpv4(ip);
  if (v4 !== null) return v4 >>> 24 === 127;
  const v6 = parseIpv6(ip);
  if (v6 === null) return false;
  if (v6.slice(0, 7).every((g) => g === 0) && v6[7] === 1) return true;
  return isMapped(v6) && embeddedIpv4(v6, 6) >>> 24 === 127;
}

/** [first address, prefix length] of IPv4 ranges that are not public unicast. */
const FORBIDDEN_IPV4: Array<[string, number]> = [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  // Documentation (TEST-NET-1, -2, -3) and the retired 6to4 relay anycast: never a real receiver.
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
];
const FORBIDDEN_IPV4_RANGES = FORBIDDEN_IPV4.map(([first, bits]) => ({ first: parseIpv4(first)!, bits }));

function isForbiddenIpv4(address: number): boolean {
  return FORBIDDEN_IPV4_RANGES.some(({ first, bits }) => address >>> (32 - bits) === first >>> (32 - bits));
}

function isForbiddenIpv6(groups: number[]): boolean {
  const [g0, g1, g2, g3, g4, g5] = groups as [number, number, number, number, number, number];
  if (g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0 && (g5 === 0 || g5 === 0xffff)) {
    // ::/96 holds ::, ::1 and the deprecated IPv4-compatible form; ::ffff:0:0/96 is IPv4-mapped.
    return g5 === 0 || isForbiddenIpv4(embeddedIpv4(groups, 6));
  }
  if ((g0 & 0xfe00) === 0xfc00) return true; // unique local fc00::/7
  if ((g0 & 0xffc0) === 0xfe80 || (g0 & 0xffc0) === 0xfec0) return true; // link-local, site-local
  if ((g0 & 0xff00) === 0xff00) return true; // multicast
  if (g0 === 0x2001 && g1 === 0) return true; // Teredo: its IPv4 address is obscured
  if (g0 === 0x2001 && g1 === 0x0db8) return true; // documentation 2001:db8::/32
  if (g0 === 0x64 && g1 === 0xff9b && (g2 === 1 || groups.slice(2, 6).every((g) => g === 0))) {
    return isForbiddenIpv4(embeddedIpv4(groups, 6)); // NAT64 well-known and local-use prefixes
  }
  if (g0 === 0x2002) return isForbiddenIpv4(embeddedIpv4(groups, 1)); // 6to4
  return false;
}

function isMapped(groups: number[]): boolean {
  return groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff;
}

/** The IPv4 address held in groups `at` and `at + 1`. */
function embeddedIpv4(groups: number[], at: number): number {
  return ((groups[at]! << 16) | groups[at + 1]!) >>> 0;
}

/** A dotted quad of decimal numbers 0..255 as an unsigned 32-bit number, or null. */
function parseIpv4(text: string): number | null {
  const parts = text.split('.');
  if (parts.length !== 4) return null;
  let value = 0;
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part)) return null;
    const octet = Number(part);
    if (octet > 255) return null;
    value = value * 256 + octet;
  }
  return value;
}

/** An IPv6 address (`::` shorthand, a dotted IPv4 tail, a `%zone` suffix allowed) as 8 groups, or null. */
function parseIpv6(text: string): number[] | null {
  const address = text.split('%')[0]!.toLowerCase();
  if (!address.includes(':')) return null;
  const halves = address.split('::');
  if (halves.length > 2) return null;
  const head = groupsOf(halves[0]!);
  const tail = halves.length === 2 ? groupsOf(halves[1]!) : [];
  if (head === null || tail === null) return null;
  if (halves.length === 1) return head.length === 8 ? head : null;
  if (head.length + tail.length > 7) return null;
  return [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
}

function groupsOf(part: string): number[] | null {
  if (part === '') return [];
  const groups: number[] = [];
  const pieces = part.split(':');
  for (let i = 0; i < pieces.length; i++) {
    const piece = pieces[i]!;
    if (i === pieces.length - 1 && piece.includes('.')) {
      const v4 = parseIpv4(piece);
      if (v4 === null) return null;
      groups.push(v4 >>> 16, v4 & 0xffff);
    } else if (/^[0-9a-f]{1,4}$/.test(piece)) {
      groups.push(parseInt(piece, 16));
    } else {
      return null;
    }
  }
  return groups;
}
