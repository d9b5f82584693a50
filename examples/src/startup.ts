/**
 * Start-up of the example servers: when one cannot start — a bad variable, a database or Redis it cannot
 * reach, a port in use — it prints one line on stderr saying why, and exits 1. Never a stack trace.
 */

import { describeError, redactSecrets } from '@petstore/internal';

/** The start-up failure line's beginning. */
export const STARTUP_FAILURE_PREFIX = 'petstore example: cannot start:';

/**
 * The one line printed when start-up fails with `error`: no secret of `PETSTORE_DATABASE_URL` or
 * `PETSTORE_REDIS_URL` (of `env`) in it, even where a driver's message quotes a part of the URL.
 */
export function startupFailureLine(error: unknown, env: NodeJS.ProcessEnv = process.env): string {
  return redactSecrets(`${STARTUP_FAILURE_PREFIX} ${describeError(error, { causes: false })}`, [env['PETSTORE_DATABASE_URL']?.trim(), env['PETSTORE_REDIS_URL']?.trim()]);
}

/**
 * Runs `start`; when it fails, prints {@link startupFailureLine} with `printError` (stderr) and exits 1 (`exit`).
 * `process.exit` rather than a pending exit code: a client that failed to connect (ioredis reconnecting, say)
 * must not keep the process alive.
 */
export async function startOrExit(
  start: () => Promise<void>,
  printError: (line: string) => void = (line) => console.error(line),
  exit: (code: number) => void = (code) => process.exit(code),
): Promise<void> {
  try {
    await start();
  } catch (error) {
    printError(startupFailureLine(error));
    exit(1);
  }
}
