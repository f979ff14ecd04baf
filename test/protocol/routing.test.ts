/**
 * URL routing and the naming rules behind it (src/http/router.ts, src/protocol/ids.ts):
 * `/v1/stream` names that hold `/` (the upstream suite's `events/sync-1`, `wake/pool-1`,
 * the Yjs provider's `yjs/{service}/docs/{docId}/...`), the one spelling of each name,
 * stream extensions addressed by `?ext=` so that no name collides with one, and the control
 * routes under `{root}/__ds/` for subscriptions, in both URL families.
 */
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { encodeSegment, resolveStreamReference, route, routeTemplate, segmentsAfterFirst, type Route, type SubscriptionTarget } from '../../src/http/router.js';
import {
  isValidStreamId,
  isValidSubscriptionId,
  isValidV1Name,
  MAX_V1_NAME_BYTES,
  scopedPathProblem,
  STREAM_EXTENSIONS,
  v1StreamKey,
} from '../../src/protocol/ids.js';
import { testSeed } from '../helpers/seed.js';

const OFFSET = '00000000000000000042';

function refusal(path: string): string {
  const r = route(path);
  if (r.kind !== 'error') throw new Error(`${path} routed to ${r.kind}`);
  return r.error.code;
}

function streamOf(path: string): { key: string; id: string; path: string; bucket: string | null; affinity: boolean } {
  const r = route(path);
  if (r.kind !== 'stream') throw new Error(`${path} routed to ${JSON.stringify(r)}`);
  return r.stream;
}

function controlOf(path: string): Extract<Route, { kind: 'subscriptions' }> {
  const r = route(path);
  if (r.kind !== 'subscriptions') throw new Error(`${path} routed to ${JSON.stringify(r)}`);
  return r;
}

