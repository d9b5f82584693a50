/**
 * Telling a connection that was never established (the request cannot have reached the server, so even a
 * POST is safe to send again) from other network failures (the request may have been executed).
 */

/**
 * Error codes meaning no connection was established, so no byte of the request was sent:
 * refused, unreachable host or network, name resolution failure, connect timeout (undici).
 * `ECONNRESET`, `EPIPE`, `ETIMEDOUT` and socket errors are deliberately absent: they can happen after the
 * request was sent.
 */
export const CONNECTION_NOT_ESTABLISHED_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'UND_ERR_CONNECT_TIMEOUT',
]);

function codeOf(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const code = (value as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

function neverConnected(value: unknown, depth: number): boolean {
  if (typeof value !== 'object' || value === null || depth > 3) return false;
  const code = codeOf(value);
  if (code !== undefined && CONNECTION_NOT_ESTABLISHED_CODES.has(code)) return true;
  // Node's happy-eyeballs connect reports one failure per address in an AggregateError.
  const errors = (value as { errors?: unknown }).errors;
  if (Array.isArray(errors) && errors.length > 0 && code === undefined) {
    return errors.every((error) => neverConnected(error, depth + 1));
  }
  return code === undefined && neverConnected((value as { cause?: unknown }).cause, depth + 1);
}

/**
 * True when a fetch implementation's rejection says the connection was never established.
 *
 * Reads the global fetch's (undici's) `TypeError('fetch failed')` through its `cause` (and an
 * `AggregateError`'s `errors`), and node-fetch v3's `FetchError` by its own `code`.
 */
export function isConnectionNotEstablished(error: unknown): boolean {
  return neverConnected(error, 0);
}
