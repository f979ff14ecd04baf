/** Writing command output: plain text by default, one JSON value per line with --json. */
import type { BucketInfo, Message, StreamInfo } from '../client/index.js';

/** Writes to stdout, waiting when the pipe is full so a slow reader bounds memory. */
export async function out(text: string | Uint8Array): Promise<void> {
  if (process.stdout.write(text)) return;
  await new Promise<void>((resolve) => process.stdout.once('drain', () => resolve()));
}

export function outJson(value: unknown): Promise<void> {
  return out(`${JSON.stringify(value)}\n`);
}

const decoder = new TextDecoder();

function isTextual(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const media = contentType.split(';')[0]!.trim().toLowerCase();
  return media.startsWith('text/') || media.endsWith('+json') || media.endsWith('ndjson') || media === 'application/json';
}

/** One message in the chosen output form. */
export async function printMessage(message: Message, json: boolean, contentType: string | undefined, jsonStream: boolean): Promise<void> {
  if (jsonStream) {
    if (json) return outJson({ offset: message.offset, nextOffset: message.nextOffset, value: message.value });
    return out(`${JSON.stringify(message.value)}\n`);
  }
  const bytes = message.value as Uint8Array;
  if (!json) return out(bytes);
  const body = isTextual(contentType) ? { text: decoder.decode(bytes) } : { base64: Buffer.from(bytes).toString('base64') };
  return outJson({ offset: message.offset, nextOffset: message.nextOffset, ...body });
}

export function printInfo(info: StreamInfo, json: boolean): Promise<void> {
  if (json) return outJson(info);
  const rows: Array<[string, string | number | boolean | undefined]> = [
    ['content-type', info.contentType],
    ['next-offset', info.nextOffset],
    ['closed', info.closed],
    ['last-seq', info.lastSeq],
    ['ttl-seconds', info.ttlSeconds],
    ['expires-at', info.expiresAt],
    ['earliest-offset', info.earliestOffset],
    ['incarnation', info.incarnation],
    ['extensions', info.extensions.length === 0 ? undefined : info.extensions.join(', ')],
    ['record-first', info.recordFirst],
    ['record-next', info.recordNext],
  ];
  return out(
    rows
      .filter(([, value]) => value !== undefined)
      .map(([key, value]) => `${key}: ${String(value)}\n`)
      .join(''),
  );
}

/**
 * A live read says once on stderr when it has caught up and waits for new data, and from
 * where: until then, a silent tail cannot be told from a stuck one.
 */
export function liveNotice(live: boolean): (from: string) => void {
  let said = !live;
  return (from) => {
    if (said) return;
    said = true;
    process.stderr.write(`rill: live from ${from}: waiting for new data (Ctrl-C to stop)\n`);
  };
}

/** Prints a bucket as `buckets show` and `buckets set` do. */
export async function printBucket(info: BucketInfo, json: boolean): Promise<void> {
  if (json) return outJson(info);
  const limit = (value: number | null | undefined) => (value === null || value === undefined ? 'none' : String(value));
  let text = `id: ${info.id}\nstreams: ${info.streamCount}\ncreated-at: ${info.createdAt}\n`;
  if (info.retainedBytes !== undefined) text += `retained-bytes: ${info.retainedBytes}\n`;
  if (info.publicRead !== undefined) text += `public-read: ${info.publicRead ? 'on' : 'off'}\n`;
  if (info.limits) text += `limits: streams ${limit(info.limits.maxStreams)}, subscriptions ${limit(info.limits.maxSubscriptions)}, bytes ${limit(info.limits.maxBytes)}\n`;
  if (info.retention) text += `retention: ${JSON.stringify(info.retention)}\n`;
  await out(text);
}
