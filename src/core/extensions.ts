/**
 * Extension capability advertisement (Ursula's "Durable Streams Extensions"): the
 * `Stream-Extensions` header lists exactly the extension tokens active for the stream a
 * response is about, never one that is merely supported by the server.
 */
import { JSON_RECORDS_TOKEN } from '../protocol/extensions.js';

export const EXTENSION_TOKENS = {
  /** Streams addressed through `/{bucket}/{affinity_key}/{stream}`. */
  pathAffinity: 'path-affinity-v1',
  /** Answers of `POST /{bucket}/{affinity_key}/$transaction`. */
  groupTransaction: 'group-append-transaction-v1',
  /** `application/json` streams (core/records.ts). */
  jsonRecords: JSON_RECORDS_TOKEN,
} as const;

export interface ExtensionContext {
  /** The stream the response is about numbers its records (hasRecords); false when there is none. */
  records: boolean;
  /** The request addressed the stream through the affinity form. */
  affinity: boolean;
  /** The response answers a group transaction. */
  transaction?: boolean;
}

/** The tokens active for a response, in a fixed order; empty when none is. */
export function activeExtensions(context: ExtensionContext): string[] {
  const tokens: string[] = [];
  if (context.affinity || context.transaction) tokens.push(EXTENSION_TOKENS.pathAffinity);
  if (context.transaction) tokens.push(EXTENSION_TOKENS.groupTransaction);
  if (context.records) tokens.push(EXTENSION_TOKENS.jsonRecords);
  return tokens;
}
