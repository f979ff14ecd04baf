/** What one bench run does; `--quick` shrinks everything for the smoke test. */
import type { ColdSpec } from './cold.js';
import type { FloodSpec } from './workloads/floods.js';
import type { RecordsSpec } from './workloads/records.js';
import type { SubscriptionSpec } from './workloads/subscriptions.js';
import type { TransactionsSpec } from './workloads/transactions.js';
import type { StallSpec } from './workloads/stalls.js';

export interface BenchSettings {
  /** Rounds of the SSE and catch-up workloads. */
  rounds: number;
  /**
   * Rounds of the append workloads. Short rounds, many of them: this machine's speed
   * drifts over tens of seconds (the bare floor 24k -> 13k requests/s within one round
   * of 56 s), so each server's samples should be spread over the whole workload.
   */
  appendRounds: number;
  warmupS: number;
  appendDurationS: number;
  connections: number;
  /** Stream counts for workload 1. */
  streamCounts: number[];
  producerStreams: number;
  /**
   * Appends/s of the fixed-rate workload, over `producerStreams` streams: below every
   * server's saturation but the file-backed reference's, so its latency is a server's
   * own and not its queue's.
   */
  fixedRatePerS: number;
  sseSubscribers: number;
  /** The spread SSE shape (issue 41): sseSubscribers over this many streams, written at sseSpreadMessagesPerS in all. */
  sseSpreadStreams: number;
  sseSpreadMessagesPerS: number;
  sseMessagesPerS: number;
  sseDurationS: number;
  /** Messages sent first and not measured, so the figures are the servers' steady state. */
  sseWarmupMessages: number;
  /** Long-poll fan-out: readers on one stream and the writer's rate. */
  longPollReaders: number;
  longPollMessagesPerS: number;
  catchUpBytes: number;
  /** The large catch-up: a stream of this many bytes written as 1 MiB appends (issue 41). */
  catchUpLargeBytes: number;
  catchUpJsonMessages: number;
  manyStreams: number;
  /**
   * Appends spread round-robin over this many streams (issue 41: >= 0.95x of rill's own
   * rate at the middle stream count), each round beside a round over the first of them on
   * the same server.
   */
  spreadStreams: number;
  restartRounds: number;
  /** Wait before reading a server's resident memory, so it has settled. */
  settleMs: number;
  /** The limits workload: JSON floods and a stalled SSE reader (bench/workloads/floods.ts). */
  floods: FloodSpec;
  /** The subscriptions workload: one pull-wake subscription over many streams. */
  subscriptions: SubscriptionSpec;
  /** Appends the cross-node long-poll workload delivers from one node to another. */
  crossNodeDeliveries: number;
  /** Record-aware reads against offset reads (bench/workloads/records.ts). */
  records: RecordsSpec;
  /** Group transactions against the same appends one by one (bench/workloads/transactions.ts). */
  transactions: TransactionsSpec;
  /** The longest unrelated wait during large appends and a large read (bench/workloads/stalls.ts). */
  stalls: StallSpec;
  /** The cold tier's workload (bench/cold.ts): its appends run at the middle stream count. */
  cold: ColdSpec;
}

export const FULL: BenchSettings = {
  rounds: 3,
  appendRounds: 7,
  warmupS: 2,
  appendDurationS: 4,
  connections: 50,
  streamCounts: [1, 500, 10_000],
  producerStreams: 500,
  fixedRatePerS: 6000,
  sseSubscribers: 1000,
  sseSpreadStreams: 100,
  sseSpreadMessagesPerS: 200,
  sseMessagesPerS: 20,
  sseDurationS: 8,
  sseWarmupMessages: 20,
  longPollReaders: 1000,
  longPollMessagesPerS: 5,
  catchUpBytes: 10 * 1024 * 1024,
  catchUpLargeBytes: 100 * 1024 * 1024,
  catchUpJsonMessages: 100_000,
  manyStreams: 100_000,
  spreadStreams: 100_000,
  restartRounds: 3,
  settleMs: 1000,
  floods: { refusedElements: 16 * 1024 * 1024 - 1, acceptedElements: 1_000_000, paddedElements: 100_000, idleMs: 1000, stalledMiB: 128 },
  subscriptions: { streams: 10_000, idleS: 2, trickleS: 5, tricklePerS: 20 },
  crossNodeDeliveries: 40,
  records: { streams: 500, messagesPerStream: 400, concurrency: 50, randomReads: 5000 },
  transactions: { clients: 50, sizes: [2, 8], batchesPerClient: 60 },
  stalls: { bytes: 32 * 1024 * 1024, appends: 3 },
  cold: { windows: 10, readsPerRound: 5, uploadBytesPerS: 2 * 1024 * 1024 },
};

export const QUICK: BenchSettings = {
  rounds: 1,
  appendRounds: 1,
  warmupS: 0,
  appendDurationS: 0.5,
  connections: 10,
  streamCounts: [1, 10, 50],
  producerStreams: 20,
  fixedRatePerS: 200,
  sseSubscribers: 10,
  sseSpreadStreams: 2,
  sseSpreadMessagesPerS: 20,
  sseMessagesPerS: 20,
  sseDurationS: 0.5,
  sseWarmupMessages: 2,
  longPollReaders: 10,
  longPollMessagesPerS: 20,
  catchUpBytes: 256 * 1024,
  catchUpLargeBytes: 2 * 1024 * 1024,
  catchUpJsonMessages: 2000,
  manyStreams: 200,
  spreadStreams: 200,
  restartRounds: 1,
  settleMs: 100,
  floods: { refusedElements: 200_000, acceptedElements: 150_000, paddedElements: 10_000, idleMs: 200, stalledMiB: 8 },
  subscriptions: { streams: 300, idleS: 0.3, trickleS: 0.5, tricklePerS: 20 },
  crossNodeDeliveries: 5,
  records: { streams: 20, messagesPerStream: 120, concurrency: 5, randomReads: 100 },
  transactions: { clients: 4, sizes: [2, 8], batchesPerClient: 5 },
  stalls: { bytes: 1024 * 1024, appends: 1 },
  cold: { windows: 10, readsPerRound: 2, uploadBytesPerS: 2 * 1024 * 1024 },
};

export const WORKLOADS = ['appends', 'spread', 'producers', 'rate', 'sse', 'longpoll', 'catchup', 'streams', 'limits', 'drain', 'subscriptions', 'crossnode', 'records', 'transactions', 'stalls', 'cold'] as const;
export type WorkloadName = (typeof WORKLOADS)[number];
