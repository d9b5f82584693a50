/** The lowercase hex text of `bytes` (a key digest, say), read in place: no copy of the view's buffer. */
export function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}
