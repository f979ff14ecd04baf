/** Strings compared as their UTF-8 bytes, by encoding them: the order tests expect of every store. */
export function byBytes(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}
