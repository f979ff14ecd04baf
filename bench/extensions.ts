/**
 * The workloads of Ursula's extensions (issue 35), on rill alone (the reference server
 * has neither): record-aware catch-up reads against offset reads over many JSON streams,
 * and group transactions against the same appends sent one by one. Each pair is measured
 * in the same run on the same server, and its ratio is a row of its own (per round, then
 * the median), since the table's ratio columns compare servers, not forms of one request.
 */
import type { Row } from './report.js';
import type { BenchSettings } from './settings.js';
import type { BoundsContext } from './bounds.js';
import { prepareRecords, runRecords } from './workloads/records.js';
import { prepareTransactions, timedBatches } from './workloads/transactions.js';

const higher = (key: string, label: string, unit: string): Row => ({ key, label, unit, better: 'higher', rounds: {} });

export async function recordsWorkload(s: BenchSettings, rows: Row[], ctx: BoundsContext): Promise<void> {
  if (ctx.selected(['rill']).length === 0) return;
  const spec = s.records;
  const streams = spec.streams.toLocaleString('en-US');
  const r = {
    offset: higher('records-catchup-offset', `catch-up by offset, ${streams} JSON streams of ${spec.messagesPerStream} messages`, 'messages/s'),
    record: higher('records-catchup-record', `catch-up by record, ${streams} JSON streams of ${spec.messagesPerStream} messages`, 'messages/s'),
    ratio: higher('records-catchup-ratio', `catch-up by record / by offset, ${streams} streams`, 'x'),
    random: higher('records-random', `single records at random ordinals, ${streams} streams`, 'reads/s'),
  };
  rows.push(...Object.values(r));
  const running = await ctx.startAll(['rill'], 'records');
  try {
    const [rill] = running;
    ctx.progress(`records: writing ${streams} streams of ${spec.messagesPerStream} JSON messages`);
    await prepareRecords(rill!.url, spec);
    for (let round = 0; round < s.rounds; round++) {
      const result = await runRecords(rill!.url, spec);
      ctx.progress(
        `records: round ${round + 1}/${s.rounds}: by offset ${Math.round(result.offsetMessagesPerS)} messages/s, by record ${Math.round(result.recordMessagesPerS)} messages/s (${(result.recordMessagesPerS / result.offsetMessagesPerS).toFixed(2)}x), random records ${Math.round(result.randomReadsPerS)} reads/s`,
      );
      (r.offset.rounds.rill ??= []).push(result.offsetMessagesPerS);
      (r.record.rounds.rill ??= []).push(result.recordMessagesPerS);
      (r.ratio.rounds.rill ??= []).push(result.recordMessagesPerS / result.offsetMessagesPerS);
      (r.random.rounds.rill ??= []).push(result.randomReadsPerS);
    }
  } finally {
    await ctx.stopAll(running);
  }
}

/** The rows of one transaction size: as transactions, one by one, and the ratio of the two. */
function transactionRows(size: number, clients: number): { tx: Row; single: Row; ratio: Row } {
  const what = `${size} appends to ${size} JSON streams of one affinity key, ${clients} clients`;
  return {
    tx: higher(`tx-${size}`, `${what}, as one transaction`, 'appends/s'),
    single: higher(`tx-${size}-single`, `${what}, one by one`, 'appends/s'),
    ratio: higher(`tx-${size}-ratio`, `${size}-operation transactions / the same appends one by one`, 'x'),
  };
}

export async function transactionsWorkload(s: BenchSettings, rows: Row[], ctx: BoundsContext): Promise<void> {
  if (ctx.selected(['rill']).length === 0) return;
  const spec = s.transactions;
  const bySize = new Map(spec.sizes.map((size) => [size, transactionRows(size, spec.clients)] as const));
  for (const r of bySize.values()) rows.push(r.tx, r.single, r.ratio);
  const running = await ctx.startAll(['rill'], 'transactions');
  try {
    const [rill] = running;
    await prepareTransactions(rill!.url, spec);
    for (let round = 0; round < s.rounds; round++) {
      for (const [size, r] of bySize) {
        // The form measured first alternates by round, so that drift in the machine's speed falls on both alike.
        const txFirst = round % 2 === 0;
        const first = await timedBatches(rill!.url, spec, size, txFirst);
        const second = await timedBatches(rill!.url, spec, size, !txFirst);
        const [tx, single] = txFirst ? [first, second] : [second, first];
        ctx.progress(`transactions: round ${round + 1}/${s.rounds}, ${size} operations: ${Math.round(tx)} appends/s as transactions, ${Math.round(single)} one by one (${(tx / single).toFixed(2)}x)`);
        (r.tx.rounds.rill ??= []).push(tx);
        (r.single.rounds.rill ??= []).push(single);
        (r.ratio.rounds.rill ??= []).push(tx / single);
      }
    }
  } finally {
    await ctx.stopAll(running);
  }
}
