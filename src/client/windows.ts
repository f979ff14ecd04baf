/**
 * Grouping source messages into processing windows. Count and byte windows depend only
 * on the messages, so a window replayed after a crash ends where it ended before; time
 * windows depend on when messages arrive and are recomputed freely after a crash.
 */
import { RillError } from './errors.js';
import type { Message } from './frames.js';
import { encodeOffset, positionOf } from './offsets.js';

export interface WindowSpec {
  /** Close a window once it holds this many messages. */
  count?: number;
  /** Close a window once its messages take this many bytes of the source. */
  bytes?: number;
  /** Close a window this long after its first message arrived. */
  timeMs?: number;
}

export interface Window<T = unknown> {
  messages: Message<T>[];
  /** The messages' values, in order. */
  values: T[];
  /** Source offset of the window's first message. */
  startOffset: string;
  /** Source offset right after its last message: the result's Stream-Seq and the resume point. */
  endOffset: string;
  /** Source bytes the window covers. */
  bytes: number;
}

export function validateSpec(spec: WindowSpec): void {
  const set = [spec.count, spec.bytes, spec.timeMs].filter((v) => v !== undefined);
  if (set.length === 0) throw new RangeError('a window needs a count, bytes or timeMs bound');
  for (const value of set) {
    if (!Number.isSafeInteger(value) || value! <= 0) throw new RangeError('window bounds must be positive integers');
  }
}

export class WindowBuilder<T> {
  /** @internal */ private messages: Message<T>[] = [];
  /** @internal */ private bytes = 0;
  /** @internal */ private openedAtMs = 0;

  constructor(/** @internal */ private readonly spec: WindowSpec) {}

  get isEmpty(): boolean {
    return this.messages.length === 0;
  }

  /** Bytes the window can still take before its byte bound. */
  get roomBytes(): number {
    return this.spec.bytes === undefined ? Number.POSITIVE_INFINITY : this.spec.bytes - this.bytes;
  }

  add(message: Message<T>, nowMs: number): void {
    if (message.offset === undefined || message.nextOffset === undefined) {
      throw new RillError({ code: 'UNEXPECTED_RESPONSE', message: 'the source did not give exact message offsets; windows need them' });
    }
    if (this.messages.length === 0) this.openedAtMs = nowMs;
    this.messages.push(message);
    this.bytes += message.size;
  }

  get isFull(): boolean {
    const { count, bytes } = this.spec;
    return (count !== undefined && this.messages.length >= count) || (bytes !== undefined && this.bytes >= bytes);
  }

  isDue(nowMs: number): boolean {
    return this.spec.timeMs !== undefined && !this.isEmpty && nowMs - this.openedAtMs >= this.spec.timeMs;
  }

  /** Milliseconds until the time bound closes the open window (the bound itself when empty). */
  msUntilDue(nowMs: number): number | undefined {
    if (this.spec.timeMs === undefined) return undefined;
    return this.isEmpty ? this.spec.timeMs : Math.max(0, this.openedAtMs + this.spec.timeMs - nowMs);
  }

  take(): Window<T> {
    const messages = this.messages;
    const window: Window<T> = {
      messages,
      values: messages.map((m) => m.value),
      startOffset: messages[0]!.offset!,
      endOffset: messages[messages.length - 1]!.nextOffset!,
      bytes: this.bytes,
    };
    this.messages = [];
    this.bytes = 0;
    return window;
  }
}

/**
 * Cuts a byte-stream message so that a byte window ends exactly at its bound (a byte
 * stream has no message boundaries of its own). JSON messages are never cut.
 */
export function splitBytes(message: Message<Uint8Array>, room: number): [Message<Uint8Array>, Message<Uint8Array> | undefined] {
  const start = message.offset === undefined ? undefined : positionOf(message.offset);
  if (room >= message.size || room <= 0 || start === undefined) return [message, undefined];
  const cut = start + room;
  const head = { value: message.value.subarray(0, room), offset: message.offset, nextOffset: encodeOffset(cut), size: room };
  const tail = { value: message.value.subarray(room), offset: encodeOffset(cut), nextOffset: message.nextOffset, size: message.size - room };
  return [head, tail];
}
