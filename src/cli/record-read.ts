/**
 * `rill read` and `rill tail` by record ordinal (JSON record coordinates): `--record N`
 * (or `now`), `--tail-records K`, `--max-records N`, and `--ordinals` to print each
 * record's ordinal before it. Any of them makes the read a record read; with `--offset`
 * it is a usage error, since a read starts at an offset or at a record, never at both.
 */
import { InvalidArgumentError, type Command } from 'commander';
import type { JsonRecord, LiveMode, RecordReadOptions, StreamHandle } from '../client/index.js';
import { UsageError } from './errors.js';
import { liveNotice, out, outJson } from './output.js';

export interface RecordFlags {
  record?: number | 'now';
  tailRecords?: number;
  maxRecords?: number;
  ordinals?: boolean;
}

/** `--record`: a record ordinal, or `now`. */
export function parseRecordStart(value: string): number | 'now' {
  if (value === 'now') return 'now';
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n)) throw new InvalidArgumentError('expected a record ordinal (0, 1, 2, ...) or now');
  return n;
}

/** Whether the flags ask for a record read; refuses a start given both ways. */
export function isRecordRead(flags: RecordFlags, command: Command): boolean {
  const asked = flags.record !== undefined || flags.tailRecords !== undefined || flags.maxRecords !== undefined || flags.ordinals === true;
  if (!asked) return false;
  if (flags.record !== undefined && flags.tailRecords !== undefined) throw new UsageError('start at --record or at --tail-records, not both');
  // --offset has a default; only one typed on the command line conflicts.
  if (command.getOptionValueSource('offset') === 'cli') throw new UsageError('a read starts at an --offset or at a record (--record, --tail-records), not both');
  return true;
}

export interface RecordReadRun {
  stream: StreamHandle;
  json: boolean;
  live: LiveMode;
  /** One answer only (--max-records or --max-bytes), then say on stderr where to go on. */
  bounded: boolean;
  /** Where a read without --record or --tail-records starts: the first record (read), or now (tail). */
  from: 0 | 'now';
  maxBytes?: number;
  signal: AbortSignal;
}

/** Reads and prints records: one per line, as `{"record":n,"value":...}` with --json. */
export async function printRecords(run: RecordReadRun, flags: RecordFlags): Promise<void> {
  const options: RecordReadOptions = {
    live: run.bounded ? false : run.live,
    signal: run.signal,
    ...(flags.tailRecords === undefined ? { record: flags.record ?? run.from } : { tailRecords: flags.tailRecords }),
    ...(flags.maxRecords === undefined ? {} : { maxRecords: flags.maxRecords }),
    ...(run.maxBytes === undefined ? {} : { maxBytes: run.maxBytes }),
  };
  const notice = liveNotice(options.live !== false);
  for await (const batch of run.stream.recordBatches(options)) {
    for (const record of batch.records) await printRecord(record, run.json, flags.ordinals === true);
    if (batch.upToDate) notice(`record ${batch.recordNext}`);
    if (run.bounded) {
      if (!batch.upToDate) process.stderr.write(`rill: more to read: --record ${batch.recordNext}\n`);
      return;
    }
  }
}

/** The stored text as it is (plain), with its ordinal and a tab before it (--ordinals). */
function printRecord(record: JsonRecord, json: boolean, ordinals: boolean): Promise<void> {
  if (json) return outJson({ record: record.record, value: record.value });
  return out(ordinals ? `${record.record}\t${record.text}\n` : `${record.text}\n`);
}
