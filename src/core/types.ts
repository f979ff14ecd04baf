/**
 * The state the protocol rules read and write. Everything here is plain data: engines
 * load it, `core/` decides, engines store what core returns.
 */
import type { ProtocolError } from '../protocol/errors.js';
import type { ProducerHeaders } from '../protocol/parse.js';
import type { RetentionPolicy } from './retention-policy.js';

export interface StreamConfig {
  /** Normalised content type. */
  contentType: string;
  /** Sliding time-to-live: the stream expires this long after its last read or write. */
  ttlSeconds: number | null;
  /** Absolute expiry. */
  expiresAtMs: number | null;
  /** The stream's own retention policy (core/retention-policy.ts), given on create; absent: its bucket's default, if any. */
  retention?: RetentionPolicy;
}

/** A fork inherits `[0, offset)` of its source and appends after it. */
export interface ForkLink {
  sourceId: number;
  offset: number;
  /** Bytes (or JSON messages) of the source's append at `offset` copied into the fork. */
  subOffset: number;
}

export interface StreamState {
  /** Internal id, unique across incarnations; never reused. */
  id: number;
  /** Storage key: `v1/{name}` or `b/{bucket}/{stream}`. */
  name: string;
  bucket: string | null;
  /** Opaque token, new for every creation of a stream at a name. */
  incarnation: string;
  config: StreamConfig;
  createdAtMs: number;
  /** Anchor of the sliding TTL: the last read or write. */
  lastAccessMs: number;
  /** Position after the last byte. */
  tail: number;
  closed: boolean;
  lastStreamSeq: string | null;
  /** Highest epoch of a producer this stream forgot; null when it forgot none. */
  epochFloor: number | null;
  fork: ForkLink | null;
  /** First readable position; retention raises it. */
  earliestOffset: number;
  /** Deleted (or expired) while forks still read its history: answers 410. */
  deleted: boolean;
  /** Number of streams whose fork link points at this one. */
  forkRefs: number;
  /** Application attributes as canonical JSON text; null when none are set. */
  attrs: string | null;
  /** The visible snapshot, if one was published. Its body is stored apart. */
  snapshot: SnapshotMeta | null;
  /**
   * JSON record coordinates (core/records.ts): the ordinal of the first retained message
   * (F) and the ordinal the next message will get (N). Other streams number their
   * appends the same way, answered only as stats' message count (N - F).
   */
  recordFirst: number;
  recordNext: number;
  /**
   * Where the stream stood at moments of its writing, for an age limit
   * (core/retention-policy.ts); absent when no age limit applies.
   */
  timeMarks?: TimeMark[];
  /** When its oldest time mark passes its age limit: the sweep looks at it then. Absent with no marks. */
  ageDueMs?: number;
}

/** Everything before `offset` (a message boundary, whose message ordinal is `record`) was written at or before `atMs`. */
export interface TimeMark {
  offset: number;
  record: number;
  atMs: number;
}

/** What is known of a stream's visible snapshot without its body. */
export interface SnapshotMeta {
  /** The snapshot covers everything before this position. */
  offset: number;
  contentType: string;
  /** BLAKE3-256 of the content type and body, lowercase hex. */
  digest: string;
}

/** The record ordinals `[start, next)` one write of a JSON stream received. */
export interface RecordRange {
  start: number;
  next: number;
}

/** Where a write's bytes landed. */
export interface Receipt {
  start: number;
  next: number;
  /** The write closed the stream. */
  closed: boolean;
  /**
   * Its record ordinals, on a JSON stream; null on other streams, and on a receipt stored
   * before rill kept record coordinates (its range was never answered, so none is made up).
   */
  records: RecordRange | null;
}

export interface ProducerClaim {
  /** Epoch this claim closed, and the last seq of it that applied; null for a first claim. */
  closedEpoch: number | null;
  closedSeq: number | null;
  digest: string | null;
}

export interface ProducerRecord {
  id: string;
  epoch: number;
  /** Highest applied seq of `epoch`. */
  lastSeq: number;
  /** Receipt of the newest write. */
  receipt: Receipt;
  /** Digest of the newest write, when it carried one. */
  digest: string | null;
  /** The current epoch's seq-0 write. */
  claim: ProducerClaim;
  lastSeenMs: number;
}

export interface ProducerSettings {
  /** At most this many producers per stream. */
  maxProducers: number;
  /** A new producer may replace one idle at least this long. */
  idleEvictMs: number;
  /** A producer idle this long is forgotten. */
  forgetAfterMs: number;
}

export const DEFAULT_PRODUCER_SETTINGS: ProducerSettings = {
  maxProducers: 4096,
  idleEvictMs: 60 * 60 * 1000,
  forgetAfterMs: 7 * 24 * 60 * 60 * 1000,
};

/** What an engine loads about a stream's producers for one producer write. */
export interface ProducerView {
  /** The record of the writing producer, if stored (it may be past the forget cutoff). */
  record: ProducerRecord | null;
  /**
   * The rest is needed only when the writer is new to the stream (no record, or a
   * forgotten one): producers above the forget cutoff, the highest epoch among those at
   * or below it, and the first producer above it in `compareEvictionOrder` order.
   */
  others?: {
    liveCount: number;
    expiredMaxEpoch: number | null;
    leastRecentLive: { id: string; epoch: number; lastSeenMs: number } | null;
  };
}

export interface AppendRequest {
  /** Normalised Content-Type of the request; null when absent. */
  contentType: string | null;
  /** The append's bytes, already framed (JSON: one compact message per line). */
  data: Buffer;
  close: boolean;
  streamSeq: string | null;
  producer: ProducerHeaders | null;
  /** BLAKE3-256 of the body, computed when the request carries Producer-Digest. */
  bodyDigest: string | null;
  incarnation: string | null;
  /** Stream-Record-Match: the record tail the writer expects; null when not sent. */
  recordMatch: number | null;
}

export interface ProducerAck {
  epoch: number;
  seq: number;
  closedEpoch?: number;
  closedSeq?: number;
  outcome?: string;
}

/**
 * Successful outcomes carry the stream's incarnation token for the response; every
 * outcome says whether the stream numbers records (core/records.ts), so that the answer
 * advertises the extension exactly when it is active.
 */
export type AppendOutcome =
  | { kind: 'appended'; incarnation: string; receipt: Receipt; producer: ProducerAck | null; closeOnly: boolean; records: boolean }
  | { kind: 'duplicate'; incarnation: string; receipt: Receipt | null; producer: ProducerAck; records: boolean }
  | { kind: 'already-closed'; incarnation: string; tail: number; recordNext: number; records: boolean }
  | { kind: 'rejected'; error: ProtocolError; records: boolean };

/** The state changes of one decision, applied by the engine in the same transaction. */
export interface AppendChanges {
  stream: StreamState;
  chunk: { start: number; data: Buffer } | null;
  producer: ProducerRecord | null;
  /** Forget every producer of the stream last seen at or before this time. */
  forgetProducersSeenAtOrBeforeMs: number | null;
  /** Producers replaced to make room for a new one. */
  evictProducerIds: string[];
}

export interface Decision<O, C> {
  outcome: O;
  changes: C | null;
}
