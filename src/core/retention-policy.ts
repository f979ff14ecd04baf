/**
 * Retention policies: a stream keeps at most `maxBytes` bytes and/or `maxMessages`
 * messages, counted from its tail, and/or what was written in the last `maxAgeMs`. A stream gets its own policy on create
 * (`Stream-Retention`); a bucket's settings give a default for its streams that have
 * none. The executor applies the policy after each append in the append's own
 * transaction (see docs/decisions.md, "Retention policies"), through the rules here.
 */
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import type { ChunkView } from './create.js';
import { hasRecords, messagesHeld } from './records.js';
import { copyState } from './stream.js';
import type { StreamState, TimeMark } from './types.js';

/** A null limit is no limit; a policy has at least one limit. */
export interface RetentionPolicy {
  maxBytes: number | null;
  maxMessages: number | null;
  maxAgeMs: number | null;
}

type LimitName = keyof RetentionPolicy;

/** Ample for any stream and far from float precision (1 PiB, 2^50 messages, 35,000 years). */
export const MAX_RETENTION_LIMIT: Record<LimitName, number> = { maxBytes: 2 ** 50, maxMessages: 2 ** 50, maxAgeMs: 2 ** 50 };

/**
 * Appends one trim walks at most to find where to cut by message count. A trim after an
 * append walks over about that append's messages; a policy first applied to a long stream
 * (a bucket default set later) brings it down over several appends rather than in one
 * long transaction.
 */
export const MAX_TRIM_WALK_APPENDS = 1024;

/**
 * Bytes below the earliest offset are deleted once the earliest offset has crossed a
 * multiple of this: on SQLite a delete first indexes every held append (trimBefore), so
 * doing it after every append would undo its write batching. Reads never see them.
 */
export const PHYSICAL_TRIM_STEP_BYTES = 1024 * 1024;

const NEWLINE = 0x0a;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Reads a policy from a parsed JSON value, strictly (an unknown member is refused, a typo
 * would otherwise look accepted): null, or an object whose members `maxBytes` and
 * `maxMessages` are each null or an integer from 1 to MAX_RETENTION_LIMIT. A policy that
 * limits nothing is no policy (null).
 */
export function parseRetentionPolicy(value: unknown): { ok: true; policy: RetentionPolicy | null } | { ok: false; message: string } {
  if (value === null) return { ok: true, policy: null };
  if (!isPlainObject(value)) return { ok: false, message: 'a retention policy is null or an object such as {"maxBytes": 1048576, "maxMessages": 1000, "maxAgeMs": 86400000}' };
  const policy: RetentionPolicy = { maxBytes: null, maxMessages: null, maxAgeMs: null };
  for (const [name, limit] of Object.entries(value)) {
    if (name !== 'maxBytes' && name !== 'maxMessages' && name !== 'maxAgeMs') {
      return { ok: false, message: `a retention policy has no member ${JSON.stringify(name).slice(0, 80)}: they are maxBytes, maxMessages and maxAgeMs` };
    }
    const valid = limit === null || (typeof limit === 'number' && Number.isInteger(limit) && limit >= 1 && limit <= MAX_RETENTION_LIMIT[name]);
    if (!valid) return { ok: false, message: `${name} must be null or an integer from 1 to ${MAX_RETENTION_LIMIT[name]}` };
    policy[name] = limit as number | null;
  }
  return { ok: true, policy: policy.maxBytes === null && policy.maxMessages === null && policy.maxAgeMs === null ? null : policy };
}

/** The `Stream-Retention` header of a create: the policy as JSON, read as parseRetentionPolicy reads it. */
export function parseRetentionHeader(text: string): { ok: true; policy: RetentionPolicy | null } | { ok: false; error: ProtocolError } {
  const invalid = (message: string) => ({ ok: false as const, error: protocolError('INVALID_RETENTION_POLICY', `Stream-Retention: ${message}`) });
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return invalid('the header is JSON, such as {"maxMessages": 1000}');
  }
  const read = parseRetentionPolicy(value);
  return read.ok ? read : invalid(read.message);
}

/** The stored form (a TEXT column of the SQL engines): canonical JSON, or null for none. */
export function retentionToStored(policy: RetentionPolicy | undefined): string | null {
  return policy === undefined ? null : JSON.stringify({ maxBytes: policy.maxBytes, maxMessages: policy.maxMessages, maxAgeMs: policy.maxAgeMs });
}