describe('/v1/stream names with "/"', () => {
  test('the upstream suite\'s paths name streams whose key, id and path keep the slashes', () => {
    for (const name of ['events/sync-123', 'wake/pool-1', 'manual/a', 'a/b/c/d/e', 'plain']) {
      expect(streamOf(`/v1/stream/${name}`)).toEqual({ key: v1StreamKey(name), bucket: null, id: name, path: `/v1/stream/${name}`, affinity: false });
    }
  });

  test('the path encodes each segment on its own, never "/" as %2F', () => {
    const stream = streamOf('/v1/stream/caf%C3%A9/a%20b/x%3Fy');
    expect(stream.id).toBe('café/a b/x?y');
    expect(stream.path).toBe('/v1/stream/caf%C3%A9/a%20b/x%3Fy');
  });

  test('%2F inside a segment is refused: a name has one spelling', () => {
    for (const path of ['a%2Fb', 'a%2fb', 'events/a%2Fb', '%2Fa', 'a%2F']) {
      expect(refusal(`/v1/stream/${path}`), path).toBe('INVALID_ID');
    }
    const r = route('/v1/stream/events%2Fsync-1');
    expect(r.kind === 'error' && r.error.message).toMatch(/%2F/);
  });

  test('empty, "." and ".." segments, control characters and over-long names are refused', () => {
    const bad = ['a//b', 'a/', '/a', 'a/./b', 'a/../b', 'a/%2E%2E/b', 'a/b..c', '.', '..', 'a/%00', 'a/b%0A', 'a/%7F', '', `${'x'.repeat(512)}/${'y'.repeat(512)}`];
    for (const path of bad) expect(refusal(`/v1/stream/${path}`), path).toBe('INVALID_ID');
    expect(streamOf(`/v1/stream/${'x'.repeat(511)}/${'y'.repeat(512)}`).id).toHaveLength(MAX_V1_NAME_BYTES);
    // The limit counts bytes: é is two.
    expect(streamOf(`/v1/stream/a/${encodeURIComponent('é'.repeat(511))}`).id).toHaveLength(513);
    expect(refusal(`/v1/stream/a/${encodeURIComponent('é'.repeat(512))}`)).toBe('INVALID_ID');
    expect(refusal('/v1/stream/%E0%A4%A')).toBe('INVALID_ID');
  });

  test('the Yjs provider\'s names are streams: doc ids of [a-zA-Z0-9_/-] up to 256 characters, .snapshots/{offset}_snapshot', () => {
    const docId = `${'a/B_c-9'.repeat(36)}wxyz`;
    expect(docId).toHaveLength(256);
    for (const name of [`yjs/notes/docs/${docId}/updates`, `yjs/notes/docs/${docId}/.snapshots/00000000000000000042_snapshot`, `yjs/notes/docs/${docId}/awareness/default`]) {
      expect(streamOf(`/v1/stream/${name}`).id, name).toBe(name);
    }
  });

  test('every segment spelled like an extension, last or not, is part of the name', () => {
    for (const ext of STREAM_EXTENSIONS) {
      for (const name of [ext, `${ext}/x`, `a/${ext}`, `a/b/${ext}`, `a/${ext}/${OFFSET}`, `a/${ext}/x/y`, `${ext}/${ext}`]) {
        expect(streamOf(`/v1/stream/${name}`).id, name).toBe(name);
      }
    }
  });

  test('?ext= addresses an extension, with its offset after a "/" (snapshot/{offset}), on any name', () => {
    expect(route('/v1/stream/events/x/snapshot', 'ext=snapshot')).toMatchObject({ kind: 'stream-ext', ext: 'snapshot', arg: null, stream: { id: 'events/x/snapshot', path: '/v1/stream/events/x/snapshot' } });
    expect(route('/v1/stream/events/x', `ext=snapshot/${OFFSET}`)).toMatchObject({ kind: 'stream-ext', ext: 'snapshot', arg: OFFSET, stream: { id: 'events/x' } });
    expect(route('/v1/stream/a/b', `record=3&ext=retention%2F${OFFSET}`)).toMatchObject({ kind: 'stream-ext', ext: 'retention', arg: OFFSET, stream: { id: 'a/b' } });
    for (const ext of STREAM_EXTENSIONS) {
      expect(route('/v1/stream/a/b', `ext=${ext}`), ext).toMatchObject({ kind: 'stream-ext', ext, arg: null, stream: { key: 'v1/a/b' } });
      expect(route(`/v1/stream/${ext}`, `offset=-1&next=x`), ext).toMatchObject({ kind: 'stream', stream: { id: ext } });
    }
  });

  test('an ext that is no extension, or with more than its extension takes, or given twice, is refused with INVALID_QUERY', () => {
    for (const search of ['ext=nope', 'ext=', 'ext=attrs/x', 'ext=stats/x', `ext=snapshot/${OFFSET}/x`, 'ext=snapshot&ext=attrs', 'ext=Snapshot']) {
      const r = route('/v1/stream/a', search);
      expect(r.kind === 'error' && r.error.code, search).toBe('INVALID_QUERY');
    }
  });

  test('"__ds" as the first segment is never a stream; later it is an ordinary segment', () => {
    for (const path of ['/v1/stream/__ds', '/v1/stream/__ds/', '/v1/stream/__ds/x', '/v1/stream/__ds/streams/a']) expect(refusal(path), path).toBe('NOT_FOUND');
    expect(streamOf('/v1/stream/a/__ds').id).toBe('a/__ds');
    expect(isValidV1Name('__ds/x')).toBe(false);
  });

  test('other paths under /v1 stay 404', () => {
    for (const path of ['/v1', '/v1/stream', '/v1/other/x', '/v1/streams/a']) expect(refusal(path), path).toBe('NOT_FOUND');
  });

  test('every name a client can spell routes to one key, and its path spells it again', () => {
    const segment = fc.string({ minLength: 1, maxLength: 12, unit: fc.constantFrom('a', 'b', 'é', ' ', '.', '%', '?', '#', '\u0001', '/', '_', '-') });
    fc.assert(
      fc.property(fc.array(segment, { minLength: 1, maxLength: 5 }), (segments) => {
        const r = route(`/v1/stream/${segments.map(encodeURIComponent).join('/')}`);
        const name = segments.join('/');
        // Served exactly when no segment holds "/" (sent as %2F) and the name follows the rules.
        const acceptable = !segments.some((s) => s.includes('/')) && isValidV1Name(name);
        expect(r.kind).toBe(acceptable ? 'stream' : 'error');
        if (r.kind !== 'stream') return;
        expect(r.stream.id).toBe(name);
        expect(r.stream.key).toBe(v1StreamKey(name));
        expect(streamOf(r.stream.path)).toEqual(r.stream);
      }),
      { seed: testSeed(), numRuns: 500 },
    );
  });
});

