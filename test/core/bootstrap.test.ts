/**
 * What a bootstrap sends after its snapshot (core/snapshot.ts): the retained messages,
 * each whole, at least one, and whether the response is up to date and closed.
 */
import { describe, expect, it } from 'vitest';
import { bootstrapCompletion, bootstrapUpdates, type UpdatePiece } from '../../src/core/snapshot.js';
import type { StreamState } from '../../src/core/types.js';
import { streamState } from './states.js';

function stream(contentType: string, tail: number, closed = false): StreamState {
  return streamState({ config: { contentType, ttlSeconds: null, expiresAtMs: null }, tail, closed });
}

const piece = (start: number, data: string, whole = true): UpdatePiece => ({ start, data: Buffer.from(data), whole });
const text = (messages: Buffer[]) => messages.map((m) => m.toString());

describe('bootstrap updates', () => {
  it('sends each whole append of a binary stream and stops at one the window cut', () => {
    const s = stream('application/octet-stream', 12);
    const updates = bootstrapUpdates(s, 2, [piece(2, 'abc'), piece(5, 'de'), piece(7, 'fg', false)]);
    expect(text(updates.messages)).toEqual(['abc', 'de']);
    expect(updates.next).toBe(7);
    expect(updates.needsLargerWindow).toBe(false);
  });

  it('asks for a larger window when not one append fits, and for none at the tail', () => {
    const s = stream('application/octet-stream', 10);
    expect(bootstrapUpdates(s, 0, [piece(0, 'abcd', false)])).toMatchObject({ messages: [], next: 0, needsLargerWindow: true });
    expect(bootstrapUpdates(s, 10, [])).toMatchObject({ messages: [], next: 10, needsLargerWindow: false });
  });

  it('sends one part per JSON value, whatever appends they came in', () => {
    const stored = '{"a":1}\n[2,3]\n"x"\n';
    const s = stream('application/json', stored.length);
    const updates = bootstrapUpdates(s, 0, [piece(0, '{"a":1}\n[2,3]\n'), piece(14, '"x"\n')]);
    expect(text(updates.messages)).toEqual(['{"a":1}', '[2,3]', '"x"']);
    expect(updates.next).toBe(stored.length);
  });

  it('is up to date at the tail, and closed only when it also reaches the tail of a closed stream', () => {
    expect(bootstrapCompletion(stream('text/plain', 9), 9)).toEqual({ upToDate: true, closed: false });
    expect(bootstrapCompletion(stream('text/plain', 9, true), 9)).toEqual({ upToDate: true, closed: true });
    expect(bootstrapCompletion(stream('text/plain', 9, true), 4)).toEqual({ upToDate: false, closed: false });
  });
});
