/**
 * Checks a whole number option or argument (`callTimeoutMs`, a window's `limit`, a request's `cost`, …), named
 * `what` in the error.
 * @throws TypeError when `value` is not a safe integer ≥ `min`.
 */
export function assertWhole(value: number, what: string, min: number): void {
  if (!Number.isSafeInteger(value) || value < min) throw new TypeError(`${what} must be a whole number >= ${min}, got ${String(value)}`);
}
