/** The exit statuses of `petstore`, and the errors that carry them to the one line it prints. */

/**
 * The exit statuses of `petstore`:
 * - `ok` (0): done;
 * - `failed` (1): not done — no key or record with that keyId, a revoked key that cannot be rotated or updated,
 *   or the store failed (unreachable, timed out);
 * - `usage` (2): a usage error (unknown command or option, a missing or invalid value) or a missing environment
 *   variable; nothing was read or written.
 */
export const EXIT_CODES = { ok: 0, failed: 1, usage: 2 } as const;

/** One of {@link EXIT_CODES}. */
export type ExitCode = (typeof EXIT_CODES)[keyof typeof EXIT_CODES];

/** A usage error (exit 2): its message is the line printed. Internal. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** A command that could not be done (exit 1): its message is the line printed. Internal. */
export class FailedError extends Error {
  override name = 'FailedError';
}
