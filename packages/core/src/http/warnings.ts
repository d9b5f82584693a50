/**
 * Warnings about how the API is set up, each given once per petstore: a code to search for, what is wrong,
 * and the fix. Modelled on express-rate-limit's validations.
 */
import type { PetstoreLogger } from './events.js';

/**
 * The warnings.
 *
 * - `PETSTORE_NO_CLIENT_ADDRESS`: a request without a valid API key came without a usable client address, so
 *   every such caller shares one anonymous counter (30 requests a minute between all of them, by default).
 *   Usually a proxy in front of the app that the framework is not told to trust.
 * - `PETSTORE_DEPRECATED_WITHOUT_SUNSET`: an operation with a handler is deprecated but has no sunset date; it
 *   answers with a `Deprecation` header and keeps working.
 */
export type PetstoreWarningCode = 'PETSTORE_NO_CLIENT_ADDRESS' | 'PETSTORE_DEPRECATED_WITHOUT_SUNSET';

/** One warning: its code and a message that says the fix. */
export interface PetstoreWarning {
  code: PetstoreWarningCode;
  message: string;
}

/**
 * Gives each code once: to `onWarning` when the host set it; otherwise to the request's logger when there is
 * one (Fastify's `request.log`), else to `console.warn`. A reporter that throws is ignored.
 */
export function warningsOnce(onWarning: ((warning: PetstoreWarning) => void) | undefined) {
  const given = new Set<PetstoreWarningCode>();
  return (warning: PetstoreWarning, logger?: PetstoreLogger): void => {
    if (given.has(warning.code)) return;
    given.add(warning.code);
    try {
      if (onWarning !== undefined) onWarning(warning);
      else if (logger !== undefined) logger.warn({ petstore: { warning: warning.code } }, warning.message);
      else console.warn(`[petstore] ${warning.code}: ${warning.message}`);
    } catch {
      // a failing reporter must not break an answer
    }
  };
}