/** A stored policy; anything this rill did not write reads as none. */
export function retentionFromStored(stored: string | null): RetentionPolicy | undefined {
  if (stored === null) return undefined;
  try {
    const read = parseRetentionPolicy(JSON.parse(stored));
    return read.ok && read.policy !== null ? read.policy : undefined;
  } catch {
    return undefined;
  }
}

/** A stream's own policy replaces its bucket's default whole: it was asked for on create. */
export function policyInForce(stream: StreamState, bucketDefault: RetentionPolicy | undefined): RetentionPolicy | undefined {
  return stream.config.retention ?? bucketDefault;
}

/** Where the policy cuts: the new earliest offset, and its message ordinal when the cut knows it (else the engine counts it). */
export interface PolicyTrim {
  offset: number;
  recordFirst: number | null;
}

/** The append starting at or containing a position below the tail. */
export type AppendAt = (position: number) => ChunkView | null;

/** The first message boundary at or after `position` (< tail): appends of a JSON stream hold whole messages. */
export function boundaryAtOrAfter(position: number, appendAt: AppendAt, json: boolean): number {
  const anchor = appendAt(position);
  if (anchor === null || anchor.start === position) return position;
  const end = anchor.start + anchor.data.length;
  if (!json) return end;
  const newline = anchor.data.indexOf(NEWLINE, position - anchor.start - 1);
  return newline < 0 ? end : anchor.start + newline + 1;
}

/** The boundary `count` messages after the earliest offset, walking at most MAX_TRIM_WALK_APPENDS appends. */
function skipMessages(stream: StreamState, count: number, appendAt: AppendAt, json: boolean): PolicyTrim {
  let position = stream.earliestOffset;
  let left = count;
  for (let walked = 0; left > 0 && position < stream.tail && walked < MAX_TRIM_WALK_APPENDS; walked++) {
    const anchor = appendAt(position);
    if (anchor === null) break;
    let at = position - anchor.start;
    if (!json) {
      at = anchor.data.length;
      left--;
    }
    while (left > 0 && at < anchor.data.length) {
      const newline = anchor.data.indexOf(NEWLINE, at);
      at = newline < 0 ? anchor.data.length : newline + 1;
      if (newline >= 0) left--;
    }
    position = anchor.start + at;
  }
  return { offset: position, recordFirst: stream.recordFirst + (count - left) };
}

/**
 * Where a policy cuts a stream, or null when it holds no more than the policy keeps. The
 * cut is the lowest message boundary that leaves at most `maxMessages` messages and at
 * most `maxBytes` bytes after it, and nothing before the newest time mark older than
 * `maxAgeMs` (ageCut), so no byte the policy keeps is ever trimmed; a last message
 * larger than maxBytes is trimmed too ("at most" holds). Never backward.
 */
export function policyTrimPoint(stream: StreamState, policy: RetentionPolicy, appendAt: AppendAt, nowMs: number): PolicyTrim | null {
  if (stream.deleted) return null;
  const json = hasRecords(stream);
  let trim: PolicyTrim = ageCut(stream, policy, nowMs) ?? { offset: stream.earliestOffset, recordFirst: stream.recordFirst };
  const excess = policy.maxMessages === null ? 0 : messagesHeld(stream) - policy.maxMessages;
  if (excess > 0) {
    const byCount = skipMessages(stream, excess, appendAt, json);
    if (byCount.offset > trim.offset) trim = byCount;
  }
  if (policy.maxBytes !== null && stream.tail - trim.offset > policy.maxBytes) {
    const offset = boundaryAtOrAfter(stream.tail - policy.maxBytes, appendAt, json);
    if (offset > trim.offset) trim = { offset, recordFirst: offset === stream.tail ? stream.recordNext : null };
  }
  return trim.offset > stream.earliestOffset ? trim : null;
}

/**
 * An age limit cuts at the newest time mark older than it: every byte before that mark
 * was written before now - maxAgeMs. Bytes after it may be as old but are kept (marks
 * are at most markIntervalMs apart), so no byte the policy keeps is trimmed.
 */
function ageCut(stream: StreamState, policy: RetentionPolicy, nowMs: number): PolicyTrim | null {
  if (policy.maxAgeMs === null || stream.timeMarks === undefined) return null;
  let cut: PolicyTrim | null = null;
  for (const mark of stream.timeMarks) {
    if (mark.atMs >= nowMs - policy.maxAgeMs) break;
    if (mark.offset > stream.earliestOffset) cut = { offset: mark.offset, recordFirst: mark.record };
  }
  return cut;
}