describe('bucket stream ids', () => {
  test('stay one segment: "/" in any spelling is not a stream id (a second segment is path affinity)', () => {
    expect(streamOf('/my-bucket/events')).toEqual({ key: 'b/my-bucket/events', bucket: 'my-bucket', id: 'events', path: '/my-bucket/events', affinity: false });
    expect(streamOf('/my-bucket/events/sync-1')).toMatchObject({ id: 'events/sync-1', affinity: true });
    expect(refusal('/my-bucket/events%2Fsync-1')).toBe('INVALID_ID');
    expect(isValidStreamId('a/b')).toBe(false);
  });

  test('"__ds" is reserved like "streams"', () => {
    expect(isValidStreamId('__ds')).toBe(false);
    expect(isValidStreamId('streams')).toBe(false);
    for (const path of ['/my-bucket/__ds', '/my-bucket/__ds/x', '/my-bucket/%5F%5Fds']) expect(refusal(path), path).toBe('NOT_FOUND');
  });
});

describe('control routes under {root}/__ds/', () => {
  const CASES: Array<[string, SubscriptionTarget]> = [
    ['jwks.json', { what: 'jwks' }],
    ['subscriptions', { what: 'list' }],
    ['subscriptions/sub-1', { what: 'subscription', id: 'sub-1' }],
    ['subscriptions/sub-1/streams', { what: 'streams', id: 'sub-1' }],
    ['subscriptions/sub-1/callback', { what: 'callback', id: 'sub-1' }],
    ['subscriptions/sub-1/claim', { what: 'claim', id: 'sub-1' }],
    ['subscriptions/sub-1/ack', { what: 'ack', id: 'sub-1' }],
    ['subscriptions/sub-1/release', { what: 'release', id: 'sub-1' }],
    ['subscriptions/sub-1/streams/one', { what: 'stream', id: 'sub-1', path: 'one' }],
  ];

  test('route every target in the /v1/stream family (scope v1) and in a bucket (scope b/{bucket})', () => {
    for (const [rest, target] of CASES) {
      expect(route(`/v1/stream/__ds/${rest}`), rest).toEqual({ kind: 'subscriptions', scope: 'v1', rootPath: '/v1/stream', target });
      expect(route(`/my-bucket/__ds/${rest}`), rest).toEqual({ kind: 'subscriptions', scope: 'b/my-bucket', rootPath: '/my-bucket', target });
    }
  });

  test('are routed before streams: a percent-encoded "__ds" is the same segment', () => {
    expect(controlOf('/v1/stream/%5F%5Fds/jwks.json').target).toEqual({ what: 'jwks' });
    expect(controlOf('/v1/stream/__ds/subscriptions/snapshot').target).toEqual({ what: 'subscription', id: 'snapshot' });
  });

  test('a member path may hold "/" as %2F (as the upstream suite sends it) or as segments', () => {
    for (const spelled of ['manual%2Fb', 'manual/b', 'manual%2fb']) {
      expect(controlOf(`/v1/stream/__ds/subscriptions/s/streams/${spelled}`).target).toEqual({ what: 'stream', id: 's', path: 'manual/b' });
    }
    expect(controlOf('/v1/stream/__ds/subscriptions/s/streams/a%2Fb/c/caf%C3%A9').target).toMatchObject({ path: 'a/b/c/café' });
  });

  test('a member path follows its scope\'s naming rule', () => {
    for (const bad of ['a%2F%2Fb', 'a/..', '%2Fa', '__ds%2Fx', '']) {
      expect(refusal(`/v1/stream/__ds/subscriptions/s/streams/${bad}`), bad).toBe('INVALID_ID');
    }
    expect(refusal('/my-bucket/__ds/subscriptions/s/streams/a%2Fb%2Fc')).toBe('INVALID_ID');
    // An affinity stream's path, `{affinity_key}/{stream}`, like a /v1 name with "/".
    expect(controlOf('/my-bucket/__ds/subscriptions/s/streams/a%2Fb').target).toMatchObject({ path: 'a/b' });
    expect(controlOf('/v1/stream/__ds/subscriptions/s/streams/a/snapshot').target).toMatchObject({ path: 'a/snapshot' });
    expect(refusal('/my-bucket/__ds/subscriptions/s/streams/__ds')).toBe('INVALID_ID');
    expect(controlOf('/my-bucket/__ds/subscriptions/s/streams/a.b').target).toMatchObject({ path: 'a.b' });
    expect(scopedPathProblem('v1', 'events/a')).toBeNull();
    expect(scopedPathProblem('b/my-bucket', 'events/a')).toBeNull();
    expect(scopedPathProblem('b/my-bucket', 'events/a/b')).toMatch(/\{affinity_key\}\/\{stream\}/);
    expect(scopedPathProblem('b/my-bucket', 'events/snapshot')).toMatch(/reserved/);
  });

  test('subscription ids are 1 to 128 characters of [A-Za-z0-9._~:-]; others answer 400 INVALID_ID saying so', () => {
    const good = ['a', 'sub-1700000000000', 'A.b_c~d:e-f', 'x'.repeat(128)];
    for (const id of good) expect(controlOf(`/v1/stream/__ds/subscriptions/${id}/claim`).target, id).toEqual({ what: 'claim', id });
    for (const id of ['', 'x'.repeat(129), 'a%20b', 'a%2Fb', 'caf%C3%A9', 'a%00', 'a+b', 'a@b']) {
      const r = route(`/v1/stream/__ds/subscriptions/${id}`);
      expect(r.kind === 'error' && [r.error.code, r.error.message], id).toEqual(['INVALID_ID', expect.stringMatching(/subscription ids are 1 to 128/)]);
      expect(isValidSubscriptionId(decodeURIComponent(id))).toBe(false);
    }
  });

  test('anything else under __ds is 404', () => {
    const bad = ['', 'jwks', 'jwks.json/x', 'JWKS.JSON', 'subscription', 'subscriptions/s/nope', 'subscriptions/s/claim/x', 'subscriptions/s/ack/', 'keys'];
    for (const rest of bad) {
      expect(refusal(`/v1/stream/__ds/${rest}`), rest).toBe('NOT_FOUND');
      expect(refusal(`/my-bucket/__ds/${rest}`), rest).toBe('NOT_FOUND');
    }
  });

  test('an invalid bucket is refused before its control routes', () => {
    expect(refusal('/AB/__ds/jwks.json')).toBe('INVALID_ID');
    expect(refusal('/metrics/__ds/jwks.json')).toBe('NOT_FOUND');
  });
});

