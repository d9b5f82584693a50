/**
 * The last line of `npm test`: one total over every project, with the reason of each skip —
 * `Tests: 2240 passed, 0 failed, 23 skipped (12 × the fetch server has no host routes; …)`. A skip's reason is
 * the note given to `ctx.skip(note)`; skips without one (`describe.skipIf`) are counted per file, so none goes
 * unlisted.
 * A test file that failed to load counts as one failed test.
 */
import type { Reporter, SerializedError, TestModule } from 'vitest/node';

export default class TotalReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<SerializedError>): void {
    let passed = 0;
    let failed = unhandledErrors.length;
    let skipped = 0;
    const reasons = new Map<string, number>();
    for (const testModule of testModules) {
      let tests = 0;
      for (const test of testModule.children.allTests()) {
        tests += 1;
        const result = test.result();
        if (result.state === 'passed') passed += 1;
        else if (result.state === 'failed') failed += 1;
        else if (result.state === 'skipped') {
          skipped += 1;
          const reason = result.note ?? `skipped in ${testModule.relativeModuleId} (no reason given)`;
          reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
        }
      }
      if (tests === 0 && testModule.state() === 'failed') failed += 1;
    }
    const why = [...reasons].map(([reason, count]) => `${count} × ${reason}`).join('; ');
    process.stdout.write(`\nTests: ${passed} passed, ${failed} failed, ${skipped} skipped${why === '' ? '' : ` (${why})`}\n`);
  }
}
