/** Internal to the store suites (not exported from @petstore/core/testing). */
import type { ConformanceTestApi } from './test-api.js';

/**
 * The registrar of a store suite's cases: `caseWith(name, body, storeOptions?, enabled?)` registers a case (when
 * `enabled`) that gets a fresh harness from `createStore(storeOptions)`, runs `body(harness.store, harness)`
 * and closes the harness whatever happens.
 */
export function storeCases<Options, Harness extends { store: unknown; close?(): Promise<void> }>(
  test: ConformanceTestApi,
  createStore: (options: Options) => Harness | Promise<Harness>,
  timeoutMs: number,
) {
  return (name: string, body: (store: Harness['store'], harness: Harness) => Promise<void>, storeOptions = {} as Options, enabled = true): void => {
    if (!enabled) return;
    test.it(
      name,
      async () => {
        const harness = await createStore(storeOptions);
        try {
          await body(harness.store, harness);
        } finally {
          await harness.close?.();
        }
      },
      timeoutMs,
    );
  };
}
