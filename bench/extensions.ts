/**
 * The workloads of Ursula's extensions (issue 35), on rill alone (the reference server
 * has neither): record-aware catch-up reads against offset reads over many JSON streams.
 */
import type { Row } from './report.js';
import type { BenchSettings } from './settings.js';
import type { BoundsContext } from './bounds.js';
import { prepareRecords, runRecords } from './workloads/records.js';

const higher = (key: string, label: string, unit: string): Row => ({ key, label, unit, better: 'higher', rounds: {} });

export async function recordsWorkload(s: BenchSettings, rows: Row[], ctx: BoundsContext): Promise<void> {
  if (ctx.selected(['rill']).length === 0) return;
  const spec = s.records;
  const streams = spec.streams.toLocaleString('en-US');
  const r = {
    offset: higher('records-catchup-offset', `catch-up by offset, ${streams} JSON streams of ${spec.messagesPerStream} messages`, 'messages/s'),
    record: higher('records-catchup-record', `catch-up by record, ${streams} JSON streams of ${spec.messagesPerStream} messages`, 'messages/s'),
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
      (r.random.rounds.rill ??= []).push(result.randomReadsPerS);
    }
  } finally {
    await ctx.stopAll(running);
  }
}
