/**
 * The part of a test runner the conformance suites need: vitest, jest, mocha and `node:test` all have it.
 * Pass your runner's own functions, e.g. `{ describe, it }` from `vitest`.
 */
export interface ConformanceTestApi {
  describe(name: string, body: () => void): void;
  it(name: string, body: () => Promise<void>, timeoutMs?: number): void;
}

