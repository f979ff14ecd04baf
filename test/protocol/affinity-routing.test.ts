/**
 * Routing of the path-affinity form `/{bucket}/{affinity_key}/{stream}` (src/http/router.ts,
 * src/protocol/ids.ts): what a third segment means, the group transaction route, reserved
 * names, the 122-byte identity, templates and stream references.
 */
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { resolveStreamReference, route, routeTemplate, type Route } from '../../src/http/router.js';
import { AFFINITY_RESERVED_IDS, STREAM_EXTENSIONS } from '../../src/protocol/ids.js';
import { testSeed } from '../helpers/seed.js';

const OFFSET = '00000000000000000042';

function routed<K extends Route['kind']>(path: string, kind: K): Extract<Route, { kind: K }> {
  const r = route(path);
  if (r.kind !== kind) throw new Error(`${path} routed to ${JSON.stringify(r)}`);
  return r as Extract<Route, { kind: K }>;
}

function refusal(path: string): string {
  return routed(path, 'error').error.code;
}

describe('the affinity form', () => {
  test('names the stream {affinity_key}/{stream} of the bucket, stored under b/{bucket}/{affinity_key}/{stream}', () => {
    expect(routed('/workflow/run-42/journal', 'stream').stream).toEqual({
      key: 'b/workflow/run-42/journal',
      bucket: 'workflow',
      id: 'run-42/journal',
      path: '/workflow/run-42/journal',
      affinity: true,
    });
    expect(routed('/workflow/run%2042/caf%C3%A9', 'stream').stream).toMatchObject({ id: 'run 42/café', path: '/workflow/run%2042/caf%C3%A9' });
  });

  test('a keyword third segment is the sub-resource of the two-segment stream', () => {
    for (const ext of STREAM_EXTENSIONS) {
      const r = routed(`/workflow/run-42/${ext}`, 'stream-ext');
      expect(r.ext, ext).toBe(ext);
      expect(r.stream, ext).toMatchObject({ id: 'run-42', affinity: false, key: 'b/workflow/run-42' });
    }
    expect(routed(`/workflow/run-42/snapshot/${OFFSET}`, 'stream-ext')).toMatchObject({ arg: OFFSET, stream: { affinity: false } });
  });

  test('sub-resources of an affinity stream are its fourth and fifth segments', () => {
    for (const ext of STREAM_EXTENSIONS) {
      expect(routed(`/workflow/run-42/journal/${ext}`, 'stream-ext'), ext).toMatchObject({ ext, arg: null, stream: { id: 'run-42/journal', affinity: true } });
    }
    expect(routed(`/workflow/run-42/journal/retention/${OFFSET}`, 'stream-ext')).toMatchObject({ ext: 'retention', arg: OFFSET });
    for (const path of ['/workflow/run-42/journal/nope', `/workflow/run-42/journal/attrs/${OFFSET}`, `/workflow/run-42/journal/snapshot/${OFFSET}/x`, '/workflow/run-42/journal/']) {
      expect(refusal(path), path).toBe('NOT_FOUND');
    }
  });

  test('$transaction is the group transaction of the affinity key', () => {
    expect(route('/workflow/run-42/$transaction')).toEqual({ kind: 'transaction', bucket: 'workflow', affinityKey: 'run-42', path: '/workflow/run-42/$transaction' });
    expect(route('/workflow/run-42/%24transaction')).toMatchObject({ kind: 'transaction', affinityKey: 'run-42' });
    expect(refusal('/workflow/run-42/$transaction/x')).toBe('NOT_FOUND');
    expect(refusal('/workflow/streams/$transaction')).toBe('INVALID_ID');
  });

  test('reserved names: keyed-state and $transaction streams, streams as a key; __ds keeps its control routes', () => {
    expect(refusal('/workflow/run-42/keyed-state')).toBe('INVALID_ID');
    expect(refusal('/workflow/run-42/$transaction/snapshot')).toBe('NOT_FOUND');
    expect(refusal('/workflow/streams/journal')).toBe('INVALID_ID');
    expect(refusal('/workflow/run-42/streams')).toBe('INVALID_ID');
    expect(route('/workflow/__ds/subscriptions')).toMatchObject({ kind: 'subscriptions' });
    for (const id of AFFINITY_RESERVED_IDS) expect(route(`/workflow/run-42/${id}`).kind, id).not.toBe('stream');
    for (const bad of ['..', 'a..b', '%00', '%2F', '']) expect(refusal(`/workflow/${bad}/journal`), bad).toBe('INVALID_ID');
  });

  test('the whole {bucket}/{affinity_key}/{stream} is at most 122 bytes', () => {
    // workflow/kk/ + 110 bytes is exactly 122; é is two bytes: the limit counts bytes, not characters.
    const accents = '%C3%A9'.repeat(55);
    expect(routed(`/workflow/kk/${accents}`, 'stream').stream.affinity).toBe(true);
    expect(refusal(`/workflow/kkk/${accents}`)).toBe('INVALID_ID');
    expect(routed(`/workflow/kk/${'s'.repeat(110)}`, 'stream').stream.affinity).toBe(true);
    expect(refusal(`/workflow/kk/${'s'.repeat(111)}`)).toBe('INVALID_ID');
  });

  test('a stream path routes back to the same stream (seeded)', () => {
    const segment = fc.stringMatching(/^[a-zA-Z0-9._~-]{1,40}$/).filter((s) => !s.includes('..') && s !== '.');
    fc.assert(
      fc.property(segment, segment, (key, local) => {
        const r = route(`/workflow/${encodeURIComponent(key)}/${encodeURIComponent(local)}`);
        if (r.kind !== 'stream') return;
        expect(routed(r.stream.path, 'stream').stream).toEqual(r.stream);
        expect(r.stream.id).toBe(`${key}/${local}`);
      }),
      { seed: testSeed(), numRuns: 300 },
    );
  });
});

describe('templates and references', () => {
  test('templates name the affinity form without keys or names', () => {
    expect(routeTemplate(route('/workflow/run-42/journal'))).toBe('/{bucket}/{affinity_key}/{stream}');
    expect(routeTemplate(route(`/workflow/run-42/journal/snapshot/${OFFSET}`))).toBe('/{bucket}/{affinity_key}/{stream}/snapshot/{offset}');
    expect(routeTemplate(route('/workflow/run-42/snapshot'))).toBe('/{bucket}/{stream}/snapshot');
    expect(routeTemplate(route('/workflow/run-42/$transaction'))).toBe('/{bucket}/{affinity_key}/$transaction');
  });

  test('a stream reference may name an affinity stream, not its transaction', () => {
    expect(resolveStreamReference('http://example.com/workflow/run-42/journal')).toMatchObject({ key: 'b/workflow/run-42/journal', affinity: true });
    expect(resolveStreamReference('/workflow/run-42/$transaction')).toMatchObject({ code: 'INVALID_HEADER' });
  });
});
