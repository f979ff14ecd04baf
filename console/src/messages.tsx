/**
 * Rendering messages: JSON pretty-printed in a collapsible block, text as text, bytes as
 * a hex dump; each with its offset.
 */
import type { Message } from '../../src/client/index.js';

export type Kind = 'json' | 'text' | 'binary';

export function kindOf(contentType: string): Kind {
  const type = contentType.split(';')[0]!.trim().toLowerCase();
  if (type === 'application/json' || type.endsWith('+json')) return 'json';
  if (type.startsWith('text/') || type === 'application/x-ndjson' || /;\s*charset=/i.test(contentType)) return 'text';
  return 'binary';
}

/** One rendered item: a JSON message, or the bytes of a read (text and bytes have no framing). */
export interface Item {
  offset: string | undefined;
  value: unknown;
  /** The JSON record ordinal, on a page read by record. */
  record?: number;
}

export function itemsOf(messages: readonly Message[]): Item[] {
  return messages.map((m) => ({ offset: m.offset, value: m.value }));
}

const BYTES_PER_LINE = 16;
const utf8 = new TextDecoder('utf-8');

function hex(byte: number): string {
  return byte.toString(16).padStart(2, '0');
}

function addOffset(offset: string | undefined, delta: number): string {
  if (offset === undefined || !/^\d{20}$/.test(offset)) return '?';
  return (BigInt(offset) + BigInt(delta)).toString().padStart(20, '0');
}

/** A hex dump of at most `limitBytes` (the tail shows the start of a big batch only). */
export function HexDump({ bytes, offset, limitBytes = Infinity }: { bytes: Uint8Array; offset: string | undefined; limitBytes?: number }) {
  const shown = bytes.subarray(0, Math.min(bytes.length, limitBytes));
  const lines: string[] = [];
  for (let at = 0; at < shown.length; at += BYTES_PER_LINE) {
    const row = shown.subarray(at, at + BYTES_PER_LINE);
    const ascii = Array.from(row, (b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.')).join('');
    lines.push(`${addOffset(offset, at)}  ${Array.from(row, hex).join(' ').padEnd(BYTES_PER_LINE * 3 - 1)}  ${ascii}`);
  }
  if (shown.length < bytes.length) lines.push(`… ${bytes.length - shown.length} more bytes`);
  return <pre class="hex">{lines.join('\n')}</pre>;
}

function JsonMessage({ item }: { item: Item }) {
  const pretty = JSON.stringify(item.value, null, 2) ?? 'undefined';
  const lines = pretty.split('\n').length;
  const preview = JSON.stringify(item.value) ?? '';
  return (
    <details open={lines <= 12}>
      <summary>
        <span class="offset">{item.offset ?? '?'}</span> {item.record !== undefined && <span class="record">#{item.record}</span>} <code class="preview">{preview.length > 80 ? `${preview.slice(0, 80)}…` : preview}</code>
      </summary>
      <pre class="json">{pretty}</pre>
    </details>
  );
}

function BytesMessage({ kind, item, limitBytes }: { kind: Kind; item: Item; limitBytes: number }) {
  const bytes = item.value as Uint8Array;
  if (kind === 'text') {
    const text = utf8.decode(bytes.subarray(0, limitBytes));
    return (
      <div>
        <span class="offset">{item.offset ?? '?'}</span>
        <pre class="text">{bytes.length > limitBytes ? `${text}… (${bytes.length - limitBytes} more bytes)` : text}</pre>
      </div>
    );
  }
  return <HexDump bytes={bytes} offset={item.offset} limitBytes={limitBytes} />;
}

export function MessageList({ kind, items, label, limitBytes = Infinity }: { kind: Kind; items: readonly Item[]; label: string; limitBytes?: number }) {
  return (
    <ol class={`messages ${kind}`} aria-label={label}>
      {items.map((item, i) => (
        <li key={item.offset ?? i} data-offset={item.offset} data-record={item.record}>
          {kind === 'json' ? <JsonMessage item={item} /> : <BytesMessage kind={kind} item={item} limitBytes={limitBytes} />}
        </li>
      ))}
    </ol>
  );
}

/** The text a search of the page looks in: JSON as compact text, text decoded, bytes as hex and as ASCII. */
export function searchableOf(kind: Kind, item: Item): string {
  if (kind === 'json') return JSON.stringify(item.value) ?? '';
  const bytes = item.value as Uint8Array;
  if (kind === 'text') return utf8.decode(bytes);
  return `${Array.from(bytes, hex).join(' ')}\n${Array.from(bytes, (b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.')).join('')}`;
}
