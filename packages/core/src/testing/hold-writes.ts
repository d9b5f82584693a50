/**
 * Holding a store's writes so that a conformance case's parallel calls all reach the store before any may
 * write: a change that reads and then writes in two steps then loses updates on every run, not only when the
 * timing happens to interleave. Shared by the suites; not exported from `@petstore/core/testing`.
 */
import assert from 'node:assert/strict';

/** The hooks of a harness that can hold its store's writes (see `CategoryStoreHarness.holdWrites`). */
export interface WriteHold {
  holdWrites?(): Promise<{ release(): Promise<void> }>;
  whenBlocked?(count: number): Promise<void>;
}

/**
 * Runs `calls` while the harness holds the store's writes, releasing them once `count` calls are blocked (or once
 * the calls have settled, so a call that fails before it blocks is reported, not timed out); without
 * `holdWrites`, runs them as they come.
 */
export async function whileWritesHeld<T>(harness: WriteHold, count: number, calls: () => Promise<T>): Promise<T> {
  if (harness.holdWrites === undefined) return calls();
  if (harness.whenBlocked === undefined) assert.fail('the harness has holdWrites() but no whenBlocked(count): provide both');
  const hold = await harness.holdWrites();
  let released = false;
  const release = async () => {
    if (released) return;
    released = true;
    await hold.release();
  };
  try {
    const pending = calls();
    // A call that fails before it blocks ends the wait too, so the case reports it instead of timing out.
    const failedEarly = pending.then(
      () => undefined,
      () => undefined,
    );
    await Promise.race([harness.whenBlocked(count), failedEarly]);
    await release();
    return await pending;
  } finally {
    await release();
  }
}
