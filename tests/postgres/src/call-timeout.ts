/**
 * The stores' deadline in the suites that count answers: a guard against a hang, not a measurement; on a busy machine
 * a slow answer must not become a 503 and a wrong count (a CI run got a 503 at the default 1 s). As tests/redis's.
 */
export const GUARD_CALL_TIMEOUT_MS = 20_000;
