/**
 * Header names of the Durable Streams protocol and rill's extensions, in the lower case
 * that Node's HTTP layer and the Fetch API both use for lookups.
 */
export const H = {
  contentType: 'content-type',
  streamNextOffset: 'stream-next-offset',
  streamOffset: 'stream-offset',
  streamUpToDate: 'stream-up-to-date',
  streamCursor: 'stream-cursor',
  streamClosed: 'stream-closed',
  streamTtl: 'stream-ttl',
  streamExpiresAt: 'stream-expires-at',
  streamSeq: 'stream-seq',
  streamLastSeq: 'stream-last-seq',
  streamIncarnation: 'stream-incarnation',
  streamForkedFrom: 'stream-forked-from',
  streamForkOffset: 'stream-fork-offset',
  streamForkSubOffset: 'stream-fork-sub-offset',
  streamSseDataEncoding: 'stream-sse-data-encoding',
  streamEarliestOffset: 'stream-earliest-offset',
  streamSnapshotOffset: 'stream-snapshot-offset',
  streamSnapshotDigest: 'stream-snapshot-digest',
  streamSnapshotMatch: 'stream-snapshot-match',
  streamAttrs: 'stream-attrs',
  /** A create's retention policy, as JSON (core/retention-policy.ts). */
  streamRetention: 'stream-retention',
  producerId: 'producer-id',
  producerEpoch: 'producer-epoch',
  producerSeq: 'producer-seq',
  producerDigest: 'producer-digest',
  producerExpectedSeq: 'producer-expected-seq',
  producerReceivedSeq: 'producer-received-seq',
  producerOutcome: 'producer-outcome',
  producerClosedEpoch: 'producer-closed-epoch',
  producerClosedSeq: 'producer-closed-seq',
  retryAfter: 'retry-after',
  /** Extension tokens active for the stream a response is about (core/extensions.ts). */
  streamExtensions: 'stream-extensions',
  streamRecordFirst: 'stream-record-first',
  streamRecordStart: 'stream-record-start',
  streamRecordNext: 'stream-record-next',
  streamRecordMatch: 'stream-record-match',
  /** SSE of the record envelope view: the type of each data event's payload. */
  streamDataContentType: 'stream-data-content-type',
} as const;

/**
 * Request headers that carry one value. Node joins a repeated header's values with ", "
 * (or keeps only the first Content-Type), which would turn two Producer-Ids into one
 * producer "a, b": a request that repeats one is refused instead.
 */
export const SINGLE_VALUED_REQUEST_HEADERS: ReadonlySet<string> = new Set([
  H.contentType,
  H.streamClosed,
  H.streamTtl,
  H.streamExpiresAt,
  H.streamSeq,
  H.streamIncarnation,
  H.streamForkedFrom,
  H.streamForkOffset,
  H.streamForkSubOffset,
  H.streamSnapshotDigest,
  H.streamSnapshotMatch,
  H.producerId,
  H.producerEpoch,
  H.producerSeq,
  H.producerDigest,
  H.streamRecordMatch,
  H.streamRetention,
]);

/** Values of the Producer-Outcome header. */
export const PRODUCER_OUTCOME = {
  receiptEvicted: 'receipt-evicted',
  epochClosedByClaim: 'epoch-closed;by=claim',
  staleEpoch: 'stale-epoch',
  keyConflict: 'key-conflict',
  producerExpired: 'producer-expired',
} as const;

/** Largest integer that survives a round trip through JSON: the cap on epochs and seqs. */
export const MAX_SAFE_PRODUCER_NUMBER = Number.MAX_SAFE_INTEGER;

/** A Stream-Seq value is at most this many bytes. */
export const MAX_STREAM_SEQ_BYTES = 256;
