/**
 * The permission decision: what a token's grants allow on one target. Pure: the caller
 * verified the token (src/auth/) and found the target (src/http/access.ts).
 *
 * Permissions are levels, each including the ones below it: read < write < manage <
 * admin. A grant gives one level on one bucket (or every bucket, `*`), optionally only
 * on the streams whose names start with a prefix. The bucket-less `/v1/stream/{name}`
 * family is the bucket `v1` (no real bucket can have that id: they are 4 to 64
 * characters long).
 *
 * Concealment: a token that cannot read a target is answered as if the target did not
 * exist, so that what it cannot see it cannot learn about either, not even its existence.
 * A token that can read it but lacks the level an operation needs is forbidden.
 */

export const PERMISSIONS = ['read', 'write', 'manage', 'admin'] as const;
export type Permission = (typeof PERMISSIONS)[number];

/** Every bucket, and the /v1 family. */
export const ANY_BUCKET = '*';
/** The bucket name grants use for the bucket-less /v1/stream family. */
export const V1_BUCKET = 'v1';

export interface Grant {
  /** A bucket id, `v1` or `*`. */
  bucket: string;
  /** Only streams whose names start with this; '' for every stream of the bucket. */
  prefix: string;
  level: Permission;
}

/** What an operation acts on: a stream, a bucket as a whole, or the server (every bucket). */
export type AccessTarget =
  | { kind: 'stream'; bucket: string; stream: string }
  | { kind: 'bucket'; bucket: string }
  /** A bucket's stream listing: it shows what the token reads there (see readablePrefixes). */
  | { kind: 'listing'; bucket: string }
  | { kind: 'server' };

export type AccessVerdict = 'allow' | 'forbid' | 'conceal';

const RANK: Record<Permission, number> = { read: 1, write: 2, manage: 3, admin: 4 };

export function isPermission(value: unknown): value is Permission {
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(RANK, value);
}

/** The highest of several permissions (a grant's `can` list). */
export function highestPermission(levels: readonly Permission[]): Permission | null {
  let best: Permission | null = null;
  for (const level of levels) if (best === null || RANK[level] > RANK[best]) best = level;
  return best;
}

function coversBucket(grant: Grant, bucket: string): boolean {
  return grant.bucket === ANY_BUCKET || grant.bucket === bucket;
}

/** The level the grants give on a stream: 0 for none. */
function streamRank(grants: readonly Grant[], bucket: string, stream: string): number {
  let rank = 0;
  for (const g of grants) if (coversBucket(g, bucket) && stream.startsWith(g.prefix)) rank = Math.max(rank, RANK[g.level]);
  return rank;
}

/** The level on a bucket as a whole (grants without a prefix), and whether some prefix grant lets the token see into it. */
function bucketRanks(grants: readonly Grant[], bucket: string): { whole: number; partial: boolean } {
  let whole = 0;
  let partial = false;
  for (const g of grants) {
    if (!coversBucket(g, bucket)) continue;
    if (g.prefix === '') whole = Math.max(whole, RANK[g.level]);
    else partial = true;
  }
  return { whole, partial };
}

/**
 * Whether the grants allow `need` on `target`. A stream or bucket the token cannot read
 * (no grant reaches it) is concealed; a bucket a token sees only part of (prefix grants)
 * is visible, but an operation on the whole bucket needs a grant on the whole bucket.
 * Server-wide operations (listing every bucket) need a grant on `*`; there is nothing
 * to conceal there, so a token without one is forbidden.
 */
export function decideAccess(grants: readonly Grant[], need: Permission, target: AccessTarget): AccessVerdict {
  if (target.kind === 'stream') {
    const rank = streamRank(grants, target.bucket, target.stream);
    if (rank === 0) return 'conceal';
    return rank >= RANK[need] ? 'allow' : 'forbid';
  }
  if (target.kind === 'bucket' || target.kind === 'listing') {
    const { whole, partial } = bucketRanks(grants, target.bucket);
    if (whole === 0 && !partial) return 'conceal';
    if (target.kind === 'listing' && need === 'read') return 'allow';
    return whole >= RANK[need] ? 'allow' : 'forbid';
  }
  const everywhere = grants.reduce((rank, g) => (g.bucket === ANY_BUCKET && g.prefix === '' ? Math.max(rank, RANK[g.level]) : rank), 0);
  return everywhere >= RANK[need] ? 'allow' : 'forbid';
}

/**
 * The name prefixes a bucket listing may show: every name (`all`), or only names under
 * one of the returned prefixes (none when the list is empty). A listing shows exactly
 * the streams the token can read, so it never names a concealed one.
 */
export function readablePrefixes(grants: readonly Grant[], bucket: string): 'all' | string[] {
  const prefixes = new Set<string>();
  for (const g of grants) {
    if (!coversBucket(g, bucket)) continue;
    if (g.prefix === '') return 'all';
    prefixes.add(g.prefix);
  }
  // A prefix under another one adds nothing: keep the shortest.
  const sorted = [...prefixes].sort();
  return sorted.filter((p, i) => !sorted.slice(0, i).some((q) => p.startsWith(q)));
}

/**
 * The listing queries that answer "streams under `requested`" for a token that reads
 * only under `readable`: the requested prefix itself when a readable one covers it, else
 * the readable prefixes inside it.
 */
export function listingPrefixes(readable: 'all' | string[], requested: string): string[] {
  if (readable === 'all' || readable.some((p) => requested.startsWith(p))) return [requested];
  return readable.filter((p) => p.startsWith(requested));
}
