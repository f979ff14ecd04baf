/**
 * The permission decision's properties over random grants: what a token cannot reach is
 * concealed, levels include the ones below, and a listing built from `listingPrefixes`
 * shows exactly the streams the token reads.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decideAccess, listingPrefixes, PERMISSIONS, readablePrefixes, type Grant } from '../../src/core/access.js';
import { testSeed } from '../helpers/seed.js';

const bucket = fc.constantFrom('aaaa', 'bbbb', 'v1', '*');
const name = fc.stringMatching(/^[ab]{0,4}$/);
const grant: fc.Arbitrary<Grant> = fc.record({ bucket, prefix: name, level: fc.constantFrom(...PERMISSIONS) });
const grants = fc.array(grant, { maxLength: 5 });
const rank = (level: string) => PERMISSIONS.indexOf(level as never) + 1;

describe('decideAccess', () => {
  it('conceals a stream no grant reaches, and allows exactly up to the highest level of those that do', () => {
    fc.assert(
      fc.property(grants, fc.constantFrom('aaaa', 'bbbb', 'v1'), name, fc.constantFrom(...PERMISSIONS), (gs, b, stream, need) => {
        const reaching = gs.filter((g) => (g.bucket === b || g.bucket === '*') && stream.startsWith(g.prefix));
        const verdict = decideAccess(gs, need, { kind: 'stream', bucket: b, stream });
        if (reaching.length === 0) return verdict === 'conceal';
        const best = Math.max(...reaching.map((g) => rank(g.level)));
        return verdict === (best >= rank(need) ? 'allow' : 'forbid');
      }),
      { seed: testSeed() },
    );
  });

  it('a listing through listingPrefixes shows exactly the readable names under the requested prefix', () => {
    fc.assert(
      fc.property(grants, fc.uniqueArray(name.filter((n) => n.length > 0)), name, (gs, names, requested) => {
        const readable = (n: string) => decideAccess(gs, 'read', { kind: 'stream', bucket: 'aaaa', stream: n }) === 'allow';
        const prefixes = listingPrefixes(readablePrefixes(gs, 'aaaa'), requested);
        const listed = new Set(names.filter((n) => prefixes.some((p) => n.startsWith(p))));
        const expected = names.filter((n) => n.startsWith(requested) && readable(n));
        expect([...listed].sort()).toEqual(expected.sort());
        // Disjoint queries: no name is under two of them.
        for (const n of names) expect(prefixes.filter((p) => n.startsWith(p)).length).toBeLessThanOrEqual(1);
      }),
      { seed: testSeed() },
    );
  });
});
