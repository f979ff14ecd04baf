/**
 * rill-streams/client: a fetch-based client for rill (and other Durable Streams servers). It
 * uses only web-standard APIs (fetch, streams, TextEncoder), so it runs in Node.js and
 * in browsers.
 */
export {
  RillClient,
  BucketHandle,
  type ClientOptions,
  type BucketInfo,
  type BucketLimitsView,
  type BucketSettingsChange,
  type UsagePage,
  type UsageRow,
  type BucketListing,
  type ServerStats,
  type StreamStats,
  type StreamColdStats,
  type ProducerInfo,
  type StreamDetails,
  type StreamDetailsListing,
  type ProducerPage,
  type StreamListing,
  type ListOptions,
  type Revocation,
} from './client.js';
export {
  StreamHandle,
  type StreamHandleOptions,
  type StreamInfo,
  type CreateOptions,
  type RetentionPolicyOption,
  type CreateResult,
  type AppendOptions,
  type AppendResult,
  type ProducerIdentity,
  type ProducerAnswer,
} from './stream.js';
export { type Snapshot, type PublishedSnapshot, type Bootstrap, type StreamAttrs, type BatchAck, type ExtrasOptions, type StreamPoint, type Retained } from './extras.js';
export { type ReadOptions, type ReadBatch, type LiveMode } from './read.js';
export { type RecordReadOptions, type RecordBatch, type JsonRecord } from './records.js';
export { type RecordRange } from './headers.js';
export { JSON_RECORDS_TOKEN } from '../protocol/extensions.js';
export { type Message } from './frames.js';
export {
  RillError,
  StreamReplacedError,
  GoneError,
  FencedError,
  StreamSeqConflictError,
  StreamClosedError,
  NotFoundError,
  WakeFencedError,
  AlreadyClaimedError,
  RecordsNotActiveError,
  RecordMatchFailedError,
  RecordTrimmedError,
  RecordBeyondTailError,
  TransactionPartlyAppliedError,
  TransactionsNotSupportedError,
  isRillError,
  CLIENT_ERROR_CODES,
  type RillErrorCode,
  type ClientErrorCode,
} from './errors.js';
export { TRANSACTIONS_TOKEN, type TransactionOperation, type TransactionPayload, type TransactionAck, type TransactionOptions } from './transactions.js';
export { IdempotentProducer, type ProducerOptions, type ProducerReceipt, type WriteOptions } from './producer.js';
export { START, NOW, formatSeq, compareSeq, positionOf } from './offsets.js';
export { DEFAULT_RETRY, type RetryPolicy } from './backoff.js';
export { Transport, type TransportOptions, type FetchLike, type TokenSource } from './http.js';
export type { ErrorCode, ErrorFields } from '../protocol/errors.js';
export { PrefixCountCommitter, OutboxPublisher, type PrefixCountOptions, type CommitContext, type CommitOutcome, type OutboxOptions, type PublishOutcome } from './recipes.js';
export { runProcessor, type ProcessorOptions, type ProcessorRun, type ProcessorSummary, type ResultEvent } from './processor.js';
export { type Window, type WindowSpec } from './windows.js';
export {
  Subscriptions,
  type SubscriptionType,
  type SubscriptionConfig,
  type Subscription,
  type SubscriptionSummary,
  type SubscriptionListing,
  type SubscriptionLink,
  type SubscriptionStreamInfo,
  type WebhookSigning,
  type Wake,
  type WakeRef,
  type Ack,
  type AckResult,
  type WebhookJwk,
  type WebhookJwks,
} from './subscriptions.js';
export { runPullWorker, type PullWorkerOptions, type PullWorkerSummary, type PullBatchContext } from './pull-worker.js';
export {
  verifyWebhook,
  WebhookJwksCache,
  handleWakeRequest,
  parseWakeNotification,
  wakeRequestListener,
  type WebhookVerification,
  type VerifyOptions,
  type JwksCacheOptions,
  type WakeNotification,
  type WakeOutcome,
  type WakeResponse,
  type WakeHandlerOptions,
} from './webhooks.js';