describe('route templates', () => {
  test('name the control routes without ids, buckets or paths', () => {
    const expected: Record<string, string> = {
      'jwks.json': 'jwks.json',
      subscriptions: 'subscriptions',
      'subscriptions/sub-1': 'subscriptions/{id}',
      'subscriptions/sub-1/streams': 'subscriptions/{id}/streams',
      'subscriptions/sub-1/streams/one': 'subscriptions/{id}/streams/{path}',
      'subscriptions/sub-1/callback': 'subscriptions/{id}/callback',
      'subscriptions/sub-1/claim': 'subscriptions/{id}/claim',
      'subscriptions/sub-1/ack': 'subscriptions/{id}/ack',
      'subscriptions/sub-1/release': 'subscriptions/{id}/release',
    };
    for (const [rest, template] of Object.entries(expected)) {
      expect(routeTemplate(route(`/v1/stream/__ds/${rest}`))).toBe(`/v1/stream/__ds/${template}`);
      expect(routeTemplate(route(`/my-bucket/__ds/${rest}`))).toBe(`/{bucket}/__ds/${template}`);
    }
  });

  test('leave slash names out too', () => {
    expect(routeTemplate(route('/v1/stream/events/sync-1'))).toBe('/v1/stream/{name}');
    expect(routeTemplate(route('/v1/stream/events/sync-1', `ext=snapshot/${OFFSET}`))).toBe('/v1/stream/{name}?ext=snapshot/{offset}');
    expect(routeTemplate(route('/v1/stream/events/sync-1/attrs'))).toBe('/v1/stream/{name}');
  });
});

