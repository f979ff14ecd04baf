/** BLAKE3-256 digests used on the wire, as 64 lowercase hex digits. */
import { blake3 } from '@noble/hashes/blake3.js';
import { bytesToHex } from '@noble/hashes/utils.js';

/** Producer-Digest: the digest of an append's body. */
export function bodyDigest(body: Uint8Array): string {
  return bytesToHex(blake3(body));
}

/** Stream-Snapshot-Digest covers the content type too: the same bytes under another type differ. */
export function snapshotDigest(contentType: string, body: Uint8Array): string {
  const hasher = blake3.create();
  hasher.update(new TextEncoder().encode(contentType));
  hasher.update(new Uint8Array([0]));
  hasher.update(body);
  return bytesToHex(hasher.digest());
}