/** Most time marks a stream keeps: past it the oldest goes, which only delays its cut to the next one's. */
export const MAX_TIME_MARKS = 64;

/** Marks of one age limit are at least this far apart (and at least a thirty-second of the limit). */
export const MIN_MARK_INTERVAL_MS = 1000;

export function markIntervalMs(maxAgeMs: number): number {
  return Math.max(MIN_MARK_INTERVAL_MS, Math.floor(maxAgeMs / 32));
}

/**
 * The stream's time marks after an append at `nowMs`, under `policy`: the tail as it is
 * now, replacing the newest mark while in the same interval (so a mark's time is at most
 * one interval after the bytes it covers were written, and marks of past intervals never
 * move); none without an age limit. The state unchanged when nothing changes.
 */
export function markedAfterAppend(stream: StreamState, policy: RetentionPolicy | undefined, nowMs: number): StreamState {
  if (policy?.maxAgeMs == null) return stream.timeMarks === undefined ? stream : withMarks(stream, [], policy);
  const interval = markIntervalMs(policy.maxAgeMs);
  const marks = stream.timeMarks ?? [];
  const last = marks[marks.length - 1];
  const mark: TimeMark = { offset: stream.tail, record: stream.recordNext, atMs: nowMs };
  const sameInterval = last !== undefined && Math.floor(last.atMs / interval) === Math.floor(nowMs / interval);
  const next = sameInterval ? [...marks.slice(0, -1), mark] : [...marks, mark];
  return withMarks(stream, next.slice(-MAX_TIME_MARKS), policy);
}

/** The state with `marks` kept past its earliest offset, and when the sweep should look at it next. */
export function withMarks(stream: StreamState, marks: TimeMark[], policy: RetentionPolicy | undefined): StreamState {
  const next = copyState(stream);
  const kept = marks.filter((m) => m.offset > stream.earliestOffset);
  delete next.timeMarks;
  delete next.ageDueMs;
  if (kept.length === 0 || policy?.maxAgeMs == null) return next;
  next.timeMarks = kept;
  // Due once the oldest mark is older than the limit (ageCut's strict comparison).
  next.ageDueMs = kept[0]!.atMs + policy.maxAgeMs + 1;
  return next;
}

/**
 * The stream once a policy cut it at `offset`, whose message ordinal is `recordFirst`. A
 * visible snapshot the cut passed is withdrawn: it summarises history up to an offset
 * now trimmed, so it no longer joins the retained messages into a whole state, and
 * bootstrap then starts at the earliest retained offset (planBootstrap).
 */
export function trimmedByPolicy(stream: StreamState, offset: number, recordFirst: number): StreamState {
  const next = copyState(stream);
  next.earliestOffset = offset;
  next.recordFirst = recordFirst;
  if (next.snapshot !== null && next.snapshot.offset < offset) next.snapshot = null;
  return next;
}

/**
 * Applies a policy to a stream after a write (`appended`) or when the sweep finds its
 * oldest mark due: marks first, then the cut. Null when nothing changes.
 */
export function applyPolicy(
  stream: StreamState,
  policy: RetentionPolicy | undefined,
  appendAt: AppendAt,
  recordAt: (offset: number) => number,
  nowMs: number,
  appended: boolean,
): StreamState | null {
  const marked = appended ? markedAfterAppend(stream, policy, nowMs) : withMarks(stream, stream.timeMarks ?? [], policy);
  const trim = policy === undefined ? null : policyTrimPoint(marked, policy, appendAt, nowMs);
  if (trim === null) return marked === stream || sameMarks(marked, stream) ? null : marked;
  const cut = trimmedByPolicy(marked, trim.offset, trim.recordFirst ?? recordAt(trim.offset));
  return withMarks(cut, cut.timeMarks ?? [], policy);
}

function sameMarks(a: StreamState, b: StreamState): boolean {
  return a.ageDueMs === b.ageDueMs && JSON.stringify(a.timeMarks) === JSON.stringify(b.timeMarks);
}

/** Whether bytes below the earliest offset are deleted now (see PHYSICAL_TRIM_STEP_BYTES). */
export function physicalTrimDue(earliestBefore: number, earliestAfter: number): boolean {
  return Math.floor(earliestAfter / PHYSICAL_TRIM_STEP_BYTES) > Math.floor(earliestBefore / PHYSICAL_TRIM_STEP_BYTES);
}
