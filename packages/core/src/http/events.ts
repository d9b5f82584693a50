/**
 * Observability: what the pipeline reports, to an `onEvent` callback and to a per-request logger (Fastify's
 * `request.log`). Events never carry an API key; they name the key by its `keyId`.
 */

/** The kinds of event. */
export type PetstoreEventType = 'unauthorized' | 'rate_limited' | 'banned' | 'internal_error';

/**
 * One event.
 *
 * - `unauthorized`: a 401 (no key, or an invalid one: `presentedKey` says which);
 * - `rate_limited` / `banned`: a 429, with the caller (`keyId`/`accountId`, or the client address) and
 *   `retryAfterSeconds`;
 * - `internal_error`: a 500, or a 503 `service_unavailable` caused by a failing store (fail-closed);
 *   `error` is the cause. A rate-limit store failure absorbed by fail-open reaches only
 *   `rateLimit.onStoreError`, since the request goes on normally.
 */
export interface PetstoreEvent {
  type: PetstoreEventType;
  method: string;
  path: string;
  clientAddress: string | undefined;
  keyId?: string;
  accountId?: string;
  presentedKey?: boolean;
  retryAfterSeconds?: number;
  error?: unknown;
}

/** A pino-style logger (`request.log` in Fastify): `(object, message)`. */
export interface PetstoreLogger {
  info(object: object, message?: string): void;
  warn(object: object, message?: string): void;
  error(object: object, message?: string): void;
}

const LEVEL: Record<PetstoreEventType, keyof PetstoreLogger> = {
  unauthorized: 'info',
  rate_limited: 'info',
  banned: 'warn',
  internal_error: 'error',
};

const MESSAGE: Record<PetstoreEventType, string> = {
  unauthorized: 'petstore: request without a valid API key',
  rate_limited: 'petstore: rate limit exceeded',
  banned: 'petstore: temporarily banned caller',
  internal_error: 'petstore: internal error',
};

/** Sends an event to the callback and the logger; neither may turn an answer into a thrown error. */
export function emitEvent(
  event: PetstoreEvent,
  onEvent: ((event: PetstoreEvent) => void) | undefined,
  logger: PetstoreLogger | undefined,
): void {
  try {
    onEvent?.(event);
  } catch {
    // a failing observer must not break the answer
  }
  if (logger === undefined) return;
  try {
    const { error, ...fields } = event;
    logger[LEVEL[event.type]]({ petstore: fields, ...(error === undefined ? {} : { err: error }) }, MESSAGE[event.type]);
  } catch {
    // ignored on purpose
  }
}