describe('stream references (Stream-Forked-From)', () => {
  test('resolve slash names given as a path or an absolute URL', () => {
    const expected = { key: 'v1/events/sync-1', bucket: null, id: 'events/sync-1', path: '/v1/stream/events/sync-1', affinity: false };
    expect(resolveStreamReference('/v1/stream/events/sync-1')).toEqual(expected);
    expect(resolveStreamReference(' http://example.com:4437/v1/stream/events/sync-1 ')).toEqual(expected);
  });

  test('refuse control routes, extensions and second spellings', () => {
    expect(resolveStreamReference('/v1/stream/__ds/subscriptions/s')).toMatchObject({ code: 'INVALID_HEADER' });
    expect(resolveStreamReference('/v1/stream/events/x?ext=attrs')).toMatchObject({ code: 'INVALID_HEADER' });
    expect(resolveStreamReference('http://example.com/v1/stream/events/x?ext=attrs')).toMatchObject({ code: 'INVALID_HEADER' });
    expect(resolveStreamReference('/v1/stream/events/x/attrs')).toMatchObject({ id: 'events/x/attrs' });
    expect(resolveStreamReference('/v1/stream/events%2Fx')).toMatchObject({ code: 'INVALID_ID' });
    expect(resolveStreamReference('https://example.com/v1/stream/events%2Fx')).toMatchObject({ code: 'INVALID_ID' });
  });
});

describe('path segments', () => {
  test('encodeSegment encodes as encodeURIComponent does', () => {
    for (const segment of ['', 'ins-1', "a_b.c!~*'()", 'a b', 'a/b', '%', 'é', '\u{1F600}', 'x?y#z', 'A-Z0-9']) {
      expect(encodeSegment(segment), segment).toBe(encodeURIComponent(segment));
    }
    fc.assert(
      fc.property(fc.string({ maxLength: 20, unit: fc.oneof(fc.constantFrom('a', 'Z', '0', '-', '_', '.', '!', '~', '*', "'", '(', ')'), fc.string({ minLength: 1, maxLength: 1, unit: 'grapheme' })) }), (segment) => {
        expect(encodeSegment(segment)).toBe(encodeURIComponent(segment));
      }),
      { seed: testSeed(), numRuns: 1000 },
    );
  });

  test("segmentsAfterFirst splits as split('/').slice(1) does, empty segments and paths without '/' included", () => {
    for (const path of ['', '/', '//', 'a', 'a/b', '/v1/stream/a', '/v1/stream/a/', 'http://host/x/y', '*']) {
      expect(segmentsAfterFirst(path), path).toEqual(path.split('/').slice(1));
    }
    fc.assert(
      fc.property(fc.string({ maxLength: 40, unit: fc.constantFrom('/', 'a', 'b', '%', '.', '?') }), (path) => {
        expect(segmentsAfterFirst(path)).toEqual(path.split('/').slice(1));
      }),
      { seed: testSeed(), numRuns: 1000 },
    );
  });
});
