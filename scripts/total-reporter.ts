/**
 * The last line of `npm test`: one total over every test file, with the reason of each skip —
 * `Tests: 2240 passed, 0 failed, 23 skipped (12 × the fetch server has no host routes; …)`. A skip's reason is
 * the note given to `ctx.skip(note)`; skips without one (`describe.skipIf`) are counted per file, so none goes
 * unlisted.
 * A test file that failed to load, and a suite whose hook failed (`beforeAll`, `afterAll`, …), count as one failed
 * test each; the tests such a failure kept from running are not counted as skipped.
 */
import type { Reporter, SerializedError, TestCase, TestModule, TestSuite } from 'vitest/node';

/** True when the test's file or one of its suites has errors of its own (a hook or collection error). */
function underFailedSuite(test: TestCase): boolean {
  let parent: TestSuite | TestModule = test.parent;
  while (parent.type === 'suite') {
    if (parent.errors().length > 0) return true;
    parent = parent.parent;
  }
  return parent.errors().length > 0;
}

export default class TotalReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<SerializedError>): void {
    let passed = 0;
    let failed = unhandledErrors.length;
    let skipped = 0;
    const reasons = new Map<string, number>();
    for (const testModule of testModules) {
      failed += [testModule, ...testModule.children.allSuites()].filter((suite) => suite.errors().length > 0).length;
      for (const test of testModule.children.allTests()) {
        const result = test.result();
        if (result.state === 'passed') passed += 1;
        else if (result.state === 'failed') failed += 1;
        else if (result.state === 'skipped' && !underFailedSuite(test)) {
          skipped += 1;
          const reason = result.note ?? `skipped in ${testModule.relativeModuleId} (no reason given)`;
          reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
        }
      }
    }
    const why = [...reasons].map(([reason, count]) => `${count} × ${reason}`).join('; ');
    process.stdout.write(`\nTests: ${passed} passed, ${failed} failed, ${skipped} skipped${why === '' ? '' : ` (${why})`}\n`);
  }
}
