import { it, type TestContext } from 'vitest';

/**
 * `it` for a case only some servers can run: on the others it is reported skipped, with `reason` (the total
 * line of `npm test` lists the reasons of its skips).
 */
export function itWhen(runs: boolean, reason: string) {
  return (name: string, body: (context: TestContext) => unknown, timeoutMs?: number) =>
    it(
      name,
      async (context) => {
        context.skip(!runs, reason);
        await body(context);
      },
      timeoutMs,
    );
}
