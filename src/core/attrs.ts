/**
 * Stream attributes: a small application-owned JSON object (`title`, `metadata`) kept
 * beside the stream. Not part of the byte stream: changing them moves no offset.
 */
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import { absenceError, incarnationError } from './stream.js';
import type { StreamState } from './types.js';

/** Largest encoded attribute object. */
export const MAX_ATTRS_BYTES = 16 * 1024;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** JSON with object keys sorted at every level, so equal attributes have equal text. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (isPlainObject(value)) {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

export type AttrsResult = { ok: true; canonical: string | null } | { ok: false; error: ProtocolError };

/**
 * Validates an attribute object and returns its canonical text; `{}` (or one with only
 * unknown fields, which are not stored) means no attributes.
 */
export function canonicalAttrs(value: unknown): AttrsResult {
  const invalid = (message: string): AttrsResult => ({ ok: false, error: protocolError('INVALID_ATTRS', message) });
  if (!isPlainObject(value)) return invalid('attributes must be a JSON object');
  const kept: Record<string, unknown> = {};
  if (value.title !== undefined) {
    if (typeof value.title !== 'string') return invalid('attrs.title must be a string');
    kept.title = value.title;
  }
  if (value.metadata !== undefined) {
    if (!isPlainObject(value.metadata)) return invalid('attrs.metadata must be a JSON object');
    kept.metadata = value.metadata;
  }
  return { ok: true, canonical: Object.keys(kept).length === 0 ? null : canonicalJson(kept) };
}

export type PutAttrsOutcome = { kind: 'replaced'; stream: StreamState; changed: boolean } | { kind: 'rejected'; error: ProtocolError };

/** Replaces the attributes whole; allowed on a closed stream, since closure only stops appends. */
export function decidePutAttrs(stream: StreamState | undefined, canonical: string | null, incarnation: string | null, nowMs: number): PutAttrsOutcome {
  const refused = absenceError(stream, nowMs) ?? incarnationError(stream!, incarnation);
  if (refused) return { kind: 'rejected', error: refused };
  if (stream!.attrs === canonical) return { kind: 'replaced', stream: stream!, changed: false };
  return { kind: 'replaced', stream: { ...stream!, attrs: canonical }, changed: true };
}
