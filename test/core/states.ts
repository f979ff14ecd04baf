/** Stream states for tests of core's pure rules: a live, empty, open stream, then overrides. */
import type { StreamState } from '../../src/core/types.js';

export function streamState(overrides: Partial<StreamState> = {}): StreamState {
  return {
    id: 1,
    name: 'v1/s',
    bucket: null,
    incarnation: 'inc-1',
    config: { contentType: 'application/octet-stream', ttlSeconds: null, expiresAtMs: null },
    createdAtMs: 0,
    lastAccessMs: 0,
    tail: 0,
    closed: false,
    lastStreamSeq: null,
    epochFloor: null,
    fork: null,
    earliestOffset: 0,
    deleted: false,
    forkRefs: 0,
    attrs: null,
    snapshot: null,
    recordFirst: 0,
    recordNext: 0,
    ...overrides,
  };
}
