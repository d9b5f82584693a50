/**
 * The store deadline (`callTimeoutMs`, or the example servers' `PETSTORE_CALL_TIMEOUT_MS`) that tests give the stores
 * whose calls they need answered: a guard against a hang, not a measurement. A busy CI machine has outlasted the
 * stores' default (1 s) and the example servers' (500 ms) with real work (a consume on a Redis Cluster, a list after
 * creates). Tests of a deadline set their own. One value for every workspace's tests.
 */
export const GUARD_CALL_TIMEOUT_MS = 20_000;
