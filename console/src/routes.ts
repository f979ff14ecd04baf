/** Hash routes, so that the static server needs no fallback: #/, #/b/{bucket}, #/s/{path}. */
export type Route = { page: 'buckets' } | { page: 'bucket'; bucket: string } | { page: 'stream'; path: string };

function decodeSegments(text: string): string[] {
  return text
    .split('/')
    .filter((s) => s !== '')
    .map((s) => {
      try {
        return decodeURIComponent(s);
      } catch {
        return s;
      }
    });
}

export function parseHash(hash: string): Route {
  const [kind, ...rest] = decodeSegments(hash.replace(/^#/, ''));
  if (kind === 'b' && rest.length === 1) return { page: 'bucket', bucket: rest[0]! };
  if (kind === 's' && rest.length > 0) return { page: 'stream', path: rest.join('/') };
  return { page: 'buckets' };
}

const encode = (path: string) => path.split('/').map(encodeURIComponent).join('/');

export function hrefOf(route: Route): string {
  switch (route.page) {
    case 'buckets':
      return '#/';
    case 'bucket':
      return `#/b/${encodeURIComponent(route.bucket)}`;
    case 'stream':
      return `#/s/${encode(route.path)}`;
  }
}

export function go(route: Route): void {
  location.hash = hrefOf(route);
}
