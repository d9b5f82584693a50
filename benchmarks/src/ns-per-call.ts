/**
 * A small harness for comparing variants of one hot-path step in nanoseconds per call: tinybench, every variant
 * in the same process, interleaved rounds (a slow spell on a noisy machine hits every variant), the median per
 * round and the median of the round medians.
 */
import { Bench } from 'tinybench';

/** One variant: `prepare` builds it (stores filled …); the prepared function runs `count` calls. */
export interface Variant {
  name: string;
  prepare(): Promise<(count: number) => unknown> | ((count: number) => unknown);
}

export interface VariantResult {
  name: string;
  /** Median ns per call of each round. */
  rounds: number[];
  /** Median of {@link rounds}. */
  medianNs: number;
}

const median = (values: readonly number[]): number => {
  const sorted = values.slice().sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? (sorted[middle] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
};

/**
 * Measures every variant in `rounds` interleaved rounds of `timeMs` each; a sample is `batch` calls.
 * Each round prepares each variant afresh (and drops it afterwards), with a GC before (`--expose-gc`).
 */
export async function compareVariants(
  variants: readonly Variant[],
  options: { rounds: number; timeMs: number; batch: number },
): Promise<VariantResult[]> {
  const perRound: number[][] = variants.map(() => []);
  for (let round = 0; round < options.rounds; round++) {
    // Alternate the order, so neither variant always runs first after a GC.
    const order = variants.map((_, index) => index);
    if (round % 2 === 1) order.reverse();
    for (const index of order) {
      const variant = variants[index] as Variant;
      globalThis.gc?.();
      let run: ((count: number) => unknown) | undefined = await variant.prepare();
      globalThis.gc?.();
      const bench = new Bench({ time: options.timeMs, warmupTime: Math.min(200, options.timeMs / 2), throws: true });
      const batch = options.batch;
      const task = run;
      const probe = task(1);
      if (probe instanceof Promise) bench.add(variant.name, async () => { await task(batch); });
      else bench.add(variant.name, () => { task(batch); });
      await bench.run();
      const result = bench.tasks[0]?.result;
      if (result?.state !== 'completed') throw new Error(`${variant.name}: ${String(result?.state)}`);
      (perRound[index] as number[]).push((result.latency.p50 * 1e6) / batch);
      run = undefined;
    }
  }
  return variants.map((variant, index) => {
    const rounds = (perRound[index] as number[]).map((ns) => Math.round(ns));
    return { name: variant.name, rounds, medianNs: median(rounds) };
  });
}

export function printResults(title: string, results: readonly VariantResult[]): void {
  console.log(`\n${title}`);
  for (const result of results) {
    console.log(`  ${result.name.padEnd(60)} median ${String(result.medianNs).padStart(6)} ns/call   rounds ${result.rounds.join(', ')}`);
  }
}
