/**
 * Running a conformance suite outside the test runner, to see which of its cases fail: for the suites' own
 * meta-tests (a broken store must fail the case that catches it).
 */
import type { ConformanceTestApi } from '../src/testing/test-api.js';

/**
 * Registers a suite into a collector instead of a runner, then runs every case (or only the case named `only`):
 * name → failure message (`undefined` for a case that passed).
 */
export async function outcomesOf(register: (test: ConformanceTestApi) => void, only?: string): Promise<Map<string, string | undefined>> {
  const cases: Array<[string, () => Promise<void>]> = [];
  register({ describe: (_name, body) => body(), it: (name, body) => (only === undefined || name === only ? cases.push([name, body]) : undefined) });
  const outcomes = new Map<string, string | undefined>();
  for (const [name, body] of cases) {
    outcomes.set(
      name,
      await body().then(
        () => undefined,
        (error: unknown) => String(error instanceof Error ? error.message : error),
      ),
    );
  }
  return outcomes;
}
